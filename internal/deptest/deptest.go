// Package deptest checks, in tests, what a package pulls in: the client-side
// packages (pkg/client, internal/hook) must not import the server, whose
// package init every importer would pay for.
package deptest

import (
	"os/exec"
	"strings"
	"testing"
)

// NoServer fails t when the package in the working directory depends on an
// auditchain internal package other than those named in allowed (import
// path suffixes), or on a database driver.
func NoServer(t *testing.T, allowed ...string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
next:
	for _, pkg := range strings.Fields(string(out)) {
		for _, a := range allowed {
			if strings.HasSuffix(pkg, a) {
				continue next
			}
		}
		if strings.Contains(pkg, "/auditchain/internal/") || strings.Contains(pkg, "pgx") || strings.Contains(pkg, "sqlite") {
			t.Errorf("the package depends on %s", pkg)
		}
	}
}
