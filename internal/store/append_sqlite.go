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
// row, which enters the tail (its keys and Merkle rows are written behind,
// index_behind.go, merkle_behind_sqlite.go). Two statements (three for an event of a named
// machine, whose counter stays in machine_heads): each costs the single
// writer more than the row it writes (docs/performance.md). With the head's
// counters remembered (Append.Remembered), the UPDATE writes their next values
// and returns nothing.
// The outcomes come in the order of CONTRACT.md: the quota first, then the
// event_id's unique key.
func (s *Store) appendEventSQLite(ctx context.Context, tx *sql.Tx, a Append) (Appended, error) {
	var out Appended
	e := a.Event
	var err error
	if next, ok := a.Remembered.after(e, a.Quota); ok {
		if out, err = s.moveRememberedHead(ctx, tx, a, next); err != nil || !out.QuotaOK {
			return out, err
		}
	} else if out, err = s.moveHead(ctx, tx, a); err != nil || !out.QuotaOK {
		return out, err
	}
	if e.MachineID == nil {
		e.MachineSequence = out.Counters.WithoutMachine - 1
	} else {
		var known int64
		if a.Remembered != nil {
			known = a.Remembered.MachineEvents
		}
		if e.MachineSequence, err = s.nextMachineSequence(ctx, tx, e.UserID, *e.MachineID, known); err != nil {
			return out, err
		}
		out.MachineEvents = e.MachineSequence + 1
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

// after is what the remembered counters become once e is appended,
// charged to quota if not nil; ok is false when that is not simply the next
// values (nothing remembered, the quota counting another day, or used up),
// which the head's UPDATE then works out itself.
func (r *Remembered) after(e *Event, quota *Quota) (next HeadCounters, ok bool) {
	if r == nil {
		return next, false
	}
	c := &r.Counters
	next = *c
	if quota != nil {
		if c.QuotaDay == nil || *c.QuotaDay != quota.Day || c.QuotaUsed+1 > quota.Limit {
			return next, false
		}
		next.QuotaUsed++
	}
	if e.MachineID == nil {
		next.WithoutMachine++
	}
	return next, true
}

// moveHead moves the head row from a.Expect to e, charging the quota and
// counting an event without a machine in the same UPDATE. QuotaOK is false
// when the quota refused the event; a head that is not Expect is an error,
// or, remembered, HeadMoved.
func (s *Store) moveHead(ctx context.Context, tx *sql.Tx, a Append) (Appended, error) {
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
	if a.Remembered != nil {
		query = sqliteAppendRememberedHead
		args = append(args, a.Remembered.RulesGen, a.Expect.SigningKeysGen)
	}
	// The writer holds SQLite's only write lock, so the compare with a head
	// read under it cannot fail; it is there so that a mistake shows. A
	// remembered head is compared with its generations too (Append.Remembered).
	// An uncharged event leaves the quota as it is.
	c := &out.Counters
	err := tx.QueryRowContext(ctx, query, args...).Scan(&c.QuotaUsed, &c.QuotaDay, &c.WithoutMachine)
	if errors.Is(err, sql.ErrNoRows) {
		// The quota refused the event, or the head row is not Expect.
		out.Counters = HeadCounters{}
		if a.Remembered == nil {
			h, err := s.LockHead(ctx, tx, e.UserID)
			if err != nil {
				return out, err
			}
			if !h.SameTip(a.Expect) {
				return out, fmt.Errorf("append: the locked head of %s moved", e.UserID)
			}
			return out, nil
		}
		h, rulesGen, err := s.LockHeadRules(ctx, tx, e.UserID)
		if err != nil {
			return out, err
		}
		// Nothing written: the caller reads the head and places the event again.
		out.HeadMoved = !h.SameTip(a.Expect) || rulesGen != a.Remembered.RulesGen || h.SigningKeysGen != a.Expect.SigningKeysGen
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("append: %w", err)
	}
	out.QuotaOK = true
	if a.Quota != nil {
		out.QuotaUsed = c.QuotaUsed
	}
	return out, nil
}

// moveRememberedHead moves the head row from the remembered a.Expect, with
// its generations and counters (a.Remembered), to e with the counters next,
// comparing them all: a row that is not what the writer remembers is left as
// it is and answers HeadMoved.
func (s *Store) moveRememberedHead(ctx context.Context, tx *sql.Tx, a Append, next HeadCounters) (Appended, error) {
	e, was := a.Event, &a.Remembered.Counters
	res, err := tx.ExecContext(ctx, `UPDATE chain_heads SET last_sequence = $2, last_hash = $3, last_event_id = $4,
			event_count = $5 + 1, quota_used = $6, events_without_machine = $7
		WHERE user_id = $1 AND event_count = $5 AND last_sequence = $8 AND last_hash IS $9
			AND approval_rules_gen = $10 AND signing_keys_gen = $11
			AND quota_used = $12 AND quota_day IS $13 AND events_without_machine = $14`,
		e.UserID, e.Sequence, e.PayloadHash, e.EventID, a.Expect.EventCount, next.QuotaUsed, next.WithoutMachine,
		a.Expect.LastSequence, a.Expect.LastHash, a.Remembered.RulesGen, a.Expect.SigningKeysGen,
		was.QuotaUsed, was.QuotaDay, was.WithoutMachine)
	if err != nil {
		return Appended{}, fmt.Errorf("append: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return Appended{}, fmt.Errorf("append: %w", err)
	} else if n == 0 {
		return Appended{HeadMoved: true}, nil // nothing written: the caller reads the head
	}
	out := Appended{QuotaOK: true, Counters: next}
	if a.Quota != nil {
		out.QuotaUsed = next.QuotaUsed
	}
	return out, nil
}

// sqliteAppendHead moves the head row for appendEventSQLite; its
// arguments: the account, the quota's day, the event's sequence, hash and
// id, 1 for an event without a machine, the expected event count, last
// sequence and last hash, the quota's limit, 1 to charge it.
// sqliteAppendRememberedHead is the same for a remembered head
// (Append.Remembered), whose generations are compared too: $12 the approval
// rules', $13 the signing keys'.
const (
	sqliteAppendHeadSet = `UPDATE chain_heads SET last_sequence = $3, last_hash = $4, last_event_id = $5,
		event_count = event_count + 1,
		quota_used = CASE WHEN $11 THEN ` + sqliteQuotaUsed + ` + 1 ELSE quota_used END,
		quota_day = CASE WHEN $11 THEN ` + sqliteQuotaDay + ` ELSE quota_day END,
		events_without_machine = events_without_machine + $6
	WHERE user_id = $1 AND event_count = $7 AND last_sequence = $8 AND last_hash IS $9`
	sqliteAppendHeadEnd = `
		AND (NOT $11 OR ` + sqliteQuotaUsed + ` + 1 <= $10)
	RETURNING quota_used, quota_day, events_without_machine`
	sqliteAppendHead           = sqliteAppendHeadSet + sqliteAppendHeadEnd
	sqliteAppendRememberedHead = sqliteAppendHeadSet + `
		AND approval_rules_gen = $12 AND signing_keys_gen = $13` + sqliteAppendHeadEnd
)

// nextMachineSequence returns a named machine's next machine_sequence (0 for
// its first event) and counts the event. known, when not 0, is the count the
// writer remembers: the row is then moved from it without a RETURNING, and
// counted as if unknown when it does not hold it.
func (s *Store) nextMachineSequence(ctx context.Context, tx *sql.Tx, userID, machineID string, known int64) (int64, error) {
	if known > 0 {
		res, err := tx.ExecContext(ctx, `UPDATE machine_heads SET events = $3 + 1 WHERE user_id = $1 AND machine_id = $2 AND events = $3`,
			userID, machineID, known)
		if err != nil {
			return 0, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return 0, err
		} else if n == 1 {
			return known, nil
		}
	}
	var n int64
	err := tx.QueryRowContext(ctx, `INSERT INTO machine_heads (user_id, machine_id, events) VALUES ($1, $2, 1)
		ON CONFLICT (user_id, machine_id) DO UPDATE SET events = machine_heads.events + 1 RETURNING events`, userID, machineID).Scan(&n)
	return n - 1, err
}

// SameTip reports whether h and e are the same tip: event count, last
// sequence and last hash (generations aside).
func (h Head) SameTip(e Head) bool {
	return h.EventCount == e.EventCount && h.LastSequence == e.LastSequence && sameHash(h.LastHash, e.LastHash)
}

func sameHash(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
