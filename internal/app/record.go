package app

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/metrics"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

func (a *App) quota(used int64) api.Quota {
	limit := int64(a.cfg.DailyEventQuota)
	return api.Quota{Limit: limit, Remaining: max(0, limit-used), UsedToday: used}
}

// AppendResult is the outcome of one append.
type AppendResult struct {
	Event    api.StoredEvent
	Epoch    api.EpochStamp
	Quota    api.Quota
	Advisory *api.DedupAdvisory
	// Replayed is true when the event_id was already stored with identical
	// content: the stored event is answered and nothing is written.
	Replayed bool
}

// Append stores one client event (POST /v1/events). The checks run in
// CONTRACT.md's order ("Batch"): the daily quota first — an account over its
// quota gets 429 whatever it sent — then shape (422), continuity against the
// chain head (409), and the machine's signature (401). A retry of a stored
// event is answered with it (an idempotent replay). The write seam decides
// how the event is stored (writer.Append); the rules are all here.
func (a *App) Append(ctx context.Context, p Principal, in api.EventInput, surface string) (AppendResult, error) {
	res, err := a.appendEvent(ctx, p, in, surface)
	a.noteRefusal(ctx, p.UserID, err)
	return res, err
}

func (a *App) appendEvent(ctx context.Context, p Principal, in api.EventInput, surface string) (AppendResult, error) {
	now := a.now()
	if in.PayloadHash != nil {
		return a.refuseAppend(ctx, nil, p.UserID, &in, now, ServiceSets("payload_hash"))
	}
	if errs := domain.ValidateEventShape(&in); len(errs) > 0 {
		return a.refuseAppend(ctx, nil, p.UserID, &in, now, domain.Validation(errs...))
	}
	// Verify the signature before the write: Ed25519 is the largest CPU cost
	// of an append. Under the head's lock the key it was verified with is
	// checked to be still the machine's key.
	verified, err := a.preverify(ctx, p.UserID, &in)
	if err != nil {
		return a.refuseAppend(ctx, nil, p.UserID, &in, now, err)
	}
	e, err := a.prepareEvent(p, &in, surface, now)
	if err != nil {
		return a.refuseAppend(ctx, nil, p.UserID, &in, now, err)
	}
	var advisory *api.DedupAdvisory
	out, err := a.w.Append(ctx, writer.Append{Event: &e, Quota: a.quotaOf(now), Locked: in.MachineID != nil,
		Place: func(ctx context.Context, head store.Head, q store.Querier) error {
			advisory = nil
			if err := checkContinuity(head, &in); err != nil {
				_, err := a.refuseAppend(ctx, q, p.UserID, &in, now, err)
				return err
			}
			if in.MachineID != nil {
				if err := a.recheckSignature(ctx, q, head, p.UserID, &in, verified); err != nil {
					_, err = a.refuseAppend(ctx, q, p.UserID, &in, now, err)
					return err
				}
			}
			var err error
			advisory, err = a.appendAdvisory(ctx, q, &e, head)
			return err
		}})
	var replay *replayed
	var over *writer.QuotaExceeded
	switch {
	case errors.As(err, &replay):
		return a.replayResult(replay, now), nil
	case errors.As(err, &over):
		return AppendResult{}, a.quotaExceeded(over.Used)
	case errors.Is(err, writer.ErrEventIDTaken):
		// Continuity passed, so the stored event has another sequence:
		// never a replay.
		return AppendResult{}, a.eventIDConflict(ctx, p.UserID, *in.EventID)
	case err != nil:
		return AppendResult{}, err
	}
	metrics.EventsAppended.Inc(metrics.AppendSingle)
	return a.appendedResult(out, advisory, now), nil
}

