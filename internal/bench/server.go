package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ServerExeEnv names the environment variable that, when Options.Exe is
// empty, gives the binary run as the started server: the generator of one
// build then drives the server of another (an A/B against a commit whose
// bench lacks the workload).
const ServerExeEnv = "AUDITCHAIN_BENCH_SERVER"

// LiftedQuotas are the serve flags that keep quotas out of the way of a load run.
var LiftedQuotas = []string{"--daily-event-quota", "1000000000", "--batch-rate-limit", "1000000000"}

// LiftedCaps lift the per-account caps on streams and keys (the listeners
// workload opens thousands of streams on one account) and the throttles of
// test notifications (webhook-deliver queues its rows with them) through
// the environment, which a build without those flags ignores: an A/B
// against such a build still starts.
var LiftedCaps = []string{"AUDITCHAIN_MAX_STREAMS_PER_ACCOUNT=1000000000", "AUDITCHAIN_MAX_KEYS_PER_ACCOUNT=1000000000",
	"AUDITCHAIN_TEST_NOTIFICATION_LIMIT_PER_ACCOUNT=1000000000", "AUDITCHAIN_TEST_NOTIFICATION_LIMIT_GLOBAL=1000000000"}

// LiftedEnv reads LiftedCaps as a getenv does.
func LiftedEnv(name string) string {
	for _, kv := range LiftedCaps {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	return ""
}

// localServer is an `auditchain serve` child started by the generator.
type localServer struct {
	cmd     *exec.Cmd
	pid     int // the server itself (under a wrapper such as strace, its child)
	url     string
	logPath string
	done    chan error
}

// startServer runs wrap... exe serve --addr 127.0.0.1:0 --db db (quotas lifted)
// and waits for its "auditchain listening on" line.
func startServer(ctx context.Context, exe string, wrap []string, db string, extra []string, logPath string) (*localServer, error) {
	args := []string{exe, "serve", "--addr", "127.0.0.1:0", "--db", db, "--log-level", "warn"}
	args = append(args, LiftedQuotas...)
	args = append(args, extra...)
	return startListening(ctx, wrap, args, logPath, "auditchain listening on ")
}

// startListening runs wrap... args (a server of this binary) and waits for
// the stdout line that starts with listening and goes on with its URL.
func startListening(ctx context.Context, wrap, cmdline []string, logPath, listening string) (*localServer, error) {
	args := append(append([]string{}, wrap...), cmdline...)
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), LiftedCaps...)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start server: %w", err)
	}
	s := &localServer{cmd: cmd, pid: cmd.Process.Pid, logPath: logPath, done: make(chan error, 1)}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), listening); ok {
				urlc <- strings.TrimSpace(u)
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() { s.done <- cmd.Wait(); logf.Close() }()
	select {
	case s.url = <-urlc:
	case err := <-s.done:
		s.done <- err
		return nil, fmt.Errorf("server exited before listening (%v); its log: %s", err, tail(logPath))
	case <-time.After(60 * time.Second):
		s.stop()
		return nil, fmt.Errorf("server did not print its address within 60s; its log: %s", tail(logPath))
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	}
	if len(wrap) > 0 {
		// The wrapper (strace, taskset…) runs the server as its child: measure that.
		if c := firstChild(s.pid); c > 0 {
			s.pid = c
		}
	}
	return s, nil
}

// stop asks the server to shut down (SIGTERM: in-flight requests finish and
// SQLite checkpoints its WAL) and waits for it.
func (s *localServer) stop() error {
	_ = syscall.Kill(s.pid, syscall.SIGTERM)
	if s.pid != s.cmd.Process.Pid {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case err := <-s.done:
		return err
	case <-time.After(45 * time.Second):
		_ = s.cmd.Process.Kill()
		return errors.New("server did not stop within 45s; killed")
	}
}

func firstChild(pid int) int {
	for range 50 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if f := strings.Fields(string(b)); len(f) > 0 {
			c, _ := strconv.Atoi(f[0])
			return c
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// procSample is what /proc says about a process at one moment.
type procSample struct {
	cpu   time.Duration // utime + stime
	hwmKB int64         // peak resident set (VmHWM)
	rssKB int64         // current resident set (VmRSS)
	// From /proc/PID/io, every thread of the process: bytes handed to write
	// calls (wchar), bytes sent to the storage layer (write_bytes: the page
	// cache's dirtied pages, the WAL and the checkpoint's copy), and write
	// system calls (syscw). ioOK is false where the file cannot be read.
	wchar, writeBytes, syscw int64
	ioOK                     bool
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

func sampleProc(pid int) (procSample, error) {
	var s procSample
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name (field 2) may hold spaces; fields after ')' are fixed.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return s, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	s.cpu = time.Duration(ut+st) * (time.Second / clockTicks)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			s.hwmKB = parseKB(v)
		} else if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			s.rssKB = parseKB(v)
		}
	}
	s.wchar, s.writeBytes, s.syscw, s.ioOK = readProcIO(pid)
	return s, nil
}

// readProcIO reads the write counters of /proc/PID/io (readable by the
// process's owner).
func readProcIO(pid int) (wchar, writeBytes, syscw int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0, 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "wchar":
			wchar = n
		case "write_bytes":
			writeBytes = n
		case "syscw":
			syscw = n
		}
	}
	return wchar, writeBytes, syscw, true
}

func parseKB(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
	return n
}

// sqliteBytes is the size on disk of a SQLite database with its WAL and shm.
func sqliteBytes(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
