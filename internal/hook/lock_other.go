//go:build !unix

package hook

import (
	"errors"
	"os"
	"path/filepath"
)

// lockDir takes dir's flush lock without waiting, as a file created
// exclusively: ok is false when it exists (another flush runs, or one
// crashed: remove the .lock file).
func lockDir(dir string) (unlock func(), ok bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	p := filepath.Join(dir, ".lock")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	f.Close()
	return func() { os.Remove(p) }, true, nil
}
