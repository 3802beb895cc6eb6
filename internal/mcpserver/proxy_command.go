package mcpserver

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// terminateAfter is how long Close waits for the upstream command at each
// step of its shutdown.
const terminateAfter = 5 * time.Second

// CommandUpstream starts cmd as the upstream MCP server of a Proxy: its
// stdout is read, its stdin written. Closing it shuts the command down as
// MCP's stdio transport says a client does: stdin closed, then SIGTERM if
// it has not exited, then SIGKILL.
func CommandUpstream(cmd *exec.Cmd) (io.ReadWriteCloser, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mcp proxy: start the upstream server: %w", err)
	}
	return &command{cmd: cmd, stdout: stdout, stdin: stdin}, nil
}

type command struct {
	cmd    *exec.Cmd
	stdout io.Reader
	stdin  io.WriteCloser
}

func (c *command) Read(b []byte) (int, error)  { return c.stdout.Read(b) }
func (c *command) Write(b []byte) (int, error) { return c.stdin.Write(b) }

// Close waits for the command (exec.Cmd.Wait closes stdout, so it waits
// for nothing before the reading is done).
func (c *command) Close() error {
	_ = c.stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	for _, stop := range []func() error{nil, func() error { return c.cmd.Process.Signal(syscall.SIGTERM) }, c.cmd.Process.Kill} {
		if stop != nil && stop() != nil {
			continue
		}
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return nil // it was told to stop; how it stopped is its own
			}
			return err
		case <-time.After(terminateAfter):
		}
	}
	return errors.New("mcp proxy: the upstream server does not exit")
}
