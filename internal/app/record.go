package app

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/auditchain/auditchain/internal/chain"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/stream"
	"github.com/auditchain/auditchain/pkg/verify"
)

// Quota is the daily event quota as responses show it (SPEC.md "Quota").
type Quota struct {
	Limit     int64 `json:"limit"`
	Remaining int64 `json:"remaining"`
	UsedToday int64 `json:"used_today"`
}

func (a *App) quota(used int64) Quota {
	limit := int64(a.Cfg.DailyEventQuota)
	return Quota{Limit: limit, Remaining: max(0, limit-used), UsedToday: used}
}

// AppendResult is the outcome of one append.
type AppendResult struct {
	Event    store.Event
	Epoch    domain.EpochStamp
	Quota    Quota
	Advisory *domain.DedupAdvisory
	// Replayed is true when the event_id was already stored with identical
	// content: the stored event is answered and nothing is written.
	Replayed bool
}

// txn is one write transaction plus what must happen once it commits.
type txn struct {
	tx     *sql.Tx
	frames []pendingFrame
}

type pendingFrame struct {
	userID string
	frame  stream.Frame
}

// write runs fn in a write transaction and answers only after it committed.
// Stream frames are published only after the commit, so listeners never see an
// event that was rolled back. On SQLite, fn joins the group commit (see
// groupcommit.go), which publishes in commit order; on PostgreSQL each call is
// its own transaction and frames ride NOTIFY inside it, which PostgreSQL
// delivers on commit, in commit order, to every replica.
func (a *App) write(ctx context.Context, fn func(t *txn) error) error {
	if a.Store.Dialect == store.SQLite {
		return a.writeGrouped(ctx, fn)
	}
	var t txn
	err := a.Store.InTx(ctx, func(tx *sql.Tx) error {
		t = txn{tx: tx}
		return fn(&t)
	})
	if err != nil {
		return err
	}
	for _, f := range t.frames {
		a.Hub.Publish(f.userID, f.frame)
	}
	return nil
}

// frameOf is the stream frame announcing e.
func frameOf(e *store.Event) stream.Frame {
	return stream.Frame{EventID: e.EventID, EventType: e.EventType, Sequence: e.Sequence, Tool: e.Tool, Decision: e.Decision, MachineID: e.MachineID}
}

// publish announces an appended event to stream listeners.
func (a *App) publish(ctx context.Context, t *txn, e *store.Event) error {
	f := frameOf(e)
	if a.PGBus != nil {
		return a.PGBus.NotifyInTx(ctx, t.tx, e.UserID, f)
	}
	t.frames = append(t.frames, pendingFrame{userID: e.UserID, frame: f})
	return nil
}

// Append stores one client event (POST /v1/events) after every check of
// SPEC.md: shape, continuity against the chain head, the machine's signature,
// and the daily quota, all against one state of the account's head: within one
// transaction that holds it (appendInTx), or on PostgreSQL, for an event of no
// machine, in one statement that moves it only if it is unchanged
// (appendUnlocked).
func (a *App) Append(ctx context.Context, p Principal, in domain.EventInput, surface string) (AppendResult, error) {
	if in.PayloadHash != nil {
		return AppendResult{}, domain.Validation(domain.FieldError{Field: "payload_hash", Message: "is computed by the service on append; do not send it"})
	}
	if errs := domain.ValidateEventShape(&in); len(errs) > 0 {
		return AppendResult{}, domain.Validation(errs...)
	}
	// Verify the signature before taking the account's lock: Ed25519 is the
	// largest CPU cost of an append. The transaction re-checks that the key it
	// was verified with is still the machine's key.
	verifiedWith, err := a.preverify(ctx, p.UserID, &in)
	if err != nil {
		return AppendResult{}, err
	}
	now := a.Now()
	prepared, err := a.prepareEvent(p, &in, surface, now)
	if err != nil {
		return AppendResult{}, err
	}
	var res AppendResult
	var done bool
	if a.Store.Dialect == store.Postgres && in.MachineID == nil && surface != serviceSurface {
		res, done, err = a.appendUnlocked(ctx, p, &in, &prepared, now)
		if done {
			a.pgAppends.optimistic.Add(1) // stored, or refused (a replay's error, a 409)
		}
		if err != nil {
			return AppendResult{}, err
		}
	}
	if a.Store.Dialect == store.Postgres && !done {
		a.pgAppends.locked.Add(1)
	}
	if !done {
		err = a.write(ctx, func(t *txn) error {
			res = AppendResult{}
			return a.appendInTx(ctx, t, p, &in, &prepared, surface, verifiedWith, &res)
		})
		if err != nil {
			return AppendResult{}, err
		}
	}
	res.Epoch = domain.NewEpochStamp(a.Cfg.EpochAnchor, now)
	return res, nil
}

