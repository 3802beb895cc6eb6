package store

// Inserting event rows: one row alone, or multi-row INSERTs whose texts are
// cached by shape (the columns a chunk binds once or leaves NULL).

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

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
	// A single event becomes the tip: below_tip is NULL. It enters the keys
	// by sequence and search's behind the commit, from the tail
	// (index_behind.go). Only SQLite's append inserts a row alone.
	res, err := tx.ExecContext(ctx, `INSERT INTO events (`+eventColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, NULL, $22)
		ON CONFLICT (account, event_id) DO NOTHING`,
		account, e.Sequence, e.LeafIndex, e.EventID, e.EventType, e.PrevHash, e.PayloadHash, raw, e.Decision, e.Tool,
		e.MachineID, e.ParentID, e.Signature, e.SignatureKey, e.TS, e.TSMicros, e.Surface, e.APIKeyID, e.MachineSequence,
		e.SemanticKey, e.CreatedAt, e.subagentColumn())
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
	s.behind.Add(1)
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
		if s.Dialect == SQLite {
			s.behind.Add(int64(len(chunk))) // the rows entered the tail (index_behind.go)
		}
	}
	return nil
}

// eventColumnCount is the number of eventColumns.
const eventColumnCount = 23

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
		e.Surface, str(e.APIKeyID), e.MachineSequence, str(e.SemanticKey), e.CreatedAt, belowTip, str(e.subagentColumn())}
}

// sharedEventColumns are the columns a multi-row insert binds once when every
// row of it has the same value there (or writes NULL when that value is
// absent): the account; what the service sets per request (surface,
// api_key_id, created_at); and what a batch's rows mostly lack, or share
// (machine_id, parent_id, signature, signature_key, semantic_key, below_tip, subagent). Binding is
// a large part of the single writer's work per batched row on SQLite
// (docs/performance.md), and a chunk binds every column of every row
// otherwise. Content columns are left out: each combination of shared
// columns is a statement of its own to prepare and cache, and these few
// combinations cover the batches a client sends.
var sharedEventColumns = [eventColumnCount]bool{0: true, 10: true, 11: true, 12: true, 13: true, 16: true, 17: true, 19: true, 20: true,
	21: true, 22: true}

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
func (s *Store) parameter(n int) string { return parameterIn(s.Dialect, n) }

func parameterIn(dialect Dialect, n int) string {
	if dialect == SQLite {
		return "?" + strconv.Itoa(n)
	}
	return "$" + strconv.Itoa(n)
}

// placeholder is the SQL placeholder of the n-th (1-based) argument of a
// generated statement with many arguments. Older SQLite drivers bound $N
// parameters by looking each name up in a list, O(n²) over thousands of them;
// modernc.org/sqlite v1.60 maps
// $N and ?N to the argument directly, and positional ? still skips reading
// each parameter's name.
func (s *Store) placeholder(n int) string {
	if s.Dialect == SQLite {
		return "?"
	}
	return "$" + strconv.Itoa(n)
}

// maxRowsPerInsert keeps a multi-row INSERT of events within both databases'
// limits on bound parameters (23 per row; SQLite allows 32,766, PostgreSQL 65,535).
const maxRowsPerInsert = 500
