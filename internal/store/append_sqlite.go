package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// appendEventSQLite is AppendEvent on SQLite: one UPDATE of the head row
// moves the head and, where migration 011 keeps them, charges the daily
// quota (a client event) and counts an event without a machine; then the
// row, marked for the tail (its Merkle rows are written behind,
// merkle_behind_sqlite.go). Two statements (three for an event of a named
// machine, whose counter stays in machine_heads): each costs the single
// writer more than the row it writes (docs/performance.md).
// The outcomes come in the order of CONTRACT.md: the quota first, then the
// event_id's unique key.
func (s *Store) appendEventSQLite(ctx context.Context, tx *sql.Tx, a Append) (Appended, error) {
	var out Appended
	e := a.Event
	withoutMachine := 0
	if e.MachineID == nil {
		withoutMachine = 1
	}
	charge, day, limit := 0, "", int64(0)
	if a.Quota != nil {
		charge, day, limit = 1, a.Quota.Day, a.Quota.Limit
	}
	args := []any{e.UserID, day, e.Sequence, e.PayloadHash, e.EventID, withoutMachine,
		a.Expect.EventCount, a.Expect.LastSequence, a.Expect.LastHash, limit, charge}
	query := sqliteAppendHead
	if a.Remembered {
		query = sqliteAppendRememberedHead
		args = append(args, a.RulesGen, a.Expect.SigningKeysGen)
	}
	var used, counter int64
	// The writer holds SQLite's only write lock, so the compare with a head
	// read under it cannot fail; it is there so that a mistake shows. A
	// remembered head is compared with its generations too (Append.Remembered).
	// An uncharged event leaves the quota as it is.
	err := tx.QueryRowContext(ctx, query, args...).Scan(&used, &counter)
	if errors.Is(err, sql.ErrNoRows) {
		// The quota refused the event, or the head row is not Expect.
		if !a.Remembered {
			h, err := s.LockHead(ctx, tx, e.UserID)
			if err != nil {
				return out, err
			}
			if !h.is(a.Expect) {
				return out, fmt.Errorf("append: the locked head of %s moved", e.UserID)
			}
			return out, nil
		}
		h, rulesGen, err := s.LockHeadRules(ctx, tx, e.UserID)
		if err != nil {
			return out, err
		}
		// Nothing written: the caller reads the head and places the event again.
		out.HeadMoved = !h.is(a.Expect) || rulesGen != a.RulesGen || h.SigningKeysGen != a.Expect.SigningKeysGen
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("append: %w", err)
	}
	out.QuotaOK = true
	if a.Quota != nil {
		out.QuotaUsed = used
	}
	if e.MachineID == nil {
		e.MachineSequence = counter - 1
	} else if e.MachineSequence, err = s.nextMachineSequence(ctx, tx, e.UserID, *e.MachineID); err != nil {
		return out, err
	}
	switch err := s.insertEventRow(ctx, tx, e); {
	case errors.Is(err, ErrConflict):
		return out, nil // the event_id is taken: Inserted stays false
	case err != nil:
		return out, err
	}
	// No Merkle row: the account's tree is grown over its tail behind the
	// append (IndexBehind; merkle_behind_sqlite.go).
	out.Inserted = true
	return out, nil
}

// sqliteAppendHead moves the head row for appendEventSQLite; its
// arguments: the account, the quota's day, the event's sequence, hash and
// id, 1 for an event without a machine, the expected event count, last
// sequence and last hash, the quota's limit, 1 to charge it.
const sqliteAppendHead = `UPDATE chain_heads SET last_sequence = $3, last_hash = $4, last_event_id = $5,
		event_count = event_count + 1,
		quota_used = CASE WHEN $11 THEN ` + sqliteQuotaUsed + ` + 1 ELSE quota_used END,
		quota_day = CASE WHEN $11 THEN ` + sqliteQuotaDay + ` ELSE quota_day END,
		events_without_machine = events_without_machine + $6
	WHERE user_id = $1 AND event_count = $7 AND last_sequence = $8 AND last_hash IS $9
		AND (NOT $11 OR ` + sqliteQuotaUsed + ` + 1 <= $10)
	RETURNING quota_used, events_without_machine`

// sqliteAppendRememberedHead is sqliteAppendHead for a remembered head
// (Append.Remembered), whose generations are compared too: $12 the approval
// rules', $13 the signing keys'.
const sqliteAppendRememberedHead = `UPDATE chain_heads SET last_sequence = $3, last_hash = $4, last_event_id = $5,
		event_count = event_count + 1,
		quota_used = CASE WHEN $11 THEN ` + sqliteQuotaUsed + ` + 1 ELSE quota_used END,
		quota_day = CASE WHEN $11 THEN ` + sqliteQuotaDay + ` ELSE quota_day END,
		events_without_machine = events_without_machine + $6
	WHERE user_id = $1 AND event_count = $7 AND last_sequence = $8 AND last_hash IS $9
		AND approval_rules_gen = $12 AND signing_keys_gen = $13
		AND (NOT $11 OR ` + sqliteQuotaUsed + ` + 1 <= $10)
	RETURNING quota_used, events_without_machine`

// nextMachineSequence returns a named machine's next machine_sequence (0 for
// its first event) and counts the event.
func (s *Store) nextMachineSequence(ctx context.Context, tx *sql.Tx, userID, machineID string) (int64, error) {
	var n int64
	err := tx.QueryRowContext(ctx, `INSERT INTO machine_heads (user_id, machine_id, events) VALUES ($1, $2, 1)
		ON CONFLICT (user_id, machine_id) DO UPDATE SET events = machine_heads.events + 1 RETURNING events`, userID, machineID).Scan(&n)
	return n - 1, err
}

// is reports whether h is the head e, generations aside.
func (h Head) is(e Head) bool {
	return h.EventCount == e.EventCount && h.LastSequence == e.LastSequence && sameHash(h.LastHash, e.LastHash)
}

func sameHash(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
