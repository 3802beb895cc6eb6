//go:build !unix

package durable

import (
	"errors"
	"os"
)

// HeldBy says who holds a lock TryLock found held, for messages: here a
// crashed holder leaves its file behind.
const HeldBy = "a running process holds it, or a crashed one left it: remove it if none runs"

// TryLock takes the lock at path without waiting, where flock is not
// available, by creating the file exclusively: held is false when it exists
// (another holder, or one that crashed: then the file must be removed by
// hand). release removes it.
func TryLock(path string) (release func(), held bool, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	f.Close()
	return func() { os.Remove(path) }, true, nil
}
