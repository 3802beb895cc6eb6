package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// An importer of pkg/client does not pull in the server: no internal
// package, no database driver.
func TestClientImportsNoServer(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.Contains(pkg, "/auditchain/internal/") || strings.Contains(pkg, "pgx") || strings.Contains(pkg, "sqlite") {
			t.Errorf("pkg/client depends on %s", pkg)
		}
	}
}