// AppendNext stores one client event that the service numbers (POST
// /v1/events/append, docs/decisions/record.md "Append at the tip"): in
// carries no sequence, prev_hash or payload_hash, and is placed at the
// account's tip in the write that stores it (numberAtTip), as the service's
// own events are, so the 2^52 cap of client sequences does not bind it. The
// rest is Append's: the daily quota first (429 whatever was sent), then
// shape (422), the machine's signature (401); a resend of a stored event_id
// with the same content, at whatever sequence it got, is answered with the
// stored event; other content is 409 event_id_conflict.
func (a *App) AppendNext(ctx context.Context, p Principal, in api.EventInput, surface string) (AppendResult, error) {
	res, err := a.appendNext(ctx, p, in, surface)
	a.noteRefusal(ctx, p.UserID, err)
	return res, err
}

func (a *App) appendNext(ctx context.Context, p Principal, in api.EventInput, surface string) (AppendResult, error) {
	now := a.now()
	for _, f := range []struct {
		name string
		sent bool
	}{{"sequence", in.Sequence != nil}, {"prev_hash", in.PrevHash != nil}, {"payload_hash", in.PayloadHash != nil}} {
		if f.sent {
			return a.refuseAppend(ctx, nil, p.UserID, &in, now, ServiceSets(f.name))
		}
	}
	// The shape, with the sequence the write assigns standing in.
	probe, zero := in, int64(0)
	probe.Sequence = &zero
	if errs := domain.ValidateEventShape(&probe); len(errs) > 0 {
		return a.refuseAppend(ctx, nil, p.UserID, &in, now, domain.Validation(errs...))
	}
	verified, err := a.preverify(ctx, p.UserID, &in)
	if err != nil {
		return a.refuseAppend(ctx, nil, p.UserID, &in, now, err)
	}
	var e store.Event
	e.UserID = p.UserID
	var advisory *api.DedupAdvisory
	out, err := a.w.Append(ctx, writer.Append{Event: &e, Quota: a.quotaOf(now), Locked: in.MachineID != nil,
		Place: func(ctx context.Context, head store.Head, q store.Querier) error {
			advisory = nil
			// e keeps its account when numbering fails: the writer may
			// try again on the locked path.
			next, err := a.numberAtTip(p, head, in, surface, now)
			if err == nil {
				e = next
				if in.MachineID != nil {
					err = a.recheckSignature(ctx, q, head, p.UserID, &in, verified)
				}
			}
			if err != nil {
				_, err = a.refuseAppend(ctx, q, p.UserID, &in, now, err)
				return err
			}
			advisory, err = a.appendAdvisory(ctx, q, &e, head)
			return err
		}})
	var over *writer.QuotaExceeded
	switch {
	case errors.As(err, &over):
		return AppendResult{}, a.quotaExceeded(over.Used)
	case errors.Is(err, writer.ErrEventIDTaken):
		// A resend after a lost answer, or another event under the id.
		_, err = a.refuseAppend(ctx, nil, p.UserID, &in, now, err)
		var replay *replayed
		if errors.As(err, &replay) {
			return a.replayResult(replay, now), nil
		}
		return AppendResult{}, err
	case err != nil:
		return AppendResult{}, err
	}
	metrics.EventsAppended.Inc(metrics.AppendNext)
	return a.appendedResult(out, advisory, now), nil
}

// ServiceSets is the 422 of a field the service sets itself that a client
// sent: payload_hash on every append, and the place (sequence, prev_hash) on
// POST /v1/events/append.
func ServiceSets(field string) *domain.Error {
	msg := "is set by the service on this route, which numbers the event at the tip; send the event without it " +
		"(POST /v1/events takes an event that names its place)"
	if field == "payload_hash" {
		msg = "is computed by the service on append; do not send it"
	}
	return domain.Validation(domain.FieldError{Field: field, Message: msg})
}

// appendedResult is the answer of an append that stored out at now.
func (a *App) appendedResult(out writer.Appended, advisory *api.DedupAdvisory, now time.Time) AppendResult {
	return AppendResult{Event: out.Event.StoredEvent, Quota: a.quota(out.QuotaUsed), Advisory: advisory,
		Epoch: domain.NewEpochStamp(a.cfg.EpochAnchor, now)}
}