// preverify checks in's signature against the machine's current key, if any,
// and returns that key's fingerprint ("" when the machine has no key).
func (a *App) preverify(ctx context.Context, userID string, in *domain.EventInput) (string, error) {
	if in.MachineID == nil {
		return "", nil
	}
	k, err := a.Store.CurrentSigningKey(ctx, nil, userID, *in.MachineID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return k.Fingerprint, verifySignature(k, in)
}

var errSignature = &domain.Error{Status: http.StatusUnauthorized, Code: domain.CodeSignatureInvalid,
	Detail: "this machine registered a signing key and the event's signature does not verify over raw"}

func verifySignature(k store.SigningKey, in *domain.EventInput) error {
	if in.Signature == nil {
		return errSignature.With("machine_id", k.MachineID)
	}
	pub, err := chain.ParsePublicKey(k.PublicKey)
	if err != nil {
		return fmt.Errorf("stored signing key of %s: %w", k.MachineID, err)
	}
	if chain.VerifyEventSignature(ed25519.PublicKey(pub), in.Raw, *in.Signature) != nil {
		return errSignature.With("machine_id", k.MachineID)
	}
	return nil
}

// appendInTx is the locked append path. Client events (but those
// appendUnlocked stores on PostgreSQL, with the same checks and outcomes),
// and every event the service writes itself (governance.*, grant.*,
// chain_repair, anchors), pass through it with the same checks, inside the
// caller's transaction.
func (a *App) appendInTx(ctx context.Context, t *txn, p Principal, in *domain.EventInput, prepared *store.Event, surface, verifiedWith string, res *AppendResult) error {
	tx := t.tx
	now := a.Now()
	head, err := a.Store.LockHead(ctx, tx, p.UserID)
	if err != nil {
		return err
	}
	day := domain.QuotaDay(now)

	replay := func(cause error) error {
		r, err := a.replayOf(ctx, tx, p.UserID, in, day, cause)
		if err == nil {
			*res = r
		}
		return err
	}

	if err := checkContinuity(head, in); err != nil {
		return replay(err)
	}

	if in.MachineID != nil {
		k, err := a.Store.CurrentSigningKey(ctx, tx, p.UserID, *in.MachineID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if verifiedWith != "" { // the key vanished between check and lock: keys are never deleted
				return fmt.Errorf("signing key of %s disappeared", *in.MachineID)
			}
		case err != nil:
			return err
		case k.Fingerprint != verifiedWith:
			if err := verifySignature(k, in); err != nil {
				return err
			}
		}
	}

	if surface != serviceSurface {
		if prepared == nil {
			return errors.New("a client event reached the writer unprepared")
		}
		return a.appendChargedInTx(ctx, t, in, prepared, head, day, replay, res)
	}

	// The rest is for events the service writes itself (revocations,
	// governance, repairs, anchors). They do not spend the client's daily
	// quota: a revocation must work even on an account that used its quota up
	// (docs/decisions/record.md). Their result carries no quota: the service
	// answers with what it did, not with the event (appendServerEvent).
	var e store.Event
	if prepared != nil {
		e = *prepared
		err = a.placeEvent(ctx, tx, &e, head.EventCount)
	} else {
		e, err = a.buildEvent(ctx, tx, p, in, surface, head.EventCount)
	}
	if err != nil {
		return err
	}
	if e.SemanticKey != nil && e.Tool != nil {
		adv, err := a.dedupAdvisory(ctx, tx, p.UserID, *e.Tool, *e.SemanticKey, domain.EventIntent(e.Raw), head.LastSequence)
		if err != nil {
			return err
		}
		res.Advisory = adv
	}
	if err := a.Store.InsertEvent(ctx, tx, &e); errors.Is(err, store.ErrConflict) {
		// The event_id is taken by another event (continuity passed, so this
		// is not a replay): refuse.
		if rerr := replay(err); rerr != nil {
			return rerr
		}
		return fmt.Errorf("event %s: conflict on insert but identical to the stored event", *in.EventID)
	} else if err != nil {
		return err
	}
	if err := a.publish(ctx, t, &e); err != nil {
		return err
	}
	res.Event = e
	return nil
}

// appendChargedInTx ends appendInTx for a client event: the quota, the
// machine counter, the row, its Merkle rows and the head move in as few
// statements as the store allows (store.InsertEventCharged: one on
// PostgreSQL, where each is a round trip made while the head row is locked;
// three or four on SQLite, where each costs the single writer), with the same
// outcomes in the same order as the general path — quota (429), then the
// event_id's unique key (a replay or 409 event_id_conflict). A refusal
// returns an error, so the transaction (SQLite: the request's savepoint, or
// its transaction when it is alone in one) rolls back whatever the statements
// moved.
func (a *App) appendChargedInTx(ctx context.Context, t *txn, in *domain.EventInput, prepared *store.Event, head store.Head, day string, replay func(error) error, res *AppendResult) error {
	e := *prepared
	e.LeafIndex = head.EventCount
	if e.SemanticKey != nil && e.Tool != nil { // before the insert: the advisory is about earlier calls
		adv, err := a.dedupAdvisory(ctx, t.tx, e.UserID, *e.Tool, *e.SemanticKey, domain.EventIntent(e.Raw), head.LastSequence)
		if err != nil {
			return err
		}
		res.Advisory = adv
	}
	hashes, err := a.Store.LeafHashes(ctx, t.tx, &e)
	if err != nil {
		return err
	}
	ca, err := a.chargedAppend(&e, hashes, head, day)
	if err != nil {
		return err
	}
	out, err := a.Store.InsertEventCharged(ctx, t.tx, ca)
	if err != nil {
		return err
	}
	if !out.QuotaOK {
		used, err := a.Store.QuotaUsed(ctx, t.tx, e.UserID, day)
		if err != nil {
			return err
		}
		return a.quotaExceeded(used)
	}
	if !out.Inserted {
		// The event_id is taken by another event (continuity passed, so this
		// is not a replay): refuse; the rollback undoes the quota and counter.
		if rerr := replay(store.ErrConflict); rerr != nil {
			return rerr
		}
		return fmt.Errorf("event %s: conflict on insert but identical to the stored event", *in.EventID)
	}
	if a.PGBus == nil {
		if err := a.publish(ctx, t, &e); err != nil {
			return err
		}
	}
	res.Event, res.Quota = e, a.quota(out.QuotaUsed)
	return nil
}

// chargedAppend is the append statement's input for e, which extends head.
func (a *App) chargedAppend(e *store.Event, hashes []merkle.StoredHash, head store.Head, day string) (store.ChargedAppend, error) {
	ca := store.ChargedAppend{Event: e, Hashes: hashes, Expect: head, Day: day, Limit: int64(a.Cfg.DailyEventQuota)}
	// The stream notification rides the same statement (it is delivered only
	// on commit, like NotifyInTx's).
	if a.PGBus != nil {
		var err error
		if ca.NotifyChannel, ca.NotifyPayload, err = a.PGBus.Notification(e.UserID, frameOf(e)); err != nil {
			return ca, err
		}
	}
	return ca, nil
}

// PGAppends counts client appends on PostgreSQL by the path that stored (or
// refused) them: the optimistic statement, or the locked transaction (events
// of a machine, and every fallback: docs/decisions/postgres-append.md).
func (a *App) PGAppends() (optimistic, locked int64) {
	return a.pgAppends.optimistic.Load(), a.pgAppends.locked.Load()
}

// appendUnlocked is Append's fast path on PostgreSQL for an event of no
// machine (docs/decisions/postgres-append.md): it takes the head and the
// Merkle hashes the next leaf needs from this replica's head cache, or else
// reads them in one statement without a lock, checks continuity against them,
// and writes with one statement (shared with other accounts' appends:
// pgbatch.go) that moves the head only if it is still that head — one or two
// round trips and no transaction, where the locked path makes five (the API
// key's read comes before either). done is false, and nothing was written,
// whenever the locked path must decide instead: the first event of an
// account, a head moved by a concurrent append, a missing tree, or a refusal
// by the quota or the event_id's unique key. A continuity failure is
// answered here (a replay, or the 409 the locked path would give).
//
// Events of a machine always take the locked path: its signing key is
// re-read there under the head's lock, which a key registration also takes;
// the unlocked statement's snapshot could miss a key registered meanwhile.
func (a *App) appendUnlocked(ctx context.Context, p Principal, in *domain.EventInput, prepared *store.Event, now time.Time) (AppendResult, bool, error) {
	if cached, ok := a.heads.get(p.UserID); ok {
		res, done, err := a.appendOptimistic(ctx, p, in, prepared, now, cached.head, cached)
		if err != nil || done {
			if done {
				a.heads.hits.Add(1)
			}
			return res, done, err
		}
		a.heads.stale.Add(1)
		// The head moved since this replica's last append (another replica
		// or path appended), or the event does not extend the cached head:
		// read the head and decide against it.
		a.heads.drop(p.UserID)
	}
	// Clients number their events 0, 1, 2…, so the head usually holds as
	// many events as the new sequence: read that leaf's hashes ahead, and the
	// frontier the head cache keeps after it.
	guess := *in.Sequence
	head, hashes, err := a.Store.HeadForAppend(ctx, p.UserID, append(store.LeafReads(guess), merkle.FrontierIndexes(guess)...))
	if err != nil || head.Empty() {
		return AppendResult{}, false, err
	}
	// A lost compare-and-set goes to the locked path. Reading the head again
	// instead (the event then fails continuity, answered without the lock)
	// was measured worse on a hot account: 79–88 appends/s against 103–110,
	// the faster 409s feeding the clients' retry storm.
	return a.appendOptimistic(ctx, p, in, prepared, now, head, hashes)
}

// appendOptimistic is appendUnlocked against head, read from the database
// or the head cache (hashes is then the cached frontier). From the cache,
// done false means the cached head was not the account's head.
func (a *App) appendOptimistic(ctx context.Context, p Principal, in *domain.EventInput, prepared *store.Event, now time.Time, head store.Head, hashes merkle.HashReader) (res AppendResult, done bool, err error) {
	_, fromCache := hashes.(cachedHead)
	if cause := checkContinuity(head, in); cause != nil {
		if fromCache {
			return res, false, nil // the cache answers nothing: read the head
		}
		// Answered here, as the locked path would against the head it
		// locks: a replay if the event is stored, else the refusal naming
		// the head read. No lock is needed to refuse; on a hot account
		// most attempts end here.
		res, err := a.replayOf(ctx, nil, p.UserID, in, domain.QuotaDay(now), cause)
		return res, true, err
	}
	e := *prepared
	e.LeafIndex = head.EventCount
	leaf, err := verify.HashBytes(e.PayloadHash)
	if err != nil {
		return res, false, err
	}
	// One more read when the guess was wrong (a chain with gaps). The
	// cached frontier needs no check that the tree is there: this replica's
	// append built on it.
	reads := store.LeafReads(e.LeafIndex)
	if fromCache {
		reads = merkle.AppendReads(e.LeafIndex)
	}
	if _, err := hashes.ReadHashes(reads); errors.Is(err, store.ErrMissingHash) {
		return res, false, nil // the tree is incomplete: the locked path builds it
	} else if err != nil {
		return res, false, err
	}
	newHashes, err := merkle.AppendLeaf(e.LeafIndex, leaf, hashes)
	if err != nil {
		return res, false, err
	}
	if e.SemanticKey != nil && e.Tool != nil {
		// Read without a lock: if the head is still the one read above when
		// the write commits, no event was added since, so the advisory is
		// about exactly the events before this one.
		if res.Advisory, err = a.dedupAdvisory(ctx, nil, e.UserID, *e.Tool, *e.SemanticKey, domain.EventIntent(e.Raw), head.LastSequence); err != nil {
			return res, false, err
		}
	}
	day := domain.QuotaDay(now)
	ca, err := a.chargedAppend(&e, newHashes, head, day)
	if err != nil {
		return res, false, err
	}
	if fromCache && e.LeafIndex > 0 {
		// Rows lost since this replica's last append must be rebuilt before
		// the tree grows on them (the locked path does).
		check := store.TreeCheckIndex(e.LeafIndex)
		ca.TreeCheck = &check
	}
	out, err := a.pgBatch.submit(ctx, ca)
	if err != nil || !out.Appended() {
		return res, false, err
	}
	lastHash, lastID := e.PayloadHash, e.EventID
	a.heads.put(e.UserID, store.Head{LastSequence: e.Sequence, LastHash: &lastHash, LastEventID: &lastID,
		EventCount: head.EventCount + 1}, hashes, newHashes)
	if a.PGBus == nil {
		a.Hub.Publish(e.UserID, frameOf(&e))
	}
	res.Event, res.Quota = e, a.quota(out.QuotaUsed)
	return res, true, nil
}

// replayOf answers an append that failed the continuity check or met its
// event_id's unique key (cause): a retry of an acknowledged (or ambiguously
// committed) event gets the stored event (an idempotent replay), an event_id
// stored with other content 409 event_id_conflict, anything else cause. Only
// then is the stored event looked up, so the common path costs no extra read.
func (a *App) replayOf(ctx context.Context, q store.Querier, userID string, in *domain.EventInput, day string, cause error) (AppendResult, error) {
	stored, err := a.Store.EventByID(ctx, q, userID, *in.EventID)
	if errors.Is(err, store.ErrNotFound) {
		return AppendResult{}, cause
	}
	if err != nil {
		return AppendResult{}, err
	}
	if !sameEvent(&stored, in) {
		return AppendResult{}, (&domain.Error{Status: http.StatusConflict, Code: domain.CodeEventIDConflict,
			Detail: "event_id " + *in.EventID + " is already stored with different content"}).With("sequence", stored.Sequence)
	}
	used, err := a.Store.QuotaUsed(ctx, q, userID, day)
	if err != nil {
		return AppendResult{}, err
	}
	return AppendResult{Event: stored, Quota: a.quota(used), Replayed: true}, nil
}

// checkContinuity applies SPEC.md's chain rules against the head (locked, or
// read for an optimistic append whose write then requires it unchanged).
func checkContinuity(head store.Head, in *domain.EventInput) error {
	if head.Empty() {
		if in.PrevHash != nil {
			return &domain.Error{Status: http.StatusConflict, Code: domain.CodePrevHashGenesis,
				Detail: "the first event of a chain must have prev_hash null"}
		}
		if *in.Sequence != 0 {
			return (&domain.Error{Status: http.StatusConflict, Code: domain.CodeNonMonotonic,
				Detail: "the first event of a chain must have sequence 0"}).With("expected_sequence", 0)
		}
		return nil
	}
	if in.PrevHash == nil || *in.PrevHash != *head.LastHash {
		return (&domain.Error{Status: http.StatusConflict, Code: domain.CodePrevHashMismatch,
			Detail: "prev_hash must be the payload_hash of the last stored event"}).
			With("expected_prev_hash", *head.LastHash).With("last_sequence", head.LastSequence)
	}
	if *in.Sequence <= head.LastSequence {
		return (&domain.Error{Status: http.StatusConflict, Code: domain.CodeNonMonotonic,
			Detail: fmt.Sprintf("sequence must be above the last stored sequence %d", head.LastSequence)}).
			With("last_sequence", head.LastSequence)
	}
	return nil
}

func (a *App) quotaExceeded(used int64) error {
	n := a.Now()
	return (&domain.Error{Status: http.StatusTooManyRequests, Code: domain.CodeDailyQuota,
		Detail:     fmt.Sprintf("the account stored its %d events for today; the quota resets at 00:00 UTC", a.Cfg.DailyEventQuota),
		RetryAfter: domain.SecondsUntilQuotaReset(n)}).With("quota", a.quota(used))
}

// prepareEvent turns a checked input into the row to store, computing what
// needs no database: ts when absent, payload_hash and the dedup semantic key.
// It runs before the writer takes the request, so the single SQLite writer
// never spends its time on JSON canonicalisation.
func (a *App) prepareEvent(p Principal, in *domain.EventInput, surface string, now time.Time) (store.Event, error) {
	e := store.Event{
		UserID: p.UserID, Sequence: *in.Sequence, EventID: *in.EventID, EventType: *in.EventType,
		PrevHash: in.PrevHash, Decision: in.Decision, Tool: in.Tool, MachineID: in.MachineID, ParentID: in.ParentID,
		Signature: in.Signature, SignatureKey: in.SignatureKey, Surface: surface, CreatedAt: now.UnixMicro(),
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
	hash, err := chain.PayloadHash(hashedOf(&e))
	if err != nil {
		return e, domain.Validation(domain.FieldError{Field: "raw", Message: "cannot be canonicalised (RFC 8785): " + err.Error()})
	}
	e.PayloadHash = hash
	if key, ok := a.Dedup.StoredKey(e.EventType, e.Tool, e.Raw); ok {
		e.SemanticKey = &key
	}
	return e, nil
}

// placeEvent sets the fields that depend on the chain: the Merkle leaf and
// the machine's sequence. The caller holds the account's head.
func (a *App) placeEvent(ctx context.Context, tx *sql.Tx, e *store.Event, leaf int64) error {
	e.LeafIndex = leaf
	machine := ""
	if e.MachineID != nil {
		machine = *e.MachineID
	}
	var err error
	e.MachineSequence, err = a.Store.NextMachineSequence(ctx, tx, e.UserID, machine)
	return err
}

// buildEvent is prepareEvent then placeEvent, for callers already in the writer.
func (a *App) buildEvent(ctx context.Context, tx *sql.Tx, p Principal, in *domain.EventInput, surface string, leaf int64) (store.Event, error) {
	e, err := a.prepareEvent(p, in, surface, a.Now())
	if err != nil {
		return e, err
	}
	return e, a.placeEvent(ctx, tx, &e, leaf)
}

// hashedOf is the part of a stored event that payload_hash covers.
func hashedOf(e *store.Event) *chain.HashedEvent {
	ts := e.TS
	return &chain.HashedEvent{EventID: e.EventID, EventType: e.EventType, Sequence: e.Sequence, PrevHash: e.PrevHash,
		Raw: e.Raw, Decision: e.Decision, Tool: e.Tool, MachineID: e.MachineID, ParentID: e.ParentID, TS: &ts,
		Signature: e.Signature, SignatureKey: e.SignatureKey}
}

// sameEvent reports whether in carries the content of the stored event, so a
// retry can be answered with it. A retry that omits ts matches any stored ts
// (the server set it on the first attempt).
func sameEvent(stored *store.Event, in *domain.EventInput) bool {
	h := hashedOf(stored)
	probe := &chain.HashedEvent{EventID: *in.EventID, EventType: *in.EventType, Sequence: *in.Sequence, PrevHash: in.PrevHash,
		Raw: in.Raw, Decision: in.Decision, Tool: in.Tool, MachineID: in.MachineID, ParentID: in.ParentID, TS: in.TS,
		Signature: in.Signature, SignatureKey: in.SignatureKey}
	if in.TS == nil {
		probe.TS = h.TS
	}
	if len(probe.Raw) > 0 && bytes.Equal(bytes.TrimSpace(probe.Raw), []byte("null")) {
		probe.Raw = nil
	}
	a, err1 := chain.PayloadHash(h)
	b, err2 := chain.PayloadHash(probe)
	return err1 == nil && err2 == nil && a == b
}

// dedupAdvisory decides whether an appended tool call repeats one within the
// window, with the same code as the policy probe.
func (a *App) dedupAdvisory(ctx context.Context, q store.Querier, userID, tool, key string, intent domain.Intent, tip int64) (*domain.DedupAdvisory, error) {
	d, err := a.decideDedup(ctx, q, userID, tool, key, intent, tip)
	if err != nil {
		return nil, err
	}
	if adv, ok := d.Advisory(); ok {
		return &adv, nil
	}
	return nil, nil
}

func (a *App) decideDedup(ctx context.Context, q store.Querier, userID, tool, key string, intent domain.Intent, tip int64) (domain.DedupDecision, error) {
	policy := a.Dedup
	var candidates []domain.PriorCall
	if intent != domain.IntentFresh && policy.Cacheable(tool) && tip >= 0 {
		prior, err := a.Store.LatestSemanticMatch(ctx, q, userID, key, tip-int64(policy.WindowEvents)+1)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return domain.DedupDecision{}, err
		default:
			c := domain.PriorCall{EventID: prior.EventID, Sequence: prior.Sequence, SemanticKey: key}
			if ts, err := domain.ParseTimestamp(prior.TS); err == nil {
				c.TS = ts
			}
			candidates = append(candidates, c)
		}
	}
	return domain.DecideDedup(policy, tool, key, intent, candidates, tip, a.Now()), nil
}

// PolicyTestRequest is the body of POST /v1/policy/test.
type PolicyTestRequest struct {
	Tool          string
	ToolInput     json.RawMessage
	Intent        domain.Intent
	ParentEventID *string
}

// PolicyTest predicts what the dedup gate would decide, writing nothing.
func (a *App) PolicyTest(ctx context.Context, p Principal, req PolicyTestRequest) (domain.DedupDecision, error) {
	key, err := domain.SemanticKey(req.Tool, req.ToolInput)
	if err != nil {
		return domain.DedupDecision{}, domain.Validation(domain.FieldError{Field: "tool_input", Message: "must be a JSON object"})
	}
	head, err := a.Store.Head(ctx, p.UserID)
	if err != nil {
		return domain.DedupDecision{}, err
	}
	return a.decideDedup(ctx, nil, p.UserID, req.Tool, key, req.Intent, head.LastSequence)
}

// serviceSurface marks events the service writes itself.
const serviceSurface = "service"

// ServerEvent describes an event the service writes itself.
type ServerEvent struct {
	EventType string
	Raw       any
	Tool      *string
}

// appendServerEvent appends an event the service writes (governance.*,
// grant.*, chain_repair, anchors) at the tip of the account's chain, inside
// the caller's transaction, through the same path and checks as client events.
func (a *App) appendServerEvent(ctx context.Context, t *txn, p Principal, ev ServerEvent) (store.Event, error) {
	head, err := a.Store.LockHead(ctx, t.tx, p.UserID)
	if err != nil {
		return store.Event{}, err
	}
	raw, err := json.Marshal(ev.Raw)
	if err != nil {
		return store.Event{}, fmt.Errorf("server event raw: %w", err)
	}
	id, err := a.newID("evt-", 16)
	if err != nil {
		return store.Event{}, err
	}
	seq := head.LastSequence + 1
	in := domain.EventInput{EventID: &id, EventType: &ev.EventType, Sequence: &seq, PrevHash: head.LastHash, Raw: raw, Tool: ev.Tool}
	var res AppendResult
	if err := a.appendInTx(ctx, t, p, &in, nil, serviceSurface, "", &res); err != nil {
		return store.Event{}, err
	}
	return res.Event, nil
}

// newID returns prefix + hex of n random bytes.
func (a *App) newID(prefix string, n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(a.Rand, b); err != nil {
		return "", err
	}
	return prefix + hex.EncodeToString(b), nil
}

// ChainTip answers GET /v1/chain/tip.
func (a *App) ChainTip(ctx context.Context, p Principal) (store.Head, error) {
	return a.Store.Head(ctx, p.UserID)
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
