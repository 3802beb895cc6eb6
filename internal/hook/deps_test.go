package hook

import (
	"testing"

	"github.com/auditchain/auditchain/internal/deptest"
)

// The hook runs before every tool call: its code path imports no server
// package and no database driver, whose package init it would pay for
// (internal/suggest and internal/durable are leaves of the standard
// library: its unknown-host message, and its spool's flush lock).
func TestHookImportsNoServer(t *testing.T) {
	deptest.NoServer(t, "/internal/hook", "/internal/suggest", "/internal/durable")
}
