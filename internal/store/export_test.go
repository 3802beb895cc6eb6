package store

import (
	"context"
	"database/sql"
)

// WriteConnsOpened is how many connections the SQLite writer has opened.
func (s *Store) WriteConnsOpened() int64 { return s.writeConns.Load() }

// OpenAtVersion opens dsn with migrations applied only up to version, as a
// database written by an older release would be.
func OpenAtVersion(ctx context.Context, dsn string, version int64) (*Store, error) {
	return OpenWith(ctx, dsn, Options{MaxConns: 4, migrateUpTo: version})
}

// CheckpointRan returns a channel that hears of every background checkpoint
// run from now on. Call it before the writes that should start one.
func (s *Store) CheckpointRan() <-chan struct{} {
	s.ckpt.ran = make(chan struct{}, 1)
	return s.ckpt.ran
}

// AfterCheckpointRound makes fn run after each round of a background
// checkpoint. Set it before the run.
func (s *Store) AfterCheckpointRound(fn func()) { s.ckpt.afterRound = fn }

// SearchStatement is the statement and arguments Search sends for f.
func (s *Store) SearchStatement(f SearchFilter) (string, []any) { return s.searchStatement(f) }

// SearchQuery is Search's SQL and arguments before any dialect's options.
var SearchQuery = searchQuery

// GateQuery is GateCandidates' statement (byID: for one grant id).
var GateQuery = gateQuery

// AppendBatchStatement is AppendUnlockedBatch's statement.
const AppendBatchStatement = appendBatchStatement

// BatchDB is the pool AppendUnlockedBatch sends its statement on.
func (s *Store) BatchDB() *sql.DB { return s.batch }
