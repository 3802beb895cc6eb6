package store

import (
	"context"
	"database/sql"
	"testing"
)

// WriteConnsOpened is how many connections the SQLite writer has opened.
func (s *Store) WriteConnsOpened() int64 { return s.writeConns.Load() }

// OpenAtVersion opens dsn with migrations applied only up to version, as a
// database written by an older release would be.
func OpenAtVersion(ctx context.Context, dsn string, version int64) (*Store, error) {
	return OpenWith(ctx, dsn, Options{MaxConns: 4, migrateUpTo: version})
}

// WALCheckpointRan returns a channel that hears of every background checkpoint
// run from now on. Call it before the writes that should start one.
func (s *Store) WALCheckpointRan() <-chan struct{} {
	s.walCkpt.ran = make(chan struct{}, 1)
	return s.walCkpt.ran
}

// AfterWALCheckpointRound makes fn run after each round of a background
// checkpoint. Set it before the run.
func (s *Store) AfterWALCheckpointRound(fn func()) { s.walCkpt.afterRound = fn }

// SearchStatement is the statement and arguments Search sends for f.
func (s *Store) SearchStatement(f SearchFilter) (string, []any) {
	account, err := s.accountKey(context.Background(), nil, f.UserID)
	if err != nil {
		panic(err)
	}
	return s.searchStatement(account, f)
}

// SearchQuery is Search's SQL and arguments on PostgreSQL (the account is
// the user_id) before any dialect's options.
func SearchQuery(f SearchFilter) (string, []any) { return searchQuery(Postgres, f.UserID, f, false) }

// GateQuery is GateCandidates' statement (byID: for one grant id).
var GateQuery = gateQuery

// AppendBatchStatement is AppendUnlockedBatch's statement.
const AppendBatchStatement = appendBatchStatement

// BatchDB is the pool AppendUnlockedBatch sends its statement on.
func (s *Store) BatchDB() *sql.DB { return s.batch }

// KeyOfAccount is AccountKey for tests that read or alter the rows of events
// and merkle_hashes directly. An account without a number gets one first.
func (s *Store) KeyOfAccount(t testing.TB, userID string) any {
	t.Helper()
	ctx := context.Background()
	var key any
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		k, err := s.accountKeyForWrite(ctx, tx, userID)
		key = k
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// ParseFinalRowID is parseFinalRowID, for the tests of ids.
func ParseFinalRowID(id string) (createdAt, salt int64, ok bool) { return parseFinalRowID(id) }
