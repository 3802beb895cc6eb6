package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/metrics"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// AppendBatch ingests up to 500 rows (SPEC.md "POST /v1/events/batch",
// CONTRACT.md "Batch"). Each row is checked for shape only: continuity and
// signatures are not checked, and prev_hash is stored as sent. A row may
// carry any sequence not stored yet, below or above the tip, with gaps; two
// things are refused per row: a sequence stored under another event_id
// (sequence_taken) and an event_id stored with other content
// (event_id_conflict), while a resend of identical content is skipped. Each
// row's payload_hash is computed, and the new rows are stored in sequence
// order, each taking the next Merkle leaf, so the tree stays append-only
// (CONTRACT.md "Integrity"); the tip is the highest sequence stored. The
// whole batch is one write: the rate limit and then the daily quota admit all
// of its new rows or none, and an account over its quota gets 429 whatever
// it sent.
//
// unreadable names, by index, the rows the HTTP layer could not read as an
// event (a key or a value that does not fit the event's form); each is
// refused in errors, and counts against the rate like any other row.
func (a *App) AppendBatch(ctx context.Context, p Principal, clientMachine *string, rows []api.EventInput, unreadable map[int]domain.FieldError) (api.BatchResponse, error) {
	if err := checkBatchSize(len(rows)); err != nil {
		return api.BatchResponse{}, err
	}
	res := api.BatchResponse{ClientMachine: clientMachine, Errors: []api.BatchRowError{}}
	inputs := make([]*api.EventInput, len(rows))
	for i := range rows {
		if fe, bad := unreadable[i]; bad {
			res.Errors = append(res.Errors, api.BatchRowError{Index: i, Code: domain.CodeValidation, Field: fe.Field, Message: fe.Message})
			continue
		}
		if rowErr := checkBatchRowShape(i, &rows[i]); rowErr != nil {
			res.Errors = append(res.Errors, *rowErr)
			continue
		}
		inputs[i] = &rows[i]
	}
	return a.appendBatch(ctx, p, res, inputs)
}

// checkBatchSize refuses a batch over the spec's limit (SPEC.md "Limits").
func checkBatchSize(n int) error {
	if n > domain.MaxBatchEvents {
		return (&domain.Error{Code: domain.CodeBatchTooLarge,
			Detail: fmt.Sprintf("a batch holds at most %d events; this one holds %d and nothing was stored", domain.MaxBatchEvents, n)}).
			With("received", n).With("limit", domain.MaxBatchEvents)
	}
	return nil
}

// appendBatch stores the rows of inputs that parsed (nil: refused in res.Errors).
func (a *App) appendBatch(ctx context.Context, p Principal, res api.BatchResponse, inputs []*api.EventInput) (api.BatchResponse, error) {
	out, err := a.storeBatch(ctx, p, res, inputs)
	a.noteRefusal(ctx, p.UserID, err)
	return out, err
}

func (a *App) storeBatch(ctx context.Context, p Principal, res api.BatchResponse, inputs []*api.EventInput) (api.BatchResponse, error) {
	rowCount := len(inputs)
	now := a.now()
	// Canonical hashing (JCS) of every row happens here, before the writer
	// takes the batch: the single SQLite writer should only write.
	prepared := make([]store.Event, rowCount)
	prepareErrs := make([]error, rowCount)
	for i, in := range inputs {
		if in != nil {
			prepared[i], prepareErrs[i] = a.prepareEvent(p, in, "rest", now)
		}
	}
	var ids []string
	for _, in := range inputs {
		if in != nil {
			ids = append(ids, *in.EventID)
		}
	}

	err := a.w.Write(ctx, func(t *writer.Tx) error {
		r := res
		// The per-key rate (per session for a signed-in caller) counts
		// every row the call carries.
		tat, err := a.store.RateState(ctx, t.SQL(), p.Identity())
		if err != nil {
			return err
		}
		rate := domain.DecideBatchRate(time.UnixMicro(tat), now, rowCount, a.cfg.BatchRateLimit)
		if !rate.Allowed {
			return (&domain.Error{Code: domain.CodeRateLimited, RetryAfter: rate.RetryAfter,
				Detail: fmt.Sprintf("this key may send %d batch events per minute; retry in %d s", a.cfg.BatchRateLimit, rate.RetryAfter)}).
				With("rate", api.Rate{Count: rate.Count, Limit: a.cfg.BatchRateLimit, Remaining: rate.Remaining})
		}
		if err := a.store.SetRateState(ctx, t.SQL(), p.Identity(), rate.NewTAT.UnixMicro()); err != nil {
			return err
		}
		r.Rate = api.Rate{Count: rate.Count, Limit: a.cfg.BatchRateLimit, Remaining: rate.Remaining}

		head, err := t.Lock(ctx, p.UserID)
		if err != nil {
			return err
		}
		// Every stored sequence is at or below the tip's, so a batch whose
		// rows are all above it (the common case; a retried or imported one
		// is not) is stored without looking anything up first: the insert's
		// own unique key finds any id stored anyway, and then the rows are
		// placed again after the lookup, which is writer time every batch
		// would pay (docs/performance.md, "Fourth round of 2026-11-22").
		below := belowTip(inputs, head)
		if len(below) == 0 {
			var out api.BatchResponse
			err := t.Savepoint(ctx, func() error {
				var err error
				out, err = a.storeBatchRows(ctx, t, p, r, inputs, prepared, prepareErrs, nil, now)
				return err
			})
			if !errors.Is(err, errBatchNeedsLookup) {
				if err == nil {
					res = out
				}
				return err
			}
		}
		// Every id the batch carries, and every sequence at or below the
		// tip, looked up at once under the head lock: no other write to the
		// account can store one meanwhile.
		var found stored
		if found.ids, err = a.store.EventsByIDs(ctx, t.SQL(), p.UserID, ids); err != nil {
			return err
		}
		if found.sequences, err = a.store.EventIDsAt(ctx, t.SQL(), p.UserID, below); err != nil {
			return err
		}
		out, err := a.storeBatchRows(ctx, t, p, r, inputs, prepared, prepareErrs, &found, now)
		if err != nil {
			return err
		}
		res = out
		return nil
	})
	if err != nil {
		return api.BatchResponse{}, err
	}
	return res, nil
}

