// Command auditchain is the whole service: `serve` runs the HTTP API, `admin`
// bootstraps accounts and keys (usable while the server runs).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "auditchain:", err)
		os.Exit(1)
	}
}
