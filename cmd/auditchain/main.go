// Command auditchain is the whole service: `serve` runs the HTTP API, `admin`
// bootstraps accounts and keys (usable while the server runs), `verify`
// checks exports and tokens offline. docs/cli.md describes every command.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(exitCode(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr), os.Stderr))
}

// exitCode is the process's exit status for run's error: 0 for none, an
// exitError's own code (its message is already written: a hook's exit 2),
// else, after printing the error, 2 for a usage error, 3 for the gate's no, 4 for a monitor's alarm and 1 for any other
// (docs/cli.md).
func exitCode(err error, stderr io.Writer) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	fmt.Fprintln(stderr, "auditchain:", err)
	var ue usageError
	var gr gateRefusal
	var al alarmError
	switch {
	case errors.As(err, &al):
		return exitAlarm
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &gr):
		return exitGateNo
	}
	return exitFailure
}
