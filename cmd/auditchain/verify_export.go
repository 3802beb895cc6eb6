package main

import (
	"context"
	"errors"
	"io"
)

// verifyExportCmd is `auditchain verify export FILE --service-key KEY` (the integrity issue fills it in).
func verifyExportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("verify export: not built yet")
}
