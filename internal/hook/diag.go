package hook

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// DiagLog is where a hook run's diagnostics go (docs/hooks.md "Diagnostics"):
// hook.log in the spool directory, opened on the first line so that a run
// with nothing to say touches no file, and Also (nil: nowhere else). Never
// the host's stderr by default: Codex shows a blocking hook's whole stderr
// to the model as the reason, and other hosts print it to the user.
type DiagLog struct {
	Dir  string
	Also io.Writer
	Now  func() time.Time

	f      *os.File
	failed bool
}

// maxDiagLog bounds hook.log: past it the file moves to hook.log.1 (one
// generation kept).
const maxDiagLog = 1 << 20

// DiagLogName is the diagnostics file's name in the spool directory.
const DiagLogName = "hook.log"

// Write writes p (one or more lines) to the log, each line stamped with the
// time and the process id. It never fails: a diagnostic that cannot be
// written is dropped.
func (d *DiagLog) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if d.Also != nil {
		d.Also.Write(p)
	}
	if d.f == nil && !d.failed {
		d.open()
	}
	if d.f != nil {
		now := time.Now
		if d.Now != nil {
			now = d.Now
		}
		prefix := now().UTC().Format(time.RFC3339Nano) + " pid " + strconv.Itoa(os.Getpid()) + " "
		d.f.Write(append([]byte(prefix), p...))
	}
	return len(p), nil
}

func (d *DiagLog) open() {
	path := filepath.Join(d.Dir, DiagLogName)
	if fi, err := os.Stat(path); err == nil && fi.Size() > maxDiagLog {
		os.Rename(path, path+".1")
	}
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		d.failed = true
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		d.failed = true
		return
	}
	d.f = f
}

// Close closes the file when one was opened.
func (d *DiagLog) Close() error {
	if d.f == nil {
		return nil
	}
	return d.f.Close()
}
