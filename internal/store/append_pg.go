package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/merkle"
)

// dbNowMicros is the database's clock in Unix microseconds, at the moment
// the expression is evaluated: listened_until is written and compared on this
// one clock, so replicas' clocks do not have to agree.
const dbNowMicros = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

// appendSQL moves the head, charges the quota, advances the machine's
// counter, inserts the row and its Merkle rows, and notifies stream
// listeners, in one PostgreSQL statement: each round trip of an append costs
// PostgreSQL and the service more CPU than the writes themselves.
//
// Data-modifying CTEs run in order of dependency, and every one of them runs
// to completion, so each write is gated on the one before it: the head's
// compare-and-set (c) comes first, as in the locked path where the head's row
// lock is always taken before the quota's; the quota (q) is charged only if
// the head moved and the event is charged ($32), and ok passes the head's
// move on when the quota admitted the event or the event is not charged; the
// machine counter (m) only then; the row (e) only then; its Merkle rows only
// if the row went in.
//
// The notification is sent only while a replica marks the account as
// streamed (MarkListened): c returns the head row's listened_until as the
// update left it, which includes a mark committed while this statement waited
// for the row or after its snapshot was taken (READ COMMITTED re-reads the row
// it updates), so an event committed after a mark is always announced.
//
// A refusal after the head moved (quota spent, or the event_id taken) leaves
// the head moved without its event. Under the head's lock the caller rolls its
// transaction back (lockedAppend). Without a transaction the statement aborts
// itself (unlockedAppend): auditchain_abort (migration 010) raises SQLSTATE
// AC001, which rolls back every write of the statement, and the caller
// answers from the locked path, which tells the refusals apart.
const appendSQL = `WITH
	c AS (UPDATE chain_heads SET last_sequence = $2::bigint, last_hash = $7::text, last_event_id = $4::text, event_count = event_count + 1
		WHERE user_id = $1 AND event_count = $28::bigint AND last_sequence = $29::bigint
			AND last_hash IS NOT DISTINCT FROM $30::text
			AND ($31::bigint IS NULL OR EXISTS (SELECT 1 FROM merkle_hashes WHERE account = $1 AND idx = $31::bigint))
		RETURNING listened_until),
	q AS (INSERT INTO daily_usage (user_id, day, used) SELECT $1, $21::text, 1 FROM c WHERE $32::boolean AND 1 <= $22::bigint
		ON CONFLICT (user_id, day) DO UPDATE SET used = daily_usage.used + 1 WHERE daily_usage.used + 1 <= $22::bigint
		RETURNING used),
	ok AS (SELECT used FROM q UNION ALL SELECT NULL::bigint FROM c WHERE NOT $32::boolean),
	m AS (INSERT INTO machine_heads (user_id, machine_id, events) SELECT $1, $23::text, 1 FROM ok
		ON CONFLICT (user_id, machine_id) DO UPDATE SET events = machine_heads.events + 1 RETURNING events),
	e AS (INSERT INTO events (` + eventColumns + `)
		SELECT $1, $2::bigint, $3::bigint, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text, $10::text,
			$11::text, $12::text, $13::text, $14::text, $15::text, $16::bigint, $17::text, $18::text, m.events - 1,
			$19::text, $20::bigint, NULL, $33::text FROM m
		ON CONFLICT (account, event_id) DO NOTHING RETURNING 1),
	h AS (INSERT INTO merkle_hashes (account, idx, hash)
		SELECT $1, t.idx, t.hash FROM unnest($24::bigint[], $25::bytea[]) AS t(idx, hash) WHERE EXISTS (SELECT 1 FROM e)
		RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM c), EXISTS (SELECT 1 FROM ok), (SELECT used FROM q), (SELECT events FROM m), EXISTS (SELECT 1 FROM e),
		(SELECT count(*) FROM (SELECT pg_notify($26::text, $27::text) WHERE $26::text <> '' AND EXISTS (SELECT 1 FROM e)
			AND (SELECT listened_until FROM c) > ` + dbNowMicros + `) AS n)`

var (
	lockedAppend   = appendSQL + `, false`
	unlockedAppend = appendSQL + `,
		CASE WHEN EXISTS (SELECT 1 FROM c) AND NOT EXISTS (SELECT 1 FROM e)
			THEN auditchain_abort('append refused after its compare-and-set on the head') ELSE false END`
)

// errAppendAborted is the statement's own abort (SQLSTATE AC001).
var errAppendAborted = errors.New("append statement aborted itself")

