package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// verifyCmd runs offline checks; each needs only the file and the published
// service key (GET /v1/delegation/public-key), never the service.
func verifyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("verify needs a subcommand: token or export")
	}
	switch args[0] {
	case "token":
		return verifyTokenCmd(ctx, args[1:], stdout, stderr)
	case "export":
		return verifyExportCmd(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown verify command %q", args[0])
	}
}
