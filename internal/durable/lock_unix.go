//go:build unix

package durable

import (
	"errors"
	"os"
	"syscall"
)

// HeldBy says who holds a lock TryLock found held, for messages.
const HeldBy = "a running process holds it"

// TryLock takes an exclusive lock on the file at path, created if need be,
// without waiting: held is false when another holder has it. The lock is an
// flock, which the kernel releases when the process ends, even by kill -9,
// so a crash never leaves it behind. Two opens of one path conflict within a
// process too.
func TryLock(path string) (release func(), held bool, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return func() { f.Close() }, true, nil
}
