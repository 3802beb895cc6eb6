package store

import (
	"container/heap"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Querier is what both *sql.DB and *sql.Tx offer.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Event is a stored event row.
type Event struct {
	UserID          string
	Sequence        int64
	LeafIndex       int64
	EventID         string
	EventType       string
	PrevHash        *string
	PayloadHash     string
	Raw             json.RawMessage // nil when raw was absent or null
	Decision        *string
	Tool            *string
	MachineID       *string
	ParentID        *string
	Signature       *string
	SignatureKey    *string
	TS              string
	TSMicros        *int64
	Surface         string
	APIKeyID        *string
	MachineSequence int64
	SemanticKey     *string
	CreatedAt       int64
	// BelowTip marks an event stored below the account's tip (a batch row
	// whose sequence was below the highest stored one): it took the next
	// leaf, so it is out of sequence order in leaf order (migration 014).
	BelowTip bool
}

// Head is an account's chain tip. Empty() when nothing was appended yet.
type Head struct {
	LastSequence int64
	LastHash     *string
	LastEventID  *string
	EventCount   int64
}

// Empty reports whether the chain has no event.
func (h Head) Empty() bool { return h.EventCount == 0 }

// eventColumns are an event row's columns as inserted: its account first (the
// value accountKeyForWrite gives, account_numbers.go), then eventFields.
const eventColumns = `account, ` + eventFields

// eventFields are the columns a read of whole events takes: the row without
// its account, which the query names (scanEvent sets Event.UserID from it).
const eventFields = `sequence, leaf_index, event_id, event_type, prev_hash, payload_hash, raw, decision, tool,
	machine_id, parent_id, signature, signature_key, ts, ts_micros, surface, api_key_id, machine_sequence, semantic_key, created_at,
	below_tip`

// scanEvent reads a row of eventFields of the account userID.
func scanEvent(r scanner, userID string) (Event, error) {
	e := Event{UserID: userID}
	var raw sql.NullString
	var belowTip sql.NullInt64
	err := r.Scan(&e.Sequence, &e.LeafIndex, &e.EventID, &e.EventType, &e.PrevHash, &e.PayloadHash, &raw,
		&e.Decision, &e.Tool, &e.MachineID, &e.ParentID, &e.Signature, &e.SignatureKey, &e.TS, &e.TSMicros, &e.Surface,
		&e.APIKeyID, &e.MachineSequence, &e.SemanticKey, &e.CreatedAt, &belowTip)
	if errors.Is(err, sql.ErrNoRows) {
		return e, ErrNotFound
	}
	if raw.Valid {
		e.Raw = json.RawMessage(raw.String)
	}
	e.BelowTip = belowTip.Valid
	return e, err
}

// LockHead reads the account's chain head and holds it for the rest of tx, so
// appends to one account are serialised while other accounts proceed. On
// SQLite the write transaction already holds the database's only write lock.
func (s *Store) LockHead(ctx context.Context, tx *sql.Tx, userID string) (Head, error) {
	q := `SELECT last_sequence, last_hash, last_event_id, event_count FROM chain_heads WHERE user_id = $1`
	if s.Dialect == Postgres {
		q += ` FOR UPDATE`
	}
	for attempt := 0; ; attempt++ {
		var h Head
		err := tx.QueryRowContext(ctx, q, userID).Scan(&h.LastSequence, &h.LastHash, &h.LastEventID, &h.EventCount)
		if !errors.Is(err, sql.ErrNoRows) || attempt > 0 {
			return h, err
		}
		// First append of the account: create the head row, then lock it.
		if _, err := tx.ExecContext(ctx, `INSERT INTO chain_heads (user_id, last_sequence, last_hash, last_event_id, event_count)
			VALUES ($1, -1, NULL, NULL, 0) ON CONFLICT (user_id) DO NOTHING`, userID); err != nil {
			return h, err
		}
	}
}

// Head reads the chain tip without locking (GET /v1/chain/tip).
func (s *Store) Head(ctx context.Context, userID string) (Head, error) {
	var h Head
	err := s.read.QueryRowContext(ctx, `SELECT last_sequence, last_hash, last_event_id, event_count FROM chain_heads WHERE user_id = $1`, userID).
		Scan(&h.LastSequence, &h.LastHash, &h.LastEventID, &h.EventCount)
	if errors.Is(err, sql.ErrNoRows) {
		return Head{LastSequence: -1}, nil
	}
	return h, err
}

// insertEventRow inserts e's row alone; ErrConflict when its event_id (or,
// against the caller's checks, its sequence) is stored already.
func (s *Store) insertEventRow(ctx context.Context, tx *sql.Tx, e *Event) error {
	account, err := s.accountKeyForWrite(ctx, tx, e.UserID)
	if err != nil {
		return err
	}
	var raw any
	if e.Raw != nil {
		raw = string(e.Raw)
	}
	// ON CONFLICT DO NOTHING rather than a failing insert: on PostgreSQL a
	// failed statement would abort the whole transaction, and the caller wants
	// to look the stored event up (an idempotent retry) after ErrConflict.
	// A single event becomes the tip: below_tip is NULL.
	res, err := tx.ExecContext(ctx, `INSERT INTO events (`+eventColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, NULL)
		ON CONFLICT (account, event_id) DO NOTHING`,
		account, e.Sequence, e.LeafIndex, e.EventID, e.EventType, e.PrevHash, e.PayloadHash, raw, e.Decision, e.Tool,
		e.MachineID, e.ParentID, e.Signature, e.SignatureKey, e.TS, e.TSMicros, e.Surface, e.APIKeyID, e.MachineSequence,
		e.SemanticKey, e.CreatedAt)
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("insert event: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("insert event: %w", err)
	} else if n == 0 {
		return ErrConflict // the event_id is already stored
	}
	return nil
}

// insertEvents inserts the rows of evs, all of the account userID, with one
// multi-row INSERT per chunk (AppendRun); ErrConflict when one is stored
// already.
func (s *Store) insertEvents(ctx context.Context, tx *sql.Tx, userID string, evs []Event) error {
	account, err := s.accountKeyForWrite(ctx, tx, userID)
	if err != nil {
		return err
	}
	for start := 0; start < len(evs); start += maxRowsPerInsert {
		chunk := evs[start:min(start+maxRowsPerInsert, len(evs))]
		query, args := s.insertEventsStatement(account, chunk)
		res, err := tx.ExecContext(ctx, query, args...)
		if IsUniqueViolation(err) {
			return ErrConflict
		}
		if err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("insert events: %w", err)
		} else if n != int64(len(chunk)) {
			return fmt.Errorf("insert events: %d of %d rows stored: %w", n, len(chunk), ErrConflict)
		}
	}
	return nil
}

// eventColumnCount is the number of eventColumns.
const eventColumnCount = 22

// eventRow is e's values in eventColumns order, pointers read (nil for
// absent values), so that two rows' values compare with ==.
func eventRow(account any, e *Event) [eventColumnCount]any {
	str := func(p *string) any {
		if p == nil {
			return nil
		}
		return *p
	}
	var raw, tsMicros, belowTip any
	if e.Raw != nil {
		raw = string(e.Raw)
	}
	if e.TSMicros != nil {
		tsMicros = *e.TSMicros
	}
	if e.BelowTip {
		belowTip = int64(1)
	}
	return [eventColumnCount]any{account, e.Sequence, e.LeafIndex, e.EventID, e.EventType, str(e.PrevHash), e.PayloadHash, raw,
		str(e.Decision), str(e.Tool), str(e.MachineID), str(e.ParentID), str(e.Signature), str(e.SignatureKey), e.TS, tsMicros,
		e.Surface, str(e.APIKeyID), e.MachineSequence, str(e.SemanticKey), e.CreatedAt, belowTip}
}

// sharedEventColumns are the columns a multi-row insert binds once when every
// row of it has the same value there (or writes NULL when that value is
// absent): the account; what the service sets per request (surface,
// api_key_id, created_at); and what a batch's rows mostly lack, or share
// (machine_id, parent_id, signature, signature_key, semantic_key, below_tip). Binding is
// a sixth of the single writer's work per batched row on SQLite
// (docs/performance.md "Sixth round"), and a 500-row chunk binds 10,500
// values otherwise. Content columns are left out: each combination of shared
// columns is a statement of its own to prepare and cache, and these few
// combinations cover the batches a client sends.
var sharedEventColumns = [eventColumnCount]bool{0: true, 10: true, 11: true, 12: true, 13: true, 16: true, 17: true, 19: true, 20: true,
	21: true}

// insertShape is what the text of a multi-row INSERT of events depends on:
// its number of rows, the columns it binds once (shared: the first row's
// parameter serves every row) and those it writes as NULL in every row.
type insertShape struct {
	rows         int
	shared, null uint32 // bit c: column c of eventColumns
}

// insertTexts caches the statement of each shape (at most maxInsertTexts):
// a 500-row statement is 30 KB of text, built on the single writer.
type insertTexts struct {
	mu sync.Mutex
	m  map[insertShape]string
}

const maxInsertTexts = 64

// insertEventsStatement is the multi-row INSERT of chunk's rows and its
// arguments. A column whose value every row shares (sharedEventColumns) is
// bound once, in the first row, and later rows refer to that parameter; one
// absent from every row is the literal NULL and not bound at all. On SQLite
// the other parameters stay positional (placeholder), and a reference (?N)
// names one already numbered, so the positional ones keep counting up.
func (s *Store) insertEventsStatement(account any, chunk []Event) (string, []any) {
	rows := make([][eventColumnCount]any, len(chunk))
	for i := range chunk {
		rows[i] = eventRow(account, &chunk[i])
	}
	shape := insertShape{rows: len(rows)}
	for c := range eventColumnCount {
		same := sharedEventColumns[c]
		for i := 1; same && i < len(rows); i++ {
			same = rows[i][c] == rows[0][c]
		}
		switch {
		case same && rows[0][c] == nil:
			shape.null |= 1 << c
		case same:
			shape.shared |= 1 << c
		}
	}
	args := make([]any, 0, eventColumnCount*len(chunk))
	for i := range rows {
		for c, v := range rows[i] {
			if bit := uint32(1) << c; shape.null&bit == 0 && (i == 0 || shape.shared&bit == 0) {
				args = append(args, v)
			}
		}
	}
	return s.insertEventsText(shape), args
}

func (s *Store) insertEventsText(shape insertShape) string {
	s.inserts.mu.Lock()
	defer s.inserts.mu.Unlock()
	if q, ok := s.inserts.m[shape]; ok {
		return q
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO events (` + eventColumns + `) VALUES `)
	var first [eventColumnCount]int // the parameter number of the first row's value
	n := 0
	for i := range shape.rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for c := range eventColumnCount {
			if c > 0 {
				b.WriteByte(',')
			}
			switch bit := uint32(1) << c; {
			case shape.null&bit != 0:
				b.WriteString("NULL")
			case i > 0 && shape.shared&bit != 0:
				b.WriteString(s.parameter(first[c]))
			default:
				n++
				if i == 0 {
					first[c] = n
				}
				b.WriteString(s.placeholder(n))
			}
		}
		b.WriteByte(')')
	}
	b.WriteString(` ON CONFLICT (account, event_id) DO NOTHING`)
	q := b.String()
	if s.inserts.m == nil {
		s.inserts.m = map[insertShape]string{}
	}
	if len(s.inserts.m) < maxInsertTexts {
		s.inserts.m[shape] = q
	}
	return q
}

