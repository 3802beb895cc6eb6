package main

import (
	"context"
	"errors"
	"io"
)

// verifyTokenCmd is `auditchain verify token FILE --service-key KEY` (the gate issue fills it in).
func verifyTokenCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("verify token: not built yet")
}
