package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// insertEventChargedSQLite is InsertEventCharged on SQLite: one UPDATE of the
// head row moves the head and, where migration 011 keeps them, charges the
// daily quota and counts an event without a machine; then the row and its
// Merkle rows. Three statements (four for an event of a named machine, whose
// counter stays in machine_heads) where the general path (ConsumeQuota,
// NextMachineSequence, InsertEvent) makes five: each costs the single
// writer more than the row it writes (docs/performance.md "Fourth round").
// The outcomes come in the general path's order: the quota first, then the
// event_id's unique key.
func (s *Store) insertEventChargedSQLite(ctx context.Context, tx *sql.Tx, a ChargedAppend) (ChargedInsert, error) {
	var out ChargedInsert
	e := a.Event
	withoutMachine := 0
	if e.MachineID == nil {
		withoutMachine = 1
	}
	var used, counter int64
	// The head is locked (the writer holds SQLite's only write lock), so the
	// compare with Expect cannot fail; it is there so that a mistake shows.
	err := tx.QueryRowContext(ctx, `UPDATE chain_heads SET last_sequence = $3, last_hash = $4, last_event_id = $5,
			event_count = event_count + 1, quota_used = `+sqliteQuotaUsed+` + 1, quota_day = `+sqliteQuotaDay+`,
			events_without_machine = events_without_machine + $6
		WHERE user_id = $1 AND event_count = $7 AND last_sequence = $8 AND last_hash IS $9 AND `+sqliteQuotaUsed+` + 1 <= $10
		RETURNING quota_used, events_without_machine`,
		e.UserID, a.Day, e.Sequence, e.PayloadHash, e.EventID, withoutMachine,
		a.Expect.EventCount, a.Expect.LastSequence, a.Expect.LastHash, a.Limit).Scan(&used, &counter)
	if errors.Is(err, sql.ErrNoRows) {
		h, err := s.LockHead(ctx, tx, e.UserID)
		if err != nil {
			return out, err
		}
		if h.EventCount != a.Expect.EventCount || h.LastSequence != a.Expect.LastSequence || !sameHash(h.LastHash, a.Expect.LastHash) {
			return out, fmt.Errorf("insert event: the locked head of %s moved", e.UserID)
		}
		return out, nil // the quota refused the event
	}
	if err != nil {
		return out, fmt.Errorf("insert event: %w", err)
	}
	out.QuotaOK, out.QuotaUsed = true, used
	if e.MachineID == nil {
		e.MachineSequence = counter - 1
	} else if e.MachineSequence, err = s.NextMachineSequence(ctx, tx, e.UserID, *e.MachineID); err != nil {
		return out, err
	}
	switch err := s.insertEventRow(ctx, tx, e); {
	case errors.Is(err, ErrConflict):
		return out, nil // the event_id is taken: Inserted stays false
	case err != nil:
		return out, err
	}
	// a.Hashes come from LeafHashes in this transaction, which read that
	// the stored tree ends where they begin (InsertEventCharged).
	if err := s.insertRuns(ctx, tx, e.UserID, a.Hashes); err != nil {
		return out, err
	}
	out.Inserted = true
	return out, nil
}

func sameHash(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
