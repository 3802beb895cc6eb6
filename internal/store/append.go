package store

// The append of one client event, on either store: what it writes and how it
// turned out (InsertEventCharged). PostgreSQL's one statement is in
// append_pg.go, SQLite's three in append_sqlite.go.

import (
	"context"
	"database/sql"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/merkle"
)

// ChargedAppend is one client event for InsertEventCharged (both stores) and
// PostgreSQL's unlocked append statement: the row, its Merkle rows (computed
// by the caller from the tree of Expect's event count), the daily quota to
// charge and, on PostgreSQL, the stream notification.
type ChargedAppend struct {
	Event  *Event
	Hashes []merkle.StoredHash
	// Expect is the head the event extends: the statement moves the head only
	// if its event_count, last_sequence and last_hash are still these
	// (compare-and-set).
	Expect Head
	Day    string
	Limit  int64
	// NotifyChannel and NotifyPayload, when the channel is not empty, are sent
	// with pg_notify by the same statement; PostgreSQL delivers the
	// notification only if the transaction commits.
	NotifyChannel, NotifyPayload string
	// TreeCheck, when set, is a Merkle row of the account without which the
	// statement writes nothing, as if the head had moved: the caller computed
	// Hashes from a frontier it remembered, and the row shows the tree those
	// hashes extend is still there (TreeCheckIndex).
	TreeCheck *int64
}

// TreeCheckIndex is the stored hash the append of leaf n > 0 checks when it
// reads none from the store: the tree of n leaves' last, the top hash leaf
// n-1's append wrote. Any complete tree of n leaves holds it, and a tree cut
// short at its end does not (leaf n-1's first hash, checked before, missed a
// lost top row of an append that wrote several; on SQLite, the second row of
// a run of more than four).
func TreeCheckIndex(n int64) int64 { return tlog.StoredHashIndex(0, n) - 1 }

// ChargedInsert is the outcome of the append statement.
type ChargedInsert struct {
	// HeadMoved is true when the head was no longer Expect, or the Merkle
	// row TreeCheck names is missing: nothing was written (only the unlocked
	// appends, single or batched, can see it; a locked head cannot move).
	HeadMoved bool
	// QuotaOK is false when the event would exceed the daily quota; QuotaUsed
	// is not filled then (read it with QuotaUsed).
	QuotaOK   bool
	QuotaUsed int64
	// Inserted is false when the event_id is already stored (ErrConflict's
	// case).
	Inserted bool
}

// Appended reports whether the event, its Merkle rows and the head's move
// are all written.
func (c ChargedInsert) Appended() bool { return !c.HeadMoved && c.QuotaOK && c.Inserted }

// InsertEventCharged is InsertEvent, NextMachineSequence and ConsumeQuota
// (n = 1) inside tx, which holds the account's head (LockHead) read as
// a.Expect; a.Event.LeafIndex is set. On PostgreSQL it is one statement; on
// SQLite three (insertEventChargedSQLite). A refusal (QuotaOK or Inserted
// false) may have moved the head and the quota: the caller must roll tx
// back. e.MachineSequence is set from the counter. On SQLite a.Hashes must
// come from LeafHashes in the same transaction, which read that the stored
// tree ends where they begin.
func (s *Store) InsertEventCharged(ctx context.Context, tx *sql.Tx, a ChargedAppend) (ChargedInsert, error) {
	if s.Dialect == SQLite {
		return s.insertEventChargedSQLite(ctx, tx, a)
	}
	out, err := s.chargedAppend(ctx, tx, a, false)
	if err == nil && out.HeadMoved {
		return out, fmt.Errorf("insert event: the locked head of %s moved", a.Event.UserID)
	}
	return out, err
}
