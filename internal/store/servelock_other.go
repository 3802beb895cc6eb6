//go:build !unix

package store

// LockServing is a no-op where flock is not available; run one `serve` per
// SQLite database there (see servelock_unix.go).
func (s *Store) LockServing() (release func(), err error) { return func() {}, nil }