// parameter names the n-th (1-based) argument explicitly: a reference to a
// parameter a generated statement bound before.
func (s *Store) parameter(n int) string {
	if s.Dialect == SQLite {
		return "?" + strconv.Itoa(n)
	}
	return "$" + strconv.Itoa(n)
}

// placeholder is the SQL placeholder of the n-th (1-based) argument of a
// generated statement with many arguments. Older SQLite drivers bound $N
// parameters by looking each name up in a list, O(n²) over thousands of them
// (85 % of a 500-row batch insert's CPU then); modernc.org/sqlite v1.60 maps
// $N and ?N to the argument directly, and positional ? still skips reading
// each parameter's name.
func (s *Store) placeholder(n int) string {
	if s.Dialect == SQLite {
		return "?"
	}
	return "$" + strconv.Itoa(n)
}

// maxRowsPerInsert keeps a multi-row INSERT of events within both databases'
// limits on bound parameters (22 per row; SQLite allows 32,766, PostgreSQL 65,535).
const maxRowsPerInsert = 500

// EventsByIDs reads the account's events with any of the given ids, by id.
func (s *Store) EventsByIDs(ctx context.Context, q Querier, userID string, ids []string) (map[string]Event, error) {
	account, err := s.accountKey(ctx, q, userID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Event, len(ids))
	for start := 0; start < len(ids); start += maxIDsPerLookup {
		chunk := ids[start:min(start+maxIDsPerLookup, len(ids))]
		query, args := s.inQuery(`SELECT `+eventFields+` FROM events WHERE account = `+s.placeholder(1)+` AND event_id IN (`, account, chunk)
		evs, err := s.queryEvents(ctx, q, userID, query, args...)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			out[e.EventID] = e
		}
	}
	return out, nil
}