// replayResult is the answer of an append found stored (nothing written).
func (a *App) replayResult(r *replayed, now time.Time) AppendResult {
	return AppendResult{Event: r.event.StoredEvent, Quota: a.quota(r.used), Replayed: true, Epoch: domain.NewEpochStamp(a.cfg.EpochAnchor, now)}
}

// appendAdvisory is the dedup advisory of e, a tool call about to extend
// head. It is about the events before e: the head is held, or the append's
// compare-and-set requires it unchanged.
func (a *App) appendAdvisory(ctx context.Context, q store.Querier, e *store.Event, head store.Head) (*api.DedupAdvisory, error) {
	if e.SemanticKey == nil || e.Tool == nil {
		return nil, nil
	}
	return a.dedupAdvisory(ctx, q, e.UserID, *e.Tool, *e.SemanticKey, domain.EventIntent(e.Raw), head.LastSequence)
}

// RefuseBody answers a body of POST /v1/events, /v1/events/append or
// /v1/events/batch that could not be read as one (cause): an account over
// its daily quota gets 429 whatever it sent (CONTRACT.md "Batch"); only a
// body over the size limits (413) is answered before the quota.
func (a *App) RefuseBody(ctx context.Context, p Principal, cause error) error {
	var de *domain.Error
	if !errors.As(cause, &de) || de.Code == domain.CodeBodyTooLarge {
		return cause
	}
	_, err := a.refuseAppend(ctx, nil, p.UserID, &api.EventInput{}, a.now(), cause)
	a.noteRefusal(ctx, p.UserID, err)
	return err
}

// noteRefusal writes the rate.limit_hit notice when err is a 429 for rate or
// quota (CONTRACT.md "Notifications"), after the refused write rolled back.
func (a *App) noteRefusal(ctx context.Context, userID string, err error) {
	var de *domain.Error
	if err == nil || !errors.As(err, &de) || (de.Code != domain.CodeRateLimited && de.Code != domain.CodeDailyQuota) {
		return
	}
	a.noteLimitHit(ctx, userID, de.Code)
}

// quotaOf is the daily quota a client event sent at now is charged against.
func (a *App) quotaOf(now time.Time) *store.Quota {
	return &store.Quota{Day: domain.QuotaDay(now), Limit: int64(a.cfg.DailyEventQuota)}
}

// replayed answers an append whose event is already stored with identical
// content (it ends the write: nothing is written).
type replayed struct {
	event store.Event
	used  int64
}

func (r *replayed) Error() string { return "event " + r.event.EventID + " is already stored" }

// refuseAppend answers an append refused for cause, reading the account
// through q (the write's transaction, or nil: the read pool): over the daily
// quota, 429 whatever the cause; then, for a continuity refusal or an
// event_id the insert found stored, a retry of an acknowledged (or
// ambiguously committed) event is a replay (*replayed), and an event_id
// stored with other content is 409 event_id_conflict. Only a refused append
// pays these reads.
func (a *App) refuseAppend(ctx context.Context, q store.Querier, userID string, in *api.EventInput, now time.Time, cause error) (AppendResult, error) {
	used, err := a.store.QuotaUsed(ctx, q, userID, domain.QuotaDay(now))
	if err != nil {
		return AppendResult{}, err
	}
	if used >= int64(a.cfg.DailyEventQuota) {
		return AppendResult{}, a.quotaExceeded(used)
	}
	var de *domain.Error
	mayBeStored := errors.Is(cause, writer.ErrEventIDTaken) || (errors.As(cause, &de) && continuityCodes[de.Code])
	if in.EventID == nil || !mayBeStored {
		return AppendResult{}, cause
	}
	stored, err := a.store.EventByID(ctx, q, userID, *in.EventID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return AppendResult{}, cause
	case err != nil:
		return AppendResult{}, err
	case !sameEvent(&stored, in):
		return AppendResult{}, conflictOf(&stored)
	}
	return AppendResult{}, &replayed{event: stored, used: used}
}

