package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	"github.com/auditchain/auditchain/pkg/api"
)

// Event is a stored event row: the event as the API shows it whole
// (api.StoredEvent, whose fields it promotes) and the row's own columns.
type Event struct {
	api.StoredEvent // Raw is nil when raw was absent or null
	LeafIndex       int64
	TSMicros        *int64
	SemanticKey     *string
	CreatedAt       int64
	// BelowTip marks an event stored below the account's tip (a batch row
	// whose sequence was below the highest stored one): it took the next
	// leaf, so it is out of sequence order in leaf order (migration 014).
	BelowTip bool
	// Subagent is raw's subagent member as the subagent column holds it
	// (RawSubagent) when SubagentRead is set (ReadSubagent); otherwise the
	// insert reads it from Raw. A read of events leaves both unset.
	Subagent     *string
	SubagentRead bool
}

// eventColumns are an event row's columns as inserted: its account first (the
// value accountKeyForWrite gives, account_numbers.go), then eventFields, then
// raw's subagent member (events_subagent.go), which only search reads.
const eventColumns = `account, ` + eventFields + `, subagent`

// eventFields are the columns a read of whole events takes: the row without
// its account, which the query names (scanEvent sets Event.UserID from it).
const eventFields = `sequence, leaf_index, event_id, event_type, prev_hash, payload_hash, raw, decision, tool,
	machine_id, parent_id, signature, signature_key, ts, ts_micros, surface, api_key_id, machine_sequence, semantic_key, created_at,
	below_tip`

// scanEvent reads a row of eventFields of the account userID.
func scanEvent(r scanner, userID string) (Event, error) {
	var e Event
	e.UserID = userID
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
		args := make([]any, 0, len(chunk)+1)
		args = append(args, account)
		for _, seq := range chunk {
			args = append(args, seq)
		}
		rows, err := q.QueryContext(ctx, eventIDsAtSQL(s.Dialect, len(chunk)), args...)
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

// eventIDsAtSQL is EventIDsAt's statement for n sequences. Its parameters
// are numbered: on SQLite both arms of bySequence name them.
func eventIDsAtSQL(dialect Dialect, n int) string {
	var b strings.Builder
	b.WriteString(`account = ` + parameterIn(dialect, 1) + ` AND sequence IN (`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(parameterIn(dialect, i+2))
	}
	b.WriteByte(')')
	return bySequence(dialect, `sequence, event_id`, b.String())
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
// There is no payload_hash index (migration 007), so this walks the key by
// sequence backwards; the walk is bounded to PayloadHashSearchWindow positions, so a
// link to nowhere — which any client can write through batch rows — costs a
// bounded read, not a scan of the whole chain. A target further back is
// reported as not found.
func (s *Store) EventByPayloadHash(ctx context.Context, userID, hash string, beforeSequence int64) (Event, error) {
	account, err := s.accountKey(ctx, nil, userID)
	if err != nil {
		return Event{}, err
	}
	return scanEvent(s.read.QueryRowContext(ctx, eventByPayloadHashSQL(s.Dialect),
		account, beforeSequence, hash, beforeSequence-PayloadHashSearchWindow), userID)
}

func eventByPayloadHashSQL(dialect Dialect) string {
	return bySequence(dialect, eventFields,
		`account = $1 AND sequence < $2 AND sequence >= $4 AND payload_hash = $3`) + ` ORDER BY sequence DESC LIMIT 1`
}

// PayloadHashSearchWindow is how far back EventByPayloadHash looks.
const PayloadHashSearchWindow = 10_000

// EventsBefore returns up to limit events with sequence below seq, newest first.
func (s *Store) EventsBefore(ctx context.Context, userID string, seq int64, limit int) ([]Event, error) {
	account, err := s.accountKey(ctx, nil, userID)
	if err != nil {
		return nil, err
	}
	return s.queryEvents(ctx, s.read, userID, eventsBeforeSQL(s.Dialect), account, seq, limit)
}

func eventsBeforeSQL(dialect Dialect) string {
	return bySequence(dialect, eventFields, `account = $1 AND sequence < $2`) +
		` ORDER BY sequence DESC LIMIT $3`
}

// queryEvents reads rows of eventFields of the account userID.
func (s *Store) queryEvents(ctx context.Context, q Querier, userID, query string, args ...any) ([]Event, error) {
	return queryAll(ctx, s, q, func(r scanner) (Event, error) { return scanEvent(r, userID) }, query, args...)
}
