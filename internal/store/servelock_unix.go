//go:build unix

package store

import (
	"fmt"
	"strings"

	"github.com/auditchain/auditchain/internal/durable"
)

// LockServing makes this process the only one serving an embedded (SQLite)
// database. Serving processes keep state the database alone does not show
// them (the gate's read caches, docs/decisions/gate.md; the group committer's
// queue), so a second `serve` on the same file — a rolling restart that
// overlaps, a copy started on another port — would answer from a stale cache
// after the other revoked a grant or a key. The lock is an flock on
// "<database>.serve.lock", released by the kernel when the process ends, even
// by kill -9. Commands that do not serve (admin, verify) do not take it.
// PostgreSQL needs no lock: replicas are its scale-out path.
func (s *Store) LockServing() (release func(), err error) {
	if s.Dialect != SQLite {
		return func() {}, nil
	}
	path := strings.TrimPrefix(s.Location, "sqlite:") + ".serve.lock"
	release, held, err := durable.TryLock(path)
	if err != nil {
		return nil, fmt.Errorf("serve lock: %w", err)
	}
	if !held {
		return nil, fmt.Errorf("another auditchain serve is using %s (it holds %s): the embedded store is served by one process; run replicas over PostgreSQL", s.Location, path)
	}
	return release, nil
}
