package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// appendBatchStatement is appendSQL for several accounts at once: one
// row per account in v, each with its own compare-and-set on its head, and
// each account's writes gated on its own earlier ones exactly as in
// appendStatement (c → q → m → e → h). An account whose head moved writes
// nothing and the others are written; a refusal after a compare-and-set
// (quota spent, event_id taken) aborts the whole statement (AC001).
//
// The accounts of one statement must be distinct: UPDATE … FROM and
// INSERT … ON CONFLICT DO UPDATE may touch a row only once.
const appendBatchStatement = `WITH
	v AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[],
			$16::bigint[], $17::text[], $18::text[], $19::text[], $20::bigint[], $21::text[], $22::text[], $23::text[],
			$24::text[], $25::bigint[], $26::bigint[], $27::text[], $28::bigint[], $33::text[])
		AS v(user_id, seq, leaf, event_id, event_type, prev_hash, payload_hash, raw, decision, tool, machine_id,
			parent_id, signature, signature_key, ts, ts_micros, surface, api_key_id, semantic_key, created_at, day,
			machine, channel, payload, expect_count, expect_seq, expect_hash, tree_check, subagent)),
	c AS (UPDATE chain_heads h SET last_sequence = v.seq, last_hash = v.payload_hash, last_event_id = v.event_id,
			event_count = h.event_count + 1
		FROM v WHERE h.user_id = v.user_id AND h.event_count = v.expect_count AND h.last_sequence = v.expect_seq
			AND h.last_hash IS NOT DISTINCT FROM v.expect_hash
			AND (v.tree_check IS NULL OR (SELECT true FROM merkle_hashes t WHERE t.account = v.user_id AND t.idx = v.tree_check))
		RETURNING h.user_id, h.listened_until),
	q AS (INSERT INTO daily_usage (user_id, day, used) SELECT v.user_id, v.day, 1 FROM v JOIN c USING (user_id) WHERE 1 <= $29::bigint
		ON CONFLICT (user_id, day) DO UPDATE SET used = daily_usage.used + 1 WHERE daily_usage.used + 1 <= $29::bigint
		RETURNING user_id, used),
	m AS (INSERT INTO machine_heads (user_id, machine_id, events) SELECT v.user_id, v.machine, 1 FROM v JOIN q USING (user_id)
		ON CONFLICT (user_id, machine_id) DO UPDATE SET events = machine_heads.events + 1 RETURNING user_id, events),
	e AS (INSERT INTO events (` + eventColumns + `)
		SELECT v.user_id, v.seq, v.leaf, v.event_id, v.event_type, v.prev_hash, v.payload_hash, v.raw, v.decision, v.tool,
			v.machine_id, v.parent_id, v.signature, v.signature_key, v.ts, v.ts_micros, v.surface, v.api_key_id, m.events - 1,
			v.semantic_key, v.created_at, NULL, v.subagent FROM v JOIN m USING (user_id)
		ON CONFLICT (account, event_id) DO NOTHING RETURNING account AS user_id),
	h AS (INSERT INTO merkle_hashes (account, idx, hash)
		SELECT t.user_id, t.idx, t.hash FROM unnest($30::text[], $31::bigint[], $32::bytea[]) AS t(user_id, idx, hash)
		WHERE t.user_id IN (SELECT user_id FROM e)
		RETURNING 1)
	SELECT v.user_id, c.user_id IS NOT NULL, q.used, m.events, e.user_id IS NOT NULL,
		(SELECT count(pg_notify(v.channel, v.payload)) FROM v JOIN e USING (user_id) JOIN c USING (user_id)
			WHERE v.channel <> '' AND c.listened_until > ` + dbNowMicros + `),
		(SELECT CASE WHEN EXISTS (SELECT 1 FROM c WHERE c.user_id NOT IN (SELECT user_id FROM e))
			THEN auditchain_abort('append refused after its compare-and-set on the head') ELSE false END)
	FROM v LEFT JOIN c USING (user_id) LEFT JOIN q USING (user_id) LEFT JOIN m USING (user_id) LEFT JOIN e USING (user_id)`

// AppendBatchConns is the size of the pool AppendAcross sends its
// statements on: the number of batch statements a replica has in flight.
const AppendBatchConns = 4