// errBatchNeedsLookup: in a batch placed without looking its ids up, a row's
// event_id turned out to be stored already, or the daily quota refused the
// rows, some of which may be stored already (found by a reviewer: a batch
// that fit the quota was refused for rows that were not new).
var errBatchNeedsLookup = errors.New("the batch needs its ids looked up")

// belowTip lists the rows' sequences at or below the tip: only those can be
// stored already (a resent batch, or history imported below the tip).
func belowTip(inputs []*api.EventInput, head store.Head) []int64 {
	var out []int64
	for _, in := range inputs {
		if in != nil && !head.Empty() && *in.Sequence <= head.LastSequence {
			out = append(out, *in.Sequence)
		}
	}
	return out
}

// stored is what a batch's lookup found: its rows' ids stored already, and
// which event_id holds each of its sequences at or below the tip.
type stored struct {
	ids       map[string]store.Event
	sequences map[int64]string
}

// storeBatchRows decides each row of the batch against what is stored and
// stores those that pass, in sequence order, under the head lock, adding the
// outcome to r. found is what the lookup found; nil means nothing was looked
// up (every row is above the tip), and a stored id (or a quota refusal, which
// may count stored rows) then ends the attempt with errBatchNeedsLookup.
func (a *App) storeBatchRows(ctx context.Context, t *writer.Tx, p Principal, r api.BatchResponse, inputs []*api.EventInput,
	prepared []store.Event, prepareErrs []error, found *stored, now time.Time) (api.BatchResponse, error) {
	r.Errors = slices.Clone(r.Errors)
	var rows []store.Event
	ids := map[string]int{}
	sequences := map[int64]int{}
	for i, in := range inputs {
		if in == nil {
			continue
		}
		refuse := func(code, field, message string) {
			r.Errors = append(r.Errors, api.BatchRowError{Index: i, EventID: in.EventID, Code: code, Field: field, Message: message})
		}
		if first, dup := ids[*in.EventID]; dup {
			refuse("duplicate_in_batch", "", fmt.Sprintf("event_id also at index %d of this batch", first))
			continue
		}
		ids[*in.EventID] = i
		if found != nil {
			if prev, ok := found.ids[*in.EventID]; ok {
				if sameEvent(&prev, in) {
					r.Skipped++
				} else {
					refuse(domain.CodeEventIDConflict, "", "event_id is already stored with different content")
				}
				continue
			}
		}
		if err := prepareErrs[i]; err != nil {
			var de *domain.Error
			if errors.As(err, &de) {
				refuse(de.Code, "", de.Detail)
				continue
			}
			return r, err
		}
		e := prepared[i]
		if in.PayloadHash != nil && *in.PayloadHash != e.PayloadHash {
			refuse("payload_hash_mismatch", "payload_hash", "payload_hash does not match the canonical hash of the row: "+e.PayloadHash)
			continue
		}
		if owner, ok := found.owner(e.Sequence); ok {
			refuse(CodeSequenceTaken, "sequence", fmt.Sprintf("sequence %d is already stored as event %s", e.Sequence, owner))
			continue
		}
		if first, dup := sequences[e.Sequence]; dup {
			refuse(CodeSequenceTaken, "sequence", fmt.Sprintf("sequence %d is also at index %d of this batch", e.Sequence, first))
			continue
		}
		sequences[e.Sequence] = i
		rows = append(rows, e)
	}
	// Stored in sequence order: rows above the tip then extend it in order,
	// and only rows below it are out of sequence order in the tree.
	slices.SortStableFunc(rows, func(x, y store.Event) int { return cmp.Compare(x.Sequence, y.Sequence) })
	out, err := t.AppendRun(ctx, p.UserID, rows, *a.quotaOf(now))
	var over *writer.QuotaExceeded
	switch {
	case errors.As(err, &over) && found == nil:
		// Rows counted as new may be stored already: let the lookup
		// decide the count before refusing.
		return r, errBatchNeedsLookup
	case errors.As(err, &over):
		return r, a.quotaExceeded(over.Used)
	case errors.Is(err, store.ErrConflict) && found == nil:
		return r, errBatchNeedsLookup
	case err != nil:
		return r, err
	}
	r.Ingested, r.Quota = len(rows), a.quota(out.QuotaUsed)
	t.AfterCommit(func() { metrics.EventsAppended.Add(uint64(len(rows)), metrics.AppendBatch) })
	return r, nil
}

// CodeSequenceTaken refuses a batch row whose sequence the account already
// stores under another event_id, or an earlier row of the batch carries
// (CONTRACT.md "Batch").
const CodeSequenceTaken = "sequence_taken"

// owner is the event_id stored at seq, if found holds it.
func (f *stored) owner(seq int64) (string, bool) {
	if f == nil {
		return "", false
	}
	id, ok := f.sequences[seq]
	return id, ok
}

// checkBatchRowShape is the row's first shape problem, if any.
func checkBatchRowShape(i int, in *api.EventInput) *api.BatchRowError {
	if errs := domain.ValidateBatchRowShape(in); len(errs) > 0 {
		return &api.BatchRowError{Index: i, EventID: in.EventID, Code: domain.CodeValidation, Field: errs[0].Field, Message: errs[0].Message}
	}
	return nil
}
