// Package durable writes files so that a crash leaves either the old file or
// the whole new one under its name, never a part: the content is synced
// before the file takes its name, and the directory after.
//
// The mail outbox, admin backup, admin pin and the monitor's state all write
// files an operator relies on after a crash; they share these three steps.
// TryLock (lock_unix.go) is an exclusive lock a process holds for as long
// as it works on a file or store that only one process may work on: the
// monitor on its state file, serve on its embedded store (where flock
// exists), the hook on its spool.
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrExists is WriteFile's answer when path exists and replace is false.
var ErrExists = errors.New("file exists")

// WriteFile writes b to a temporary file beside path, syncs it, and gives it
// path's name: replacing an existing file only when replace is true (a hard
// link refuses a file that appeared meanwhile), then syncs the directory.
func WriteFile(path string, b []byte, replace bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return Place(f.Name(), path, replace)
}

// Place gives the finished, synced file tmp the name path (in the same
// directory): a hard link, which refuses an existing path, unless replace,
// when a rename replaces it. The directory is synced afterwards.
func Place(tmp, path string, replace bool) error {
	if replace {
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
		return SyncDir(filepath.Dir(path))
	}
	err := os.Link(tmp, path)
	switch {
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%s: %w", path, ErrExists)
	case err != nil: // a file system without hard links
		if _, serr := os.Lstat(path); serr == nil {
			return fmt.Errorf("%s: %w", path, ErrExists)
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return SyncDir(filepath.Dir(path))
}

// SyncFile syncs the file at path to stable storage.
func SyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// SyncDir syncs a directory, so that a name created or renamed in it survives
// a crash. Systems that cannot sync a directory (it fails with EINVAL on
// some) are not an error: there is nothing more a writer can do.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