// batchSessionParams are the batch pool's session settings.
//
// Plans: its one statement runs with a generic plan (planning it on each
// execution was a large part of PostgreSQL's CPU: docs/decisions/
// postgres-append.md "Plans"), and a generic plan is made once, at the
// session's first executions — when the tables may still be empty and the
// arrays' length is unknown (PostgreSQL assumes 10 rows). Then a hash join
// over a sequential scan of chain_heads looks cheapest, and it stays the plan
// when the table holds a million accounts.
// With hash and merge joins and sequential scans off, the only plan left
// reads each account's rows through their primary keys, whatever the tables'
// sizes; the statement's other joins are between its own CTEs of at most a
// batch's rows.
//
// lock_timeout: a batch waits on any of its accounts' head locks (held by a
// locked append, a key registration, a heal, another replica's batch), and
// every other account of the batch waits with it. After 100 ms the statement
// gives up (55P03, ErrBatchRolledBack) and the caller sends its appends one
// statement each, so only the account whose head is held waits for it.
const batchSessionParams = "enable_hashjoin=off&enable_mergejoin=off&enable_seqscan=off&lock_timeout=100"

// ErrBatchRolledBack is AppendAcross's answer when its statement failed
// on the server — an append refused after its compare-and-set (the
// statement's own abort, AC001), a deadlock, a lock waited on longer than the
// batch pool's lock_timeout, any other error: nothing of the batch was
// written, and each append can be sent alone (AppendEvent without a transaction) for its own
// outcome. The server's error is wrapped.
var ErrBatchRolledBack = errors.New("append batch rolled back")

// AppendAcross is AppendEvent without a transaction for charged appends of
// distinct accounts, in one statement and one commit: the PostgreSQL
// counterpart of SQLite's shared transaction. Each outcome is AppendEvent's:
// Stored(), or nothing written for that append (its head moved).
// ErrBatchRolledBack means nothing was written; any other error that the
// batch's outcome is unknown (the connection failed, ctx ended) or that it
// was malformed.
func (s *Store) AppendAcross(ctx context.Context, as []Append) ([]Appended, error) {
	if s.Dialect != Postgres {
		return nil, errors.New("the append statement is PostgreSQL only")
	}
	for i := range as {
		if as[i].Quota == nil || as[i].Hashes == nil {
			return nil, errors.New("append batch: every append is a charged one with its Merkle rows")
		}
		as[i].Event.LeafIndex = as[i].Expect.EventCount
	}
	// Rows are locked in user_id order (byte order, as MarkListened's), in
	// every batch statement (the plan walks v in its order): two batches
	// never wait on each other's locks in a cycle.
	order := make([]int, len(as))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return strings.Compare(as[i].Event.UserID, as[j].Event.UserID) })
	var c batchColumns
	index := make(map[string]int, len(as))
	for _, i := range order {
		a := as[i]
		if _, dup := index[a.Event.UserID]; dup {
			return nil, fmt.Errorf("append batch: account %s appears twice", a.Event.UserID)
		}
		if a.Quota.Limit != as[0].Quota.Limit {
			return nil, errors.New("append batch: one daily quota for all its appends")
		}
		index[a.Event.UserID] = i
		c.add(a)
	}
	out, err := s.appendBatch(ctx, &c, as, index)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
		// An autocommit statement that failed on the server rolled back.
		s.countBatchFallback(pgErr.Code)
		return nil, fmt.Errorf("%w: %w", ErrBatchRolledBack, err)
	}
	return out, err
}

func (s *Store) appendBatch(ctx context.Context, c *batchColumns, as []Append, index map[string]int) ([]Appended, error) {
	rows, err := s.batch.QueryContext(ctx, appendBatchStatement,
		c.users, c.seqs, c.leaves, c.eventIDs, c.eventTypes, c.prevHashes, c.payloadHashes, c.raws, c.decisions, c.tools,
		c.machineIDs, c.parentIDs, c.sigs, c.sigKeys, c.tss, c.tsMicros, c.surfaces, c.apiKeys, c.semKeys, c.createdAt,
		c.days, c.machines, c.channels, c.payloads, c.expectCount, c.expectSeq, c.expectHash, c.treeChecks, as[0].Quota.Limit,
		c.hashUsers, c.hashIdx, c.hashes, c.subagents)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]Appended, len(as))
	seen := 0
	for rows.Next() {
		var user string
		var moved, inserted, aborted bool
		var used, events sql.NullInt64
		var notified int64
		if err := rows.Scan(&user, &moved, &used, &events, &inserted, &notified, &aborted); err != nil {
			return nil, err
		}
		i, ok := index[user]
		if !ok {
			return nil, fmt.Errorf("append batch: the statement answered for unknown account %s", user)
		}
		seen++
		switch {
		case !moved:
			out[i].HeadMoved = true
		case used.Valid && inserted:
			out[i] = Appended{QuotaOK: true, QuotaUsed: used.Int64, Inserted: true}
			as[i].Event.MachineSequence = events.Int64 - 1
		default:
			// The statement aborts itself in this case; reaching here would
			// mean a write without its event.
			return nil, fmt.Errorf("append batch: account %s refused without the statement aborting", user)
		}
	}
	// Errors the server sends after the rows (the commit's) surface here.
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if seen != len(as) {
		return nil, fmt.Errorf("append batch: %d outcomes for %d appends", seen, len(as))
	}
	return out, nil
}