// appendStatement sends appendSQL through q: a transaction holding the head
// (lockedAppend) or the pool (unlockedAppend, selfAbort).
func (s *Store) appendStatement(ctx context.Context, q Querier, a Append, selfAbort bool) (Appended, error) {
	var out Appended
	e := a.Event
	var raw any
	if e.Raw != nil {
		raw = string(e.Raw)
	}
	machine := ""
	if e.MachineID != nil {
		machine = *e.MachineID
	}
	idx := make([]int64, len(a.Hashes))
	hs := make([][]byte, len(a.Hashes))
	for i, h := range a.Hashes {
		idx[i], hs[i] = h.Index, h.Hash[:]
	}
	charge, day, limit := false, "", int64(0)
	if a.Quota != nil {
		charge, day, limit = true, a.Quota.Day, a.Quota.Limit
	}
	var used, machineEvents sql.NullInt64
	var moved, admitted, inserted bool
	var notified int64
	var abortColumn bool // always false: an abort raises AC001 instead
	stmt := lockedAppend
	if selfAbort {
		stmt = unlockedAppend
	}
	err := q.QueryRowContext(ctx, stmt,
		e.UserID, e.Sequence, e.LeafIndex, e.EventID, e.EventType, e.PrevHash, e.PayloadHash, raw, e.Decision, e.Tool,
		e.MachineID, e.ParentID, e.Signature, e.SignatureKey, e.TS, e.TSMicros, e.Surface, e.APIKeyID,
		e.SemanticKey, e.CreatedAt, day, limit, machine, idx, hs, a.NotifyChannel, a.NotifyPayload,
		a.Expect.EventCount, a.Expect.LastSequence, a.Expect.LastHash, a.TreeCheck, charge, e.subagentColumn()).
		Scan(&moved, &admitted, &used, &machineEvents, &inserted, &notified, &abortColumn)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "AC001" {
		return out, errAppendAborted
	}
	if err != nil {
		return out, fmt.Errorf("append: %w", err)
	}
	if !moved {
		out.HeadMoved = true
		return out, nil
	}
	if !admitted {
		return out, nil
	}
	out.QuotaOK, out.QuotaUsed, out.Inserted = true, used.Int64, inserted
	e.MachineSequence = machineEvents.Int64 - 1
	return out, nil
}

// HeadForAppend reads the account's chain head without a lock (Empty when
// the account has no head row yet) and, in the same statement, the stored
// hashes at indexes: the reads of the leaf the caller expects to append
// (LeafReads). The reader it returns serves those and reads any other index
// on demand: hashes are immutable once committed, so later reads are
// consistent with this head. A missing one is ErrMissingHash.
func (s *Store) HeadForAppend(ctx context.Context, userID string, indexes []int64) (Head, merkle.HashReader, error) {
	var h Head
	rows, err := s.write.QueryContext(ctx, `SELECT h.last_sequence, h.last_hash, h.last_event_id, h.event_count, m.idx, m.hash
		FROM chain_heads h LEFT JOIN merkle_hashes m ON m.account = h.user_id AND m.idx = ANY($2::bigint[])
		WHERE h.user_id = $1`, userID, indexes)
	if err != nil {
		return h, nil, err
	}
	defer rows.Close()
	known := make(map[int64]tlog.Hash, len(indexes))
	for rows.Next() {
		var idx sql.NullInt64
		var hash []byte
		if err := rows.Scan(&h.LastSequence, &h.LastHash, &h.LastEventID, &h.EventCount, &idx, &hash); err != nil {
			return h, nil, err
		}
		if !idx.Valid {
			continue
		}
		if len(hash) != len(tlog.Hash{}) {
			return h, nil, malformedHash(userID, idx.Int64, hash)
		}
		known[idx.Int64] = tlog.Hash(hash)
	}
	if err := rows.Err(); err != nil {
		return h, nil, err
	}
	return h, &overlayReader{base: s.HashReader(ctx, nil, userID), known: known}, nil
}

// MarkListened marks the accounts as streamed by a replica until ttl from now
// (the database's clock): until then their appends announce themselves with
// NOTIFY. It creates the head row of an account without one, so the mark is
// there for its first append, and never shortens another replica's mark.
// Rows are upserted in user_id byte order, so replicas marking overlapping
// sets, and batch appends (AppendAcross), take their locks in the same
// order. PostgreSQL only.
func (s *Store) MarkListened(ctx context.Context, userIDs []string, ttl time.Duration) error {
	if s.Dialect != Postgres {
		return errors.New("MarkListened is PostgreSQL only")
	}
	_, err := s.write.ExecContext(ctx, `INSERT INTO chain_heads (user_id, last_sequence, last_hash, last_event_id, event_count, listened_until)
		SELECT u, -1, NULL, NULL, 0, `+dbNowMicros+` + $2::bigint FROM unnest($1::text[]) AS u ORDER BY u COLLATE "C"
		ON CONFLICT (user_id) DO UPDATE SET listened_until = GREATEST(chain_heads.listened_until, excluded.listened_until)`,
		userIDs, ttl.Microseconds())
	return err
}

// notifyRun announces a run's events (AppendRun) in one statement, while a
// replica streams the account (as appendSQL does). Nothing on SQLite, whose
// one process publishes to its own hub after the commit.
func (s *Store) notifyRun(ctx context.Context, tx *sql.Tx, run Run) error {
	if s.Dialect != Postgres || run.NotifyChannel == "" || len(run.NotifyPayloads) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT count(pg_notify($2::text, o.p)) FROM
		(SELECT t.p FROM unnest($3::text[]) WITH ORDINALITY AS t(p, i) ORDER BY t.i) AS o
		WHERE (SELECT listened_until FROM chain_heads WHERE user_id = $1) > `+dbNowMicros,
		run.UserID, run.NotifyChannel, run.NotifyPayloads)
	return err
}