// continuityCodes are the refusals of checkContinuity, after which an
// event may turn out to be a retry of one stored.
var continuityCodes = map[string]bool{domain.CodePrevHashMismatch: true, domain.CodeNonMonotonic: true, domain.CodePrevHashGenesis: true}

// eventIDConflict is 409 event_id_conflict for eventID, naming the stored
// event's sequence when it can be read.
func (a *App) eventIDConflict(ctx context.Context, userID, eventID string) error {
	stored, err := a.store.EventByID(ctx, nil, userID, eventID)
	if err != nil {
		stored = store.Event{}
		stored.EventID, stored.Sequence = eventID, -1
	}
	return conflictOf(&stored)
}

func conflictOf(stored *store.Event) error {
	e := &domain.Error{Code: domain.CodeEventIDConflict,
		Detail: "event_id " + stored.EventID + " is already stored with different content"}
	if stored.Sequence >= 0 {
		e = e.With("sequence", stored.Sequence)
	}
	return e
}

// checkContinuity applies SPEC.md's chain rules against the head (locked, or
// read for an optimistic append whose write then requires it unchanged).
func checkContinuity(head store.Head, in *api.EventInput) error {
	if head.Empty() {
		if in.PrevHash != nil {
			return &domain.Error{Code: domain.CodePrevHashGenesis,
				Detail: "the first event of a chain must have prev_hash null"}
		}
		if *in.Sequence != 0 {
			return (&domain.Error{Code: domain.CodeNonMonotonic,
				Detail: "the first event of a chain must have sequence 0"}).With("expected_sequence", 0)
		}
		return nil
	}
	if in.PrevHash == nil || *in.PrevHash != *head.LastHash {
		return (&domain.Error{Code: domain.CodePrevHashMismatch,
			Detail: "prev_hash must be the payload_hash of the last stored event"}).
			With("expected_prev_hash", *head.LastHash).With("last_sequence", head.LastSequence)
	}
	if *in.Sequence <= head.LastSequence {
		return (&domain.Error{Code: domain.CodeNonMonotonic,
			Detail: fmt.Sprintf("sequence must be above the last stored sequence %d", head.LastSequence)}).
			With("last_sequence", head.LastSequence)
	}
	return nil
}

func (a *App) quotaExceeded(used int64) error {
	n := a.now()
	return (&domain.Error{Code: domain.CodeDailyQuota,
		Detail:     fmt.Sprintf("the account stored its %d events for today; the quota resets at 00:00 UTC", a.cfg.DailyEventQuota),
		RetryAfter: domain.SecondsUntilQuotaReset(n)}).With("quota", a.quota(used))
}

// prepareEvent turns a checked input into the row to store, computing what
// needs no database: ts when absent, payload_hash, the dedup semantic key and
// raw's subagent member.
// It runs before the writer takes the request, so the single SQLite writer
// never spends its time on JSON canonicalisation.
func (a *App) prepareEvent(p Principal, in *api.EventInput, surface string, now time.Time) (store.Event, error) {
	e := store.Event{
		StoredEvent: api.StoredEvent{
			Event: api.Event{UserID: p.UserID, Sequence: *in.Sequence, EventID: *in.EventID, EventType: *in.EventType,
				PrevHash: in.PrevHash, Decision: in.Decision, Tool: in.Tool, MachineID: in.MachineID, ParentID: in.ParentID,
				Surface: surface},
			Signature: in.Signature, SignatureKey: in.SignatureKey,
		},
		CreatedAt: now.UnixMicro(),
	}
	if p.KeyID != "" {
		id := p.KeyID
		e.APIKeyID = &id
	}
	if len(in.Raw) > 0 && !bytes.Equal(bytes.TrimSpace(in.Raw), []byte("null")) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, in.Raw); err != nil {
			return e, domain.Validation(domain.FieldError{Field: "raw", Message: "must be a JSON object"})
		}
		e.Raw = buf.Bytes()
	}
	if in.TS != nil {
		e.TS = *in.TS
	} else {
		e.TS = domain.FormatTimestamp(now)
	}
	if ts, err := domain.ParseTimestamp(e.TS); err == nil {
		m := ts.UnixMicro()
		e.TSMicros = &m
	}
	hash, err := verify.PayloadHash(hashedOf(&e))
	if err != nil {
		return e, domain.Validation(domain.FieldError{Field: "raw", Message: "cannot be canonicalised (RFC 8785): " + err.Error()})
	}
	e.PayloadHash = hash
	if key, ok := a.dedup.StoredKey(e.EventType, e.Tool, e.Raw); ok {
		e.SemanticKey = &key
	}
	e.ReadSubagent() // the console's sub-agent filter's column, read here rather than on the writer
	return e, nil
}