// countBatchFallback counts batch statements that rolled back on the server,
// by the reason (BatchFallbacks).
func (s *Store) countBatchFallback(code string) {
	switch code {
	case "AC001":
		s.batchFallbacks.refusals.Add(1)
	case "40P01":
		s.batchFallbacks.deadlocks.Add(1)
	case "55P03":
		s.batchFallbacks.lockTimeouts.Add(1)
	default:
		s.batchFallbacks.other.Add(1)
	}
}

// BatchFallbacks reports the batch statements that rolled back on the server
// (ErrBatchRolledBack), by reason: a refusal after a compare-and-set, a
// deadlock, a lock waited on longer than the batch pool's lock_timeout, any
// other server error.
func (s *Store) BatchFallbacks() (refusals, deadlocks, lockTimeouts, other int64) {
	f := &s.batchFallbacks
	return f.refusals.Load(), f.deadlocks.Load(), f.lockTimeouts.Load(), f.other.Load()
}

// batchColumns are the batch statement's parameters: one array per column,
// one element per append (the Merkle rows: one element per row).
type batchColumns struct {
	users, eventIDs, eventTypes, payloadHashes, tss, surfaces, days, machines, channels, payloads []string
	seqs, leaves, createdAt, expectCount, expectSeq                                               []int64
	prevHashes, raws, decisions, tools, machineIDs, parentIDs, sigs, sigKeys, apiKeys, semKeys    []*string
	subagents                                                                                     []*string
	expectHash                                                                                    []*string
	tsMicros, treeChecks                                                                          []*int64
	hashUsers                                                                                     []string
	hashIdx                                                                                       []int64
	hashes                                                                                        [][]byte
}

func (c *batchColumns) add(a Append) {
	e := a.Event
	var raw *string
	if e.Raw != nil {
		r := string(e.Raw)
		raw = &r
	}
	machine := ""
	if e.MachineID != nil {
		machine = *e.MachineID
	}
	c.users, c.eventIDs, c.eventTypes = append(c.users, e.UserID), append(c.eventIDs, e.EventID), append(c.eventTypes, e.EventType)
	c.payloadHashes, c.tss, c.surfaces = append(c.payloadHashes, e.PayloadHash), append(c.tss, e.TS), append(c.surfaces, e.Surface)
	c.days, c.machines = append(c.days, a.Quota.Day), append(c.machines, machine)
	c.channels, c.payloads = append(c.channels, a.NotifyChannel), append(c.payloads, a.NotifyPayload)
	c.seqs, c.leaves, c.createdAt = append(c.seqs, e.Sequence), append(c.leaves, e.LeafIndex), append(c.createdAt, e.CreatedAt)
	c.expectCount, c.expectSeq = append(c.expectCount, a.Expect.EventCount), append(c.expectSeq, a.Expect.LastSequence)
	c.prevHashes, c.raws, c.decisions = append(c.prevHashes, e.PrevHash), append(c.raws, raw), append(c.decisions, e.Decision)
	c.tools, c.machineIDs, c.parentIDs = append(c.tools, e.Tool), append(c.machineIDs, e.MachineID), append(c.parentIDs, e.ParentID)
	c.sigs, c.sigKeys, c.apiKeys = append(c.sigs, e.Signature), append(c.sigKeys, e.SignatureKey), append(c.apiKeys, e.APIKeyID)
	c.semKeys, c.expectHash = append(c.semKeys, e.SemanticKey), append(c.expectHash, a.Expect.LastHash)
	c.subagents = append(c.subagents, e.subagentColumn())
	c.tsMicros, c.treeChecks = append(c.tsMicros, e.TSMicros), append(c.treeChecks, a.TreeCheck)
	for _, h := range a.Hashes {
		c.hashUsers, c.hashIdx, c.hashes = append(c.hashUsers, e.UserID), append(c.hashIdx, h.Index), append(c.hashes, h.Hash[:])
	}
}
