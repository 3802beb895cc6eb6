package hook

import (
	"testing"

	"github.com/auditchain/auditchain/internal/deptest"
)

// The hook runs before every tool call: its code path imports no server
// package and no database driver, whose package init it would pay for.
func TestHookImportsNoServer(t *testing.T) { deptest.NoServer(t, "/internal/hook") }
