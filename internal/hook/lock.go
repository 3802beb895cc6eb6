package hook

import (
	"os"
	"path/filepath"

	"github.com/auditchain/auditchain/internal/durable"
)

// lockDir takes dir's flush lock without waiting: ok is false when another
// process holds it (durable.TryLock).
func lockDir(dir string) (unlock func(), ok bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	return durable.TryLock(filepath.Join(dir, ".lock"))
}
