package app

import (
	"context"
	"errors"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// Search answers POST /v1/events/search: newest first, within the caller's
// account; the page's limit is returned with it.
func (a *App) Search(ctx context.Context, p Principal, req api.SearchRequest) ([]api.Event, int, error) {
	return a.SearchEvents(ctx, p, EventQuery{SearchRequest: req})
}

// EventQuery is a search with the console's filters beside the API's: the
// surface an event came through and the sub-agent its raw names.
type EventQuery struct {
	api.SearchRequest
	Surface  *string
	Subagent *string
}

// SearchEvents is Search with the console's filters (the same rules,
// limits and order).
func (a *App) SearchEvents(ctx context.Context, p Principal, q EventQuery) ([]api.Event, int, error) {
	f, err := a.searchFilter(p, q)
	if err != nil {
		return nil, 0, err
	}
	evs, err := a.store.Search(ctx, f)
	return evs, f.Limit, err
}

// searchFilter checks q as the search route does and makes it the store's filter.
func (a *App) searchFilter(p Principal, q EventQuery) (store.SearchFilter, error) {
	req := q.SearchRequest
	f := store.SearchFilter{UserID: p.UserID, Cursor: req.Cursor, Decision: req.Decision, EventTypes: req.EventTypes, Tool: req.Tool,
		Surface: q.Surface, Subagent: q.Subagent, Limit: domain.DefSearchLimit}
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > domain.MaxSearchLimit {
			return store.SearchFilter{}, domain.Validation(domain.FieldError{Field: "limit", Message: "must be between 1 and 1000"})
		}
		f.Limit = *req.Limit
	}
	parse := func(s *string, code, field string) (*int64, error) {
		if s == nil {
			return nil, nil
		}
		t, err := domain.ParseTimestamp(*s)
		if err != nil {
			const msg = "must be an ISO-8601 timestamp with a UTC offset, like 2026-01-02T15:04:05+00:00"
			return nil, &domain.Error{Code: code, Detail: field + ": " + msg, Fields: []domain.FieldError{{Field: field, Message: msg}}}
		}
		m := t.UnixMicro()
		return &m, nil
	}
	var err error
	if f.AfterTS, err = parse(req.After, domain.CodeInvalidAfter, "after"); err != nil {
		return store.SearchFilter{}, err
	}
	if f.BeforeTS, err = parse(req.Before, domain.CodeInvalidBefore, "before"); err != nil {
		return store.SearchFilter{}, err
	}
	if len(f.EventTypes) > 100 {
		return store.SearchFilter{}, domain.Validation(domain.FieldError{Field: "event_types", Message: "at most 100 types"})
	}
	return f, nil
}

// SearchWindow is how many events a page of SearchEventPage reads at most:
// the surface, sub-agent and time filters have no index in sequence order
// (docs/decisions/console.md), so a page reads this window and keeps what
// matches, then offers to search on below it. 5,000 rows keep the
// costliest filter within the console's page
// budget (docs/performance.md "Console at size").
const SearchWindow = 5_000

// EventRow is a row of SearchEventPage: the search result and raw's
// subagent member.
type EventRow = store.SearchRow

// EventPage is one page of SearchEventPage.
type EventPage struct {
	Rows []EventRow
	// ScannedTo, set when the window ended before a page of matches, is
	// the lowest sequence the page read: the cursor to search on below.
	ScannedTo *int64
	// Window is the events a page reads at most.
	Window int
}

// SearchEventPage is SearchEvents for the console: the same filters and
// rules, each row with its sub-agent, and a bounded cost (SearchWindow rows
// read at most, whatever the chain's length and the filters).
func (a *App) SearchEventPage(ctx context.Context, p Principal, q EventQuery) (EventPage, error) {
	f, err := a.searchFilter(p, q)
	if err != nil {
		return EventPage{}, err
	}
	f.Window = SearchWindow
	pg, err := a.store.SearchWindowed(ctx, f)
	if err != nil {
		return EventPage{}, err
	}
	return EventPage{Rows: pg.Rows, ScannedTo: pg.Floor, Window: SearchWindow}, nil
}

// EventWithAncestry answers GET /v1/events/{event_id}: the event and the chain of
// prev_hash links behind it, up to 50. Another account's id answers exactly like
// a missing one.
func (a *App) EventWithAncestry(ctx context.Context, p Principal, eventID string) (api.EventRead, error) {
	e, err := a.store.EventByID(ctx, nil, p.UserID, eventID)
	if errors.Is(err, store.ErrNotFound) {
		return api.EventRead{}, domain.NotFound(domain.CodeEventNotFound, "event")
	}
	if err != nil {
		return api.EventRead{}, err
	}
	// Normally each link is the event just before, so one query fetches them
	// all; a broken link falls back to a lookup by payload_hash.
	window, err := a.store.EventsBefore(ctx, p.UserID, e.Sequence, domain.MaxAncestry)
	if err != nil {
		return api.EventRead{}, err
	}
	byHash := make(map[string]*store.Event, len(window))
	for i := range window {
		byHash[window[i].PayloadHash] = &window[i]
	}
	ancestry := []api.Ancestor{}
	cur := e
	for len(ancestry) < domain.MaxAncestry && cur.PrevHash != nil {
		prev, ok := byHash[*cur.PrevHash]
		if !ok {
			found, err := a.store.EventByPayloadHash(ctx, p.UserID, *cur.PrevHash, cur.Sequence)
			if errors.Is(err, store.ErrNotFound) {
				break // a break in the chain: the ancestry ends here (heal reports it)
			}
			if err != nil {
				return api.EventRead{}, err
			}
			prev = &found
		}
		if prev.Sequence >= cur.Sequence {
			break // a link pointing forward would loop
		}
		ancestry = append(ancestry, api.Ancestor{EventID: prev.EventID, EventType: prev.EventType, Sequence: prev.Sequence, TS: prev.TS})
		cur = *prev
	}
	return api.EventRead{Event: e.Event, Ancestry: ancestry, UserID: p.UserID}, nil
}

