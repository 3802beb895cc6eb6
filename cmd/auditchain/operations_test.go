package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store/storetest"
)

// drillBlocks returns the shell blocks of docs/operations.md whose first
// line is "# drill: NAME", by name.
func drillBlocks(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)\n```sh\n# drill: (\\w+)\n(.*?)```\n").FindAllStringSubmatch(string(doc), -1) {
		blocks[m[1]] = m[2]
	}
	for _, name := range []string{"setup", "sqlite", "postgres"} {
		if blocks[name] == "" {
			t.Fatalf("docs/operations.md has no sh block starting with \"# drill: %s\"", name)
		}
	}
	return blocks
}

// runDrill runs the setup block and then the named one, as written, in one
// bash with -e and pipefail in a fresh directory, with this test binary as
// the `auditchain` on PATH (as the README quickstart's test does).
func runDrill(t *testing.T, name string, env ...string) string {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the drill needs %s on PATH", tool)
		}
	}
	blocks := drillBlocks(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	writeCLIWrapper(t, bin)
	// A serve the drill failed to refuse would run until killed: the
	// deadline ends the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", blocks["setup"]+"\n"+blocks[name])
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + dir,
		"AUDITCHAIN_ADDR=" + freeAddr(t),
	}, env...)
	out, err := cmd.CombinedOutput()
	logs, _ := os.ReadFile(filepath.Join(dir, "drill", "serve.log"))
	if err != nil {
		t.Fatalf("the %s drill failed: %v\n%s\nserve.log:\n%s", name, err, out, logs)
	}
	t.Logf("the %s drill:\n%s", name, out)
	refused, err := os.ReadFile(filepath.Join(dir, "drill", "refused.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(refused)
}

// The backup, pin, restore and check cycle of docs/operations.md, run as
// written on SQLite: a backup taken while serve appends, restored after more
// appends, is caught by admin check --pin-state and by serve --pin-state.
func TestOperationsRestoreDrillSQLite(t *testing.T) {
	refused := runDrill(t, "sqlite")
	if !strings.Contains(refused, "rolled_back") || !strings.Contains(refused, "admin pin") {
		t.Fatalf("serve --pin-state on the rolled-back store said:\n%s", refused)
	}
}

// The same on PostgreSQL with pg_dump and pg_restore.
func TestOperationsRestoreDrillPostgres(t *testing.T) {
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the PostgreSQL drill needs %s on PATH (TestAdminCheckCatchesRollback holds the check half on PostgreSQL)", tool)
		}
	}
	dsn := storetest.DSN(t, storetest.Postgres)
	restore := storetest.EmptyDSN(t, storetest.Postgres)
	refused := runDrill(t, "postgres", "AUDITCHAIN_DB="+dsn, "RESTORE_DB="+restore)
	if !strings.Contains(refused, "rolled_back") {
		t.Fatalf("serve --pin-state on the rolled-back store said:\n%s", refused)
	}
}
