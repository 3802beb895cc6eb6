package client_test

import (
	"testing"

	"github.com/auditchain/auditchain/internal/deptest"
)

// An importer of pkg/client does not pull in the server: no internal
// package, no database driver.
func TestClientImportsNoServer(t *testing.T) { deptest.NoServer(t) }
