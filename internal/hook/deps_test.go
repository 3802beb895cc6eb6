package hook

import (
	"testing"

	"github.com/auditchain/auditchain/internal/deptest"
)

// The hook runs before every tool call: its code path imports no server
// package and no database driver, whose package init it would pay for
// (internal/suggest is a leaf of the standard library: its unknown-host
// message).
func TestHookImportsNoServer(t *testing.T) {
	deptest.NoServer(t, "/internal/hook", "/internal/suggest")
}
