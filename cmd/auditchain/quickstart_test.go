package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asCLIEnv, when set, makes the test binary be the auditchain command (see
// TestMain), so the README's commands run through run() unchanged.
const asCLIEnv = "AUDITCHAIN_TEST_AS_CLI"

// quickstartBlocks returns the shell blocks of the README's "Quickstart"
// section, in order, as written.
func quickstartBlocks(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Quickstart\n")
	if !ok {
		t.Fatal(`README.md has no "## Quickstart" section`)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)```\n").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) < 2 {
		t.Fatalf("README quickstart: want a block starting the server and at least one more, got %d", len(blocks))
	}
	return blocks
}

// freeAddr is a loopback address nothing listens on (the port closed again
// at once; the server binds it a moment later).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The README's quickstart, run as written, twice in a row in the same
// directory, as a reader who comes back to it does: an `auditchain` on PATH
// that is this very program, a fresh directory, no configuration but the
// address (so parallel runs do not meet on port 8080). The first block starts
// the server and runs in the background, as a reader runs it in a terminal of
// its own, and is stopped with Ctrl-C (SIGINT) at the end of each run, as the
// README says; the others run in order in one bash with -e and pipefail, so
// any command that fails, or any check the README makes, fails the test. The
// second run must work on what the first left, and neither may leave a file
// outside data/ (which git ignores): no key in the repository's root.
func TestREADMEQuickstartRunsAsWritten(t *testing.T) {
	blocks := quickstartBlocks(t)
	for _, tool := range []string{"bash", "curl", "jq", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			// .ci/run checks they are there, so CI never skips this.
			t.Skipf("the README quickstart needs %s on PATH", tool)
		}
	}
	// The first block builds the binary: here the test binary stands in.
	if !strings.HasPrefix(blocks[0], "go build -o auditchain ./cmd/auditchain ") {
		t.Fatalf("README quickstart: the first block must build the binary, got %q", blocks[0])
	}
	blocks = blocks[1:]
	if !strings.HasPrefix(blocks[0], "auditchain serve") {
		t.Fatalf("README quickstart: the second block must start the server (`auditchain serve …`), got %q", blocks[0])
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	work := filepath.Join(dir, "work")
	for _, d := range []string{bin, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeCLIWrapper(t, bin)
	addr := freeAddr(t)
	env := []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + dir,
		"AUDITCHAIN_ADDR=" + addr,
		"AUDITCHAIN_URL=http://" + addr,
	}
	for round := 1; round <= 2; round++ {
		out := runQuickstartOnce(t, blocks, work, env, addr)
		t.Logf("README quickstart, run %d:\n%s", round, out)
	}
	entries, err := os.ReadDir(work)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "data" {
			t.Errorf("README quickstart left %s in the directory it runs in (the repository's root for a reader): its files belong in data/, which git ignores", e.Name())
		}
	}
}

// runQuickstartOnce starts the server block, runs the other blocks against
// it, stops the server with SIGINT and answers the blocks' output.
func runQuickstartOnce(t *testing.T, blocks []string, work string, env []string, addr string) []byte {
	t.Helper()
	server := exec.Command("bash", "-euo", "pipefail", "-c", blocks[0])
	server.Dir, server.Env = work, env
	server.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var serverErr bytes.Buffer
	server.Stderr = &serverErr
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			syscall.Kill(-server.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	lines := bufio.NewScanner(stdout)
	started := false
	for !started && lines.Scan() {
		started = strings.HasPrefix(lines.Text(), "auditchain listening on http://"+addr)
	}
	go func() {
		io.Copy(io.Discard, stdout)
		exited <- server.Wait()
	}()
	if !started {
		t.Fatalf("README quickstart: `%s` did not start the server; stderr:\n%s", strings.TrimSpace(blocks[0]), serverErr.String())
	}

	script := strings.Join(blocks[1:], "\n")
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = work, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README quickstart failed: %v\n%s\nserver stderr:\n%s", err, out, serverErr.String())
	}
	// Ctrl-C in the server's terminal: it finishes and exits cleanly.
	syscall.Kill(-server.Process.Pid, syscall.SIGINT)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("README quickstart: the server did not exit cleanly on Ctrl-C: %v\n%s", err, serverErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("README quickstart: the server did not stop within 30s of Ctrl-C\n%s", serverErr.String())
	}
	return out
}

// writeCLIWrapper writes bin/auditchain, a stand-in for the installed
// command that runs this test binary as the CLI. It passes on GORACE
// (TestMain's), which the scripts' environment does not carry.
func writeCLIWrapper(t *testing.T, bin string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := "#!/bin/sh\n" + asCLIEnv + "=1 GORACE=" + strconv.Quote(os.Getenv("GORACE")) + " exec " + strconv.Quote(self) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "auditchain"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
}