const maxIDsPerLookup = 1000

// EventIDsAt returns, for each of sequences the account stores, the event_id
// stored there (through q: the batch's transaction).
func (s *Store) EventIDsAt(ctx context.Context, q Querier, userID string, sequences []int64) (map[int64]string, error) {
	out := make(map[int64]string, len(sequences))
	if len(sequences) == 0 {
		return out, nil
	}
	account, err := s.accountKey(ctx, q, userID)
	if err != nil {
		return nil, err
	}
	for start := 0; start < len(sequences); start += maxIDsPerLookup {
		chunk := sequences[start:min(start+maxIDsPerLookup, len(sequences))]
		var b strings.Builder
		args := make([]any, 0, len(chunk)+1)
		args = append(args, account)
		b.WriteString(`SELECT sequence, event_id FROM events WHERE account = ` + s.placeholder(1) + ` AND sequence IN (`)
		for i, seq := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			args = append(args, seq)
			b.WriteString(s.placeholder(len(args)))
		}
		b.WriteByte(')')
		rows, err := q.QueryContext(ctx, b.String(), args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var seq int64
			var id string
			if err := rows.Scan(&seq, &id); err != nil {
				rows.Close()
				return nil, err
			}
			out[seq] = id
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// inQuery completes head, which ends with "IN (" and uses placeholder 1 for
// first, with one placeholder per value and the closing parenthesis.
func (s *Store) inQuery(head string, first any, values []string) (string, []any) {
	var b strings.Builder
	b.WriteString(head)
	args := make([]any, 0, len(values)+1)
	args = append(args, first)
	for i, v := range values {
		if i > 0 {
			b.WriteByte(',')
		}
		args = append(args, v)
		b.WriteString(s.placeholder(len(args)))
	}
	b.WriteByte(')')
	return b.String(), args
}

// MachineSequences returns the number of events each machine already has on
// the account (its next machine_sequence); machines never seen count 0. The
// caller holds the account's head, so the counts cannot move under it.
func (s *Store) MachineSequences(ctx context.Context, tx *sql.Tx, userID string, machineIDs []string) (map[string]int64, error) {
	out := make(map[string]int64, len(machineIDs))
	if s.Dialect == SQLite && slices.Contains(machineIDs, "") {
		n, err := s.eventsWithoutMachine(ctx, tx, userID)
		if err != nil {
			return nil, err
		}
		out[""] = n
		machineIDs = slices.DeleteFunc(slices.Clone(machineIDs), func(m string) bool { return m == "" })
	}
	if len(machineIDs) == 0 {
		return out, nil
	}
	query, args := s.inQuery(`SELECT machine_id, events FROM machine_heads WHERE user_id = `+s.placeholder(1)+` AND machine_id IN (`, userID, machineIDs)
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var m string
		var n int64
		if err := rows.Scan(&m, &n); err != nil {
			return nil, err
		}
		out[m] = n
	}
	return out, rows.Err()
}

// SetMachineSequences stores each machine's event count (what
// MachineSequences returned plus the events just stored), in one statement.
func (s *Store) SetMachineSequences(ctx context.Context, tx *sql.Tx, userID string, counts map[string]int64) error {
	if n, ok := counts[""]; ok && s.Dialect == SQLite {
		if err := s.setEventsWithoutMachine(ctx, tx, userID, n); err != nil {
			return err
		}
		counts = maps.Clone(counts)
		delete(counts, "")
	}
	if len(counts) == 0 {
		return nil
	}
	var b strings.Builder
	args := make([]any, 0, 3*len(counts))
	b.WriteString(`INSERT INTO machine_heads (user_id, machine_id, events) VALUES `)
	for _, m := range slices.Sorted(maps.Keys(counts)) {
		if len(args) > 0 {
			b.WriteByte(',')
		}
		n := len(args)
		b.WriteString("(" + s.placeholder(n+1) + ", " + s.placeholder(n+2) + ", " + s.placeholder(n+3) + ")")
		args = append(args, userID, m, counts[m])
	}
	b.WriteString(` ON CONFLICT (user_id, machine_id) DO UPDATE SET events = excluded.events`)
	_, err := tx.ExecContext(ctx, b.String(), args...)
	return err
}

// On SQLite the counter of an account's events without a machine lives in
// its head row, and so does its daily quota (migration 011): an append moves
// the head anyway, and each statement costs the single writer more than the
// row it writes. PostgreSQL keeps both in machine_heads ("") and daily_usage.

// errNoHead: a counter kept in the head row was moved before the head row
// was created (LockHead creates it; every writer takes it first).
var errNoHead = errors.New("the account has no head row")

func (s *Store) eventsWithoutMachine(ctx context.Context, tx *sql.Tx, userID string) (int64, error) {
	var n int64
	err := tx.QueryRowContext(ctx, `SELECT events_without_machine FROM chain_heads WHERE user_id = $1`, userID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

func (s *Store) setEventsWithoutMachine(ctx context.Context, tx *sql.Tx, userID string, n int64) error {
	res, err := tx.ExecContext(ctx, `UPDATE chain_heads SET events_without_machine = $2 WHERE user_id = $1`, userID, n)
	if err != nil {
		return err
	}
	if k, err := res.RowsAffected(); err != nil {
		return err
	} else if k == 0 {
		return fmt.Errorf("machine counter of %s: %w", userID, errNoHead)
	}
	return nil
}

// EventByID reads one of the account's events.
func (s *Store) EventByID(ctx context.Context, q Querier, userID, eventID string) (Event, error) {
	if q == nil {
		q = s.read
	}
	account, err := s.accountKey(ctx, q, userID)
	if err != nil {
		return Event{}, err
	}
	return scanEvent(q.QueryRowContext(ctx, `SELECT `+eventFields+` FROM events WHERE account = $1 AND event_id = $2`, account, eventID), userID)
}

// EventByPayloadHash finds the account's event with that payload hash and a
// sequence below beforeSequence (the ancestry walk across a broken link: an
// ancestor always precedes). There is no payload_hash index (migration 007):
// the walk needs it only where a link is broken, so this reads the account's
// earlier events newest first, which finds a nearby ancestor quickly and costs
// a scan of the earlier events only when the link's target does not exist.
//
// There is no payload_hash index (migration 007), so this walks the primary key
// backwards; the walk is bounded to PayloadHashSearchWindow positions, so a
// link to nowhere — which any client can write through batch rows — costs a
// bounded read, not a scan of the whole chain. A target further back is
// reported as not found.
func (s *Store) EventByPayloadHash(ctx context.Context, userID, hash string, beforeSequence int64) (Event, error) {
	account, err := s.accountKey(ctx, nil, userID)
	if err != nil {
		return Event{}, err
	}
	return scanEvent(s.read.QueryRowContext(ctx, `SELECT `+eventFields+` FROM events
		WHERE account = $1 AND sequence < $2 AND sequence >= $4 AND payload_hash = $3 ORDER BY sequence DESC LIMIT 1`,
		account, beforeSequence, hash, beforeSequence-PayloadHashSearchWindow), userID)
}

// PayloadHashSearchWindow is how far back EventByPayloadHash looks.
const PayloadHashSearchWindow = 10_000

// EventsBefore returns up to limit events with sequence below seq, newest first.
func (s *Store) EventsBefore(ctx context.Context, userID string, seq int64, limit int) ([]Event, error) {
	account, err := s.accountKey(ctx, nil, userID)
	if err != nil {
		return nil, err
	}
	return s.queryEvents(ctx, s.read, userID, `SELECT `+eventFields+` FROM events WHERE account = $1 AND sequence < $2 ORDER BY sequence DESC LIMIT $3`, account, seq, limit)
}

// leafReorderWindow bounds how far EventsFrom looks ahead for a row whose
// stored leaf_index is out of chain order.
const leafReorderWindow = 2000

// EventsFrom streams the account's events in leaf order from leaf index from,
// calling fn for each; it reads in pages so memory stays flat in chain length.
//
// An event stored at the tip took the next leaf, so those events are in leaf
// order when read by the primary key (account, sequence); there is no
// leaf_index index (migration 007). The events a batch stored below the tip
// (below_tip, migration 014) are read in leaf order through their partial
// index, and the two are merged by leaf_index. The stored leaf_index is what
// orders the stream: a row whose leaf_index disagrees with its chain position
// (a tampered or damaged row) is held back, up to leafReorderWindow rows,
// until its leaf position comes, exactly as an ORDER BY leaf_index would
// deliver it, so the verifiers that consume this stream see the disagreement.
func (s *Store) EventsFrom(ctx context.Context, userID string, from int64, fn func(*Event) error) error {
	return s.eventsFrom(ctx, s.read, userID, from, fn)
}

// eventsFrom is EventsFrom through q (a transaction, for the tree's rebuild).
func (s *Store) eventsFrom(ctx context.Context, q Querier, userID string, from int64, fn func(*Event) error) error {
	const page = 2000
	account, err := s.accountKey(ctx, q, userID)
	if err != nil {
		return err
	}
	after := int64(math.MinInt64) // tip rows with sequence above this are still to read
	tipDone := false
	if from > 0 {
		seq, found, err := s.firstSequenceFromLeaf(ctx, q, userID, from)
		if err != nil {
			return err
		}
		after, tipDone = seq-1, !found
	}
	var tip []Event // rows of the sequence stream read and not yet held
	readTip := func() (*Event, error) {
		for len(tip) == 0 {
			if tipDone {
				return nil, nil
			}
			evs, err := s.queryEvents(ctx, q, userID, `SELECT `+eventFields+` FROM events
				WHERE account = $1 AND sequence > $2 AND below_tip IS NULL ORDER BY sequence LIMIT $3`, account, after, page)
			if err != nil {
				return nil, err
			}
			tipDone = len(evs) < page
			if len(evs) > 0 {
				after = evs[len(evs)-1].Sequence
			}
			tip = evs
		}
		e := &tip[0]
		tip = tip[1:]
		return e, nil
	}
	belowFrom, belowDone := from, false
	var below []Event // rows stored below the tip, in leaf order
	peekBelow := func() (*Event, error) {
		if len(below) == 0 && !belowDone {
			evs, err := s.queryEvents(ctx, q, userID, `SELECT `+eventFields+` FROM events
				WHERE account = $1 AND below_tip IS NOT NULL AND leaf_index >= $2 ORDER BY leaf_index LIMIT $3`, account, belowFrom, page)
			if err != nil {
				return nil, err
			}
			belowDone = len(evs) < page
			if len(evs) > 0 {
				belowFrom = evs[len(evs)-1].LeafIndex + 1
			}
			below = evs
		}
		if len(below) == 0 {
			return nil, nil
		}
		return &below[0], nil
	}
	held := &leafHeap{}
	next := from // the leaf position to deliver next
	for {
		b, err := peekBelow()
		if err != nil {
			return err
		}
		var e *Event
		switch {
		case held.Len() > 0 && (*held)[0].LeafIndex <= next:
			e = heap.Pop(held).(*Event)
		case b != nil && b.LeafIndex <= next:
			e, below = b, below[1:]
		case held.Len() <= leafReorderWindow && !(tipDone && len(tip) == 0):
			t, err := readTip()
			if err != nil {
				return err
			}
			if t != nil && t.LeafIndex >= from {
				heap.Push(held, t)
			}
			continue
		case held.Len() > 0 && (b == nil || (*held)[0].LeafIndex < b.LeafIndex):
			e = heap.Pop(held).(*Event) // a leaf position is missing: go on past it
		case b != nil:
			e, below = b, below[1:]
		default:
			return nil
		}
		next = max(next, e.LeafIndex+1)
		if err := fn(e); err != nil {
			return err
		}
	}
}

// leafHeap orders held rows by stored leaf_index.
type leafHeap []*Event

func (h leafHeap) Len() int           { return len(h) }
func (h leafHeap) Less(i, j int) bool { return h[i].LeafIndex < h[j].LeafIndex }
func (h leafHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *leafHeap) Push(x any)        { *h = append(*h, x.(*Event)) }
func (h *leafHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// firstSequenceFromLeaf returns the sequence of the account's first event
// stored at the tip (in chain order; rows stored below it are left out)
// whose leaf_index is at least leaf; found is false when there is none. Among
// those events leaf_index grows with sequence, so this is a binary search
// over sequence values, each probe one primary-key lookup (at most 64
// probes), through q (nil: the read pool).
func (s *Store) firstSequenceFromLeaf(ctx context.Context, q Querier, userID string, leaf int64) (seq int64, found bool, err error) {
	if q == nil {
		q = s.read
	}
	account, err := s.accountKey(ctx, q, userID)
	if err != nil {
		return 0, false, err
	}
	probe := func(atLeast int64) (int64, int64, bool, error) {
		var seq, leaf int64
		err := q.QueryRowContext(ctx, `SELECT sequence, leaf_index FROM events WHERE account = $1 AND sequence >= $2
			AND below_tip IS NULL ORDER BY sequence LIMIT 1`, account, atLeast).Scan(&seq, &leaf)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, 0, false, nil
		}
		return seq, leaf, err == nil, err
	}
	// f(x), the leaf_index of the first event with sequence ≥ x (infinite
	// when there is none), does not decrease in x: find the smallest x with
	// f(x) ≥ leaf.
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	for lo < hi {
		mid := lo + int64((uint64(hi)-uint64(lo))/2)
		at, l, ok, err := probe(mid)
		switch {
		case err != nil:
			return 0, false, err
		case !ok || l >= leaf:
			hi = mid
		case at == math.MaxInt64:
			return 0, false, nil
		default:
			lo = at + 1 // f is l < leaf on all of [mid, at]
		}
	}
	at, l, ok, err := probe(lo)
	if err != nil || !ok || l < leaf {
		return 0, false, err
	}
	return at, true, nil
}

// queryEvents reads rows of eventFields of the account userID.
func (s *Store) queryEvents(ctx context.Context, q Querier, userID, query string, args ...any) ([]Event, error) {
	return queryAll(ctx, s, q, func(r scanner) (Event, error) { return scanEvent(r, userID) }, query, args...)
}

// SearchFilter selects events for POST /v1/events/search.
type SearchFilter struct {
	UserID     string
	AfterTS    *int64 // ts strictly after, unix micros
	BeforeTS   *int64 // ts strictly before
	Cursor     *int64 // sequence strictly below
	Decision   *string
	EventTypes []string
	Tool       *string
	Limit      int
}

// Search returns matching events, newest first. Only the fields a search
// result shows are read: Raw, Signature, SignatureKey, LeafIndex, TSMicros,
// SemanticKey and CreatedAt stay zero.
func (s *Store) Search(ctx context.Context, f SearchFilter) ([]Event, error) {
	account, err := s.accountKey(ctx, nil, f.UserID)
	if err != nil {
		return nil, err
	}
	q, args := s.searchStatement(account, f)
	out := make([]Event, 0, min(f.Limit, 1000))
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		e := Event{UserID: f.UserID}
		if err := rows.Scan(&e.Sequence, &e.EventID, &e.EventType, &e.PrevHash, &e.PayloadHash, &e.Decision, &e.Tool,
			&e.MachineID, &e.ParentID, &e.TS, &e.APIKeyID, &e.MachineSequence, &e.Surface); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// searchStatement is what Search sends. On PostgreSQL it is planned with its
// values (pgx inlines them, safely quoted): whether the time bounds or an
// event type select few rows decides between an index in sequence order and
// one whose matches must be sorted, and the pool forces generic plans for
// every prepared statement (openPostgres).
func (s *Store) searchStatement(account any, f SearchFilter) (string, []any) {
	q, args := searchQuery(account, f)
	if s.Dialect == Postgres {
		args = append([]any{pgx.QueryExecModeSimpleProtocol}, args...)
	}
	return q, args
}

// searchQuery is the SQL of Search. Every filter but the time bounds has an
// index that yields the account's rows in sequence order (the primary key,
// events_type, events_tool, events_decision), so a page reads about limit
// rows whatever the chain length (TestSearchPlans).
func searchQuery(account any, f SearchFilter) (string, []any) {
	var where []string
	args := []any{account}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	where = append(where, "account = $1")
	if f.AfterTS != nil {
		where = append(where, "ts_micros > "+arg(*f.AfterTS))
	}
	if f.BeforeTS != nil {
		where = append(where, "ts_micros < "+arg(*f.BeforeTS))
	}
	if f.Cursor != nil {
		where = append(where, "sequence < "+arg(*f.Cursor))
	}
	if f.Decision != nil {
		where = append(where, "decision = "+arg(*f.Decision))
	}
	if f.Tool != nil {
		where = append(where, "tool = "+arg(*f.Tool))
	}
	if len(f.EventTypes) > 0 {
		ph := make([]string, len(f.EventTypes))
		for i, t := range f.EventTypes {
			ph[i] = arg(t)
		}
		where = append(where, "event_type IN ("+strings.Join(ph, ", ")+")")
	}
	limit := arg(f.Limit)
	return `SELECT ` + searchColumns + ` FROM events WHERE ` + strings.Join(where, " AND ") + ` ORDER BY sequence DESC LIMIT ` + limit, args
}

// searchColumns are the columns a search result shows (SPEC.md "Event": no
// raw, signature or signature_key). Reading only these matters on SQLite,
// where the driver pays a locked call per column per row: 13 columns instead
// of 21 cut the row decoding of a 200-row page by a third.
const searchColumns = `sequence, event_id, event_type, prev_hash, payload_hash, decision, tool, machine_id, parent_id, ts, api_key_id,
	machine_sequence, surface`

// LatestSemanticMatch returns the newest event of the account with that dedup
// semantic key and a sequence of at least minSequence.
func (s *Store) LatestSemanticMatch(ctx context.Context, q Querier, userID, key string, minSequence int64) (Event, error) {
	if q == nil {
		q = s.read
	}
	account, err := s.accountKey(ctx, q, userID)
	if err != nil {
		return Event{}, err
	}
	return scanEvent(q.QueryRowContext(ctx, `SELECT `+eventFields+` FROM events
		WHERE account = $1 AND semantic_key = $2 AND sequence >= $3 ORDER BY sequence DESC LIMIT 1`, account, key, minSequence), userID)
}

// SigningKey is a machine's registered Ed25519 key.
type SigningKey struct {
	UserID       string
	MachineID    string
	FromLeaf     int64
	PublicKey    string
	Fingerprint  string
	RegisteredAt int64
}

// CurrentSigningKey returns the machine's newest key, or ErrNotFound.
func (s *Store) CurrentSigningKey(ctx context.Context, q Querier, userID, machineID string) (SigningKey, error) {
	if q == nil {
		q = s.read
	}
	var k SigningKey
	err := q.QueryRowContext(ctx, `SELECT user_id, machine_id, from_leaf, public_key, fingerprint, registered_at FROM signing_keys
		WHERE user_id = $1 AND machine_id = $2 ORDER BY from_leaf DESC LIMIT 1`, userID, machineID).
		Scan(&k.UserID, &k.MachineID, &k.FromLeaf, &k.PublicKey, &k.Fingerprint, &k.RegisteredAt)
	if errors.Is(err, sql.ErrNoRows) {
		return k, ErrNotFound
	}
	return k, err
}

// SigningKeys lists every key the account registered, in registration order.
func (s *Store) SigningKeys(ctx context.Context, userID string) ([]SigningKey, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT user_id, machine_id, from_leaf, public_key, fingerprint, registered_at FROM signing_keys
		WHERE user_id = $1 ORDER BY from_leaf, machine_id`, userID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SigningKey
	for rows.Next() {
		var k SigningKey
		if err := rows.Scan(&k.UserID, &k.MachineID, &k.FromLeaf, &k.PublicKey, &k.Fingerprint, &k.RegisteredAt); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// InsertSigningKey records k inside tx, which holds the account's head, in
// force from leaf k.FromLeaf (the next appended event); a second key at the
// same leaf replaces the first.
func (s *Store) InsertSigningKey(ctx context.Context, tx *sql.Tx, k SigningKey, apiKeyID string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO signing_keys (user_id, machine_id, from_leaf, public_key, fingerprint, registered_at, api_key_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (user_id, machine_id, from_leaf) DO UPDATE SET public_key = excluded.public_key,
			fingerprint = excluded.fingerprint, registered_at = excluded.registered_at, api_key_id = excluded.api_key_id`,
		k.UserID, k.MachineID, k.FromLeaf, k.PublicKey, k.Fingerprint, k.RegisteredAt, apiKeyID)
	return err
}

// MachineSummary is one machine seen on the account.
type MachineSummary struct {
	MachineID string
	Events    int64
}

// Machines lists the machines that appended events.
func (s *Store) Machines(ctx context.Context, userID string) ([]MachineSummary, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT machine_id, events FROM machine_heads WHERE user_id = $1 AND machine_id <> '' ORDER BY machine_id`, userID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []MachineSummary
	for rows.Next() {
		var m MachineSummary
		if err := rows.Scan(&m.MachineID, &m.Events); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// ConsumeQuota adds n to the account's usage of day if the total stays within
// limit, and reports the usage after the call. Because it is one conditional
// upsert in the caller's transaction, the quota holds across replicas.
//
// n = 0 charges nothing and is refused (ok false) once the quota is used up:
// an account over its quota is refused whatever it sent (CONTRACT.md "Batch").
func (s *Store) ConsumeQuota(ctx context.Context, tx *sql.Tx, userID, day string, n, limit int64) (used int64, ok bool, err error) {
	if n == 0 || n > limit {
		used, err = s.QuotaUsed(ctx, tx, userID, day)
		return used, err == nil && n == 0 && used < limit, err
	}
	if s.Dialect == SQLite {
		err = tx.QueryRowContext(ctx, `UPDATE chain_heads SET quota_used = `+sqliteQuotaUsed+` + $3, quota_day = `+sqliteQuotaDay+`
			WHERE user_id = $1 AND `+sqliteQuotaUsed+` + $3 <= $4 RETURNING quota_used`, userID, day, n, limit).Scan(&used)
		if errors.Is(err, sql.ErrNoRows) {
			if used, err = s.QuotaUsed(ctx, tx, userID, day); err == nil && used+n <= limit {
				err = fmt.Errorf("quota of %s: %w", userID, errNoHead)
			}
			return used, false, err
		}
		return used, err == nil, err
	}
	err = tx.QueryRowContext(ctx, `INSERT INTO daily_usage (user_id, day, used) VALUES ($1, $2, $3)
		ON CONFLICT (user_id, day) DO UPDATE SET used = daily_usage.used + excluded.used
		WHERE daily_usage.used + excluded.used <= $4
		RETURNING used`, userID, day, n, limit).Scan(&used)
	if errors.Is(err, sql.ErrNoRows) {
		used, err = s.QuotaUsed(ctx, tx, userID, day)
		return used, false, err
	}
	return used, err == nil, err
}

// sqliteQuotaUsed is, in a statement on chain_heads whose $2 is today's
// day, the account's usage today, and sqliteQuotaDay the day a charge
// records. The head row keeps one day (quota_day): a later day starts from
// 0. A day just before it — a clock set back across midnight — counts
// against it, so the quota does not open again; a day further back means the
// clock had run ahead and was corrected, and the count starts over at today
// rather than keeping the wrong day's quota until that date (found by a
// reviewer: a clock 30 days ahead for a moment took the quota for 30 days).
const (
	sqliteQuotaStartsOver = `(quota_day IS NULL OR $2 > quota_day OR $2 < date(quota_day, '-1 day'))`
	sqliteQuotaUsed       = `(CASE WHEN ` + sqliteQuotaStartsOver + ` THEN 0 ELSE quota_used END)`
	sqliteQuotaDay        = `(CASE WHEN ` + sqliteQuotaStartsOver + ` THEN $2 ELSE quota_day END)`
)

// QuotaUsed reads the account's usage of day.
func (s *Store) QuotaUsed(ctx context.Context, q Querier, userID, day string) (int64, error) {
	if q == nil {
		q = s.read
	}
	var used int64
	query := `SELECT used FROM daily_usage WHERE user_id = $1 AND day = $2`
	if s.Dialect == SQLite {
		query = `SELECT ` + sqliteQuotaUsed + ` FROM chain_heads WHERE user_id = $1`
	}
	err := q.QueryRowContext(ctx, query, userID, day).Scan(&used)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return used, err
}

// RateState reads and locks a GCRA state (0 when never used): a key's batch
// rate, or a mail throttle's budget (throttles.go).
func (s *Store) RateState(ctx context.Context, tx *sql.Tx, keyID string) (int64, error) {
	q := `SELECT tat_micros FROM rate_state WHERE key_id = $1`
	if s.Dialect == Postgres {
		q += ` FOR UPDATE`
	}
	for try := 0; ; try++ {
		if _, err := tx.ExecContext(ctx, `INSERT INTO rate_state (key_id, tat_micros) VALUES ($1, 0) ON CONFLICT (key_id) DO NOTHING`, keyID); err != nil {
			return 0, err
		}
		var tat int64
		err := tx.QueryRowContext(ctx, q, keyID).Scan(&tat)
		// PostgreSQL: an idle row PruneRateStates deleted between the two
		// statements is inserted again.
		if errors.Is(err, sql.ErrNoRows) && try < 2 {
			continue
		}
		return tat, err
	}
}

// SetRateState stores a key's GCRA state.
func (s *Store) SetRateState(ctx context.Context, tx *sql.Tx, keyID string, tat int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE rate_state SET tat_micros = $2 WHERE key_id = $1`, keyID, tat)
	return err
}