// hashedOf is the part of a stored event that payload_hash covers.
func hashedOf(e *store.Event) *verify.HashedEvent {
	ts := e.TS
	return &verify.HashedEvent{EventID: e.EventID, EventType: e.EventType, Sequence: e.Sequence, PrevHash: e.PrevHash,
		Raw: e.Raw, Decision: e.Decision, Tool: e.Tool, MachineID: e.MachineID, ParentID: e.ParentID, TS: &ts,
		Signature: e.Signature, SignatureKey: e.SignatureKey}
}

// sameEvent reports whether in carries the content of the stored event, so a
// retry can be answered with it. A retry that omits ts matches any stored ts
// (the server set it on the first attempt); one without a sequence (the
// service numbers it: POST /v1/events/append) matches at whatever place the
// stored event took.
func sameEvent(stored *store.Event, in *api.EventInput) bool {
	h := hashedOf(stored)
	probe := &verify.HashedEvent{EventID: *in.EventID, EventType: *in.EventType, Sequence: stored.Sequence, PrevHash: stored.PrevHash,
		Raw: in.Raw, Decision: in.Decision, Tool: in.Tool, MachineID: in.MachineID, ParentID: in.ParentID, TS: in.TS,
		Signature: in.Signature, SignatureKey: in.SignatureKey}
	if in.Sequence != nil {
		probe.Sequence, probe.PrevHash = *in.Sequence, in.PrevHash
	}
	if in.TS == nil {
		probe.TS = h.TS
	}
	if len(probe.Raw) > 0 && bytes.Equal(bytes.TrimSpace(probe.Raw), []byte("null")) {
		probe.Raw = nil
	}
	a, err1 := verify.PayloadHash(h)
	b, err2 := verify.PayloadHash(probe)
	return err1 == nil && err2 == nil && a == b
}

// newID returns prefix + hex of n random bytes.
func (a *App) newID(prefix string, n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(a.rand, b); err != nil {
		return "", err
	}
	return prefix + hex.EncodeToString(b), nil
}

// ChainTip answers GET /v1/chain/tip: all null but the count (0) for an
// empty chain.
func (a *App) ChainTip(ctx context.Context, p Principal) (api.ChainTip, error) {
	h, err := a.store.Head(ctx, p.UserID)
	if err != nil {
		return api.ChainTip{}, err
	}
	tip := api.ChainTip{PayloadHash: h.LastHash, EventID: h.LastEventID, EventCount: h.EventCount}
	if !h.Empty() {
		tip.Sequence = &h.LastSequence
	}
	return tip, nil
}

// Surface validates the X-SVC-Surface header (absent means rest).
func Surface(header string) (string, error) {
	if header == "" {
		return "rest", nil
	}
	if !slices.Contains(domain.Surfaces, header) {
		return "", domain.Validation(domain.FieldError{Field: "X-SVC-Surface", Message: "must be one of rest, mcp, mcp_stdio, sdk, cli, hook, dashboard"})
	}
	return header, nil
}