// RegisterSigningKey answers PUT /v1/machines/{machine_id}/signing-key. A
// key of small order, or encoded non-canonically, is refused (verify.
// CheckPublicKey: under the identity point any signature verifies); a
// credential bound to a machine registers only that machine's key. Every
// registration, a rotation included, is written on the account's chain as a
// machine.signing_key event naming the key it replaces, so a replaced key is
// visible to an auditor.
func (a *App) RegisterSigningKey(ctx context.Context, p Principal, machineID, publicKey string) (store.SigningKey, error) {
	if machineID == "" || len(machineID) > 256 {
		return store.SigningKey{}, domain.Validation(domain.FieldError{Field: "machine_id", Message: "must be 1 to 256 bytes"})
	}
	if p.Machine != "" && p.Machine != machineID {
		return store.SigningKey{}, domain.Errorf(domain.CodeMachineMismatch,
			"this key is bound to machine %q: it registers that machine's signing key only", p.Machine).With("machine", p.Machine)
	}
	pub, err := verify.ParsePublicKey(publicKey)
	if err != nil {
		return store.SigningKey{}, domain.Validation(domain.FieldError{Field: "public_key", Message: err.Error()})
	}
	k := store.SigningKey{UserID: p.UserID, MachineID: machineID, PublicKey: publicKey, Fingerprint: verify.Fingerprint(pub),
		RegisteredAt: a.now().UnixMicro()}
	// Under the head's lock, so that no append races the change: the key is
	// in force from the registration's own event on (which no machine signs).
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		head, err := t.Lock(ctx, p.UserID)
		if err != nil {
			return err
		}
		var replaces *string
		switch old, err := a.store.CurrentSigningKey(ctx, t.SQL(), p.UserID, machineID); {
		case err == nil:
			replaces = &old.Fingerprint
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		k.FromLeaf = head.EventCount
		if err := a.store.InsertSigningKey(ctx, t.SQL(), k, p.KeyID); err != nil {
			return err
		}
		t.SigningKeysChanged(p.UserID)
		_, err = a.appendServerEvent(ctx, t, p, ServerEvent{EventType: domain.EventSigningKey, Raw: map[string]any{
			"machine_id": machineID, "public_key": publicKey, "fingerprint": k.Fingerprint, "replaces": replaces,
			"registered_by": actorOf(p),
		}})
		return err
	})
	return k, err
}

// Machines answers GET /v1/machines.
func (a *App) Machines(ctx context.Context, p Principal) ([]api.Machine, error) {
	seen, err := a.store.Machines(ctx, p.UserID)
	if err != nil {
		return nil, err
	}
	keys, err := a.store.SigningKeys(ctx, p.UserID)
	if err != nil {
		return nil, err
	}
	byID := map[string]*api.Machine{}
	var order []string
	get := func(id string) *api.Machine {
		if m, ok := byID[id]; ok {
			return m
		}
		m := &api.Machine{MachineID: id, Keys: []api.MachineKey{}}
		byID[id] = m
		order = append(order, id)
		return m
	}
	for _, s := range seen {
		get(s.MachineID).Events = s.Events
	}
	for _, k := range keys {
		m := get(k.MachineID)
		m.Keys = append(m.Keys, api.MachineKey{Fingerprint: k.Fingerprint, RegisteredAt: time.UnixMicro(k.RegisteredAt).UTC().Format(time.RFC3339Nano), FromLeaf: k.FromLeaf})
		fp := k.Fingerprint
		m.CurrentFingerprint = &fp
	}
	out := make([]api.Machine, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, nil
}

// StoredEvent is one event of the caller's account as stored, raw and
// signature included (the account's own data, as in the export), with its
// leaf in the account's tree. Another account's id answers like a missing one.
func (a *App) StoredEvent(ctx context.Context, p Principal, eventID string) (api.StoredEvent, int64, error) {
	e, err := a.store.EventByID(ctx, nil, p.UserID, eventID)
	if errors.Is(err, store.ErrNotFound) {
		return api.StoredEvent{}, 0, domain.NotFound(domain.CodeEventNotFound, "event")
	}
	if err != nil {
		return api.StoredEvent{}, 0, err
	}
	return e.StoredEvent, e.LeafIndex, nil
}
