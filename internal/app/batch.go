package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
)

// BatchRowError reports one refused row of a batch.
type BatchRowError struct {
	Index   int     `json:"index"`
	EventID *string `json:"event_id"`
	Code    string  `json:"code"`
	Field   string  `json:"field,omitempty"`
	Message string  `json:"message"`
}

// Rate is the per-key batch rate as responses show it.
type Rate struct {
	Count     int `json:"count"`
	Limit     int `json:"limit"`
	Remaining int `json:"remaining"`
}

// BatchResult is the outcome of POST /v1/events/batch.
type BatchResult struct {
	ClientMachine *string         `json:"client_machine"`
	Ingested      int             `json:"ingested"`
	Skipped       int             `json:"skipped"`
	Errors        []BatchRowError `json:"errors"`
	Quota         Quota           `json:"quota"`
	Rate          Rate            `json:"rate"`
}

// AppendBatch ingests up to 500 rows (SPEC.md "POST /v1/events/batch"). Rows are
// checked for shape only; continuity and signatures are not checked, but each
// row's payload_hash is computed and rows are stored in chain order: a row whose
// sequence is not above the account's tip is refused (code
// non_monotonic_sequence), so the Merkle tree stays append-only. Inserts are
// idempotent on event_id: a row already stored with identical content is
// skipped, with other content refused (event_id_conflict). The whole batch is
// one transaction: the rate limit and the daily quota admit all of its new rows
// or none.
func (a *App) AppendBatch(ctx context.Context, p Principal, clientMachine *string, rows []json.RawMessage) (BatchResult, error) {
	if len(rows) > domain.MaxBatchEvents {
		return BatchResult{}, (&domain.Error{Status: http.StatusRequestEntityTooLarge, Code: domain.CodeBatchTooLarge,
			Detail: fmt.Sprintf("a batch holds at most %d events; this one holds %d and nothing was stored", domain.MaxBatchEvents, len(rows))}).
			With("received", len(rows)).With("limit", domain.MaxBatchEvents)
	}
	res := BatchResult{ClientMachine: clientMachine, Errors: []BatchRowError{}}
	inputs := make([]*domain.EventInput, len(rows))
	for i, row := range rows {
		in, rowErr := parseBatchRow(i, row)
		if rowErr != nil {
			res.Errors = append(res.Errors, *rowErr)
			continue
		}
		inputs[i] = in
	}

	now := a.Now()
	// Canonical hashing (JCS) of every row happens here, before the writer
	// takes the batch: the single SQLite writer should only write.
	prepared := make([]store.Event, len(rows))
	prepareErrs := make([]error, len(rows))
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

	var stored []store.Event
	err := a.write(ctx, func(t *txn) error {
		r := res
		r.Errors = append(make([]BatchRowError, 0, len(res.Errors)), res.Errors...)
		stored = stored[:0]
		// The per-key rate counts every row the call carries.
		tat, err := a.Store.RateState(ctx, t.tx, p.KeyID)
		if err != nil {
			return err
		}
		rate := domain.DecideBatchRate(time.UnixMicro(tat), now, len(rows), a.Cfg.BatchRateLimit)
		if !rate.Allowed {
			return (&domain.Error{Status: http.StatusTooManyRequests, Code: domain.CodeRateLimited, RetryAfter: rate.RetryAfter,
				Detail: fmt.Sprintf("this key may send %d batch events per minute; retry in %d s", a.Cfg.BatchRateLimit, rate.RetryAfter)}).
				With("rate", Rate{Count: rate.Count, Limit: a.Cfg.BatchRateLimit, Remaining: rate.Remaining})
		}
		if err := a.Store.SetRateState(ctx, t.tx, p.KeyID, rate.NewTAT.UnixMicro()); err != nil {
			return err
		}
		r.Rate = Rate{Count: rate.Count, Limit: a.Cfg.BatchRateLimit, Remaining: rate.Remaining}

		head, err := a.Store.LockHead(ctx, t.tx, p.UserID)
		if err != nil {
			return err
		}
		// Every id the batch carries, looked up at once under the head lock:
		// no other append to the account can store one meanwhile.
		already, err := a.Store.EventsByIDs(ctx, t.tx, p.UserID, ids)
		if err != nil {
			return err
		}
		seen := map[string]int{}
		for i, in := range inputs {
			if in == nil {
				continue
			}
			if first, dup := seen[*in.EventID]; dup {
				r.Errors = append(r.Errors, BatchRowError{Index: i, EventID: in.EventID, Code: "duplicate_in_batch",
					Message: fmt.Sprintf("event_id also at index %d of this batch", first)})
				continue
			}
			seen[*in.EventID] = i
			if prev, ok := already[*in.EventID]; ok {
				if sameEvent(&prev, in) {
					r.Skipped++
				} else {
					r.Errors = append(r.Errors, BatchRowError{Index: i, EventID: in.EventID, Code: domain.CodeEventIDConflict,
						Message: "event_id is already stored with different content"})
				}
				continue
			}
			if *in.Sequence <= head.LastSequence {
				r.Errors = append(r.Errors, BatchRowError{Index: i, EventID: in.EventID, Code: domain.CodeNonMonotonic, Field: "sequence",
					Message: fmt.Sprintf("sequence must be above the account's last stored sequence %d", head.LastSequence)})
				continue
			}
			if err := prepareErrs[i]; err != nil {
				var de *domain.Error
				if errors.As(err, &de) {
					r.Errors = append(r.Errors, BatchRowError{Index: i, EventID: in.EventID, Code: de.Code, Message: de.Detail})
					continue
				}
				return err
			}
			e := prepared[i]
			if in.PayloadHash != nil && *in.PayloadHash != e.PayloadHash {
				r.Errors = append(r.Errors, BatchRowError{Index: i, EventID: in.EventID, Code: "payload_hash_mismatch", Field: "payload_hash",
					Message: "payload_hash does not match the canonical hash of the row: " + e.PayloadHash})
				continue
			}
			e.LeafIndex = head.EventCount // rows extend the chain in order: leaf = chain position
			head.LastSequence, head.LastHash, head.EventCount = e.Sequence, &e.PayloadHash, head.EventCount+1
			stored = append(stored, e)
		}
		used, ok, err := a.Store.ConsumeQuota(ctx, t.tx, p.UserID, domain.QuotaDay(now), int64(len(stored)), int64(a.Cfg.DailyEventQuota))
		if err != nil {
			return err
		}
		if !ok {
			return a.quotaExceeded(used)
		}
		// machine_sequence counts each machine's stored events: read the
		// counters of the batch's machines once, number the rows, store once.
		var machines []string
		for i := range stored {
			machines = append(machines, machineOf(&stored[i]))
		}
		slices.Sort(machines)
		machines = slices.Compact(machines)
		counts, err := a.Store.MachineSequences(ctx, t.tx, p.UserID, machines)
		if err != nil {
			return err
		}
		for i := range stored {
			m := machineOf(&stored[i])
			stored[i].MachineSequence = counts[m]
			counts[m]++
		}
		if err := a.Store.InsertEvents(ctx, t.tx, stored); err != nil {
			return err
		}
		if err := a.Store.SetMachineSequences(ctx, t.tx, p.UserID, counts); err != nil {
			return err
		}
		for i := range stored {
			if err := a.publish(ctx, t, &stored[i]); err != nil {
				return err
			}
		}
		r.Ingested, r.Quota = len(stored), a.quota(used)
		res = r
		return nil
	})
	if err != nil {
		return BatchResult{}, err
	}
	return res, nil
}

// parseBatchRow decodes one row and checks its shape.
func parseBatchRow(i int, row json.RawMessage) (*domain.EventInput, *BatchRowError) {
	var in domain.EventInput
	dec := json.NewDecoder(bytes.NewReader(row))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var te *json.UnmarshalTypeError
		msg := "must be an event object"
		field := ""
		if errors.As(err, &te) && te.Field != "" {
			field, msg = te.Field, "wrong type"
		} else if s := err.Error(); len(s) > 20 && s[:20] == "json: unknown field " {
			field, msg = s[21:len(s)-1], "unknown field"
		}
		return nil, &BatchRowError{Index: i, Code: domain.CodeValidation, Field: field, Message: msg}
	}
	if errs := domain.ValidateEventShape(&in); len(errs) > 0 {
		return nil, &BatchRowError{Index: i, EventID: in.EventID, Code: domain.CodeValidation, Field: errs[0].Field, Message: errs[0].Message}
	}
	return &in, nil
}

// machineOf is the machine counter an event counts on ("" without machine_id).
func machineOf(e *store.Event) string {
	if e.MachineID == nil {
		return ""
	}
	return *e.MachineID
}
