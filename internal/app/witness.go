package app

// The witness job (docs/integrity.md "Witnesses"): on the scheduler, never
// on the append path, each account's newest sealed block is submitted to
// every configured witness (serve --witness) as C2SP tlog-witness states it,
// with the consistency proof from the size that witness holds; the
// cosignature it answers is stored beside the block. A witness that is down
// or refuses is retried on later runs with a growing gap; appends never wait
// for it.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/metrics"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/witnessclient"
	"github.com/auditchain/auditchain/pkg/verify"
)

// JobWitness is the witness job's name (GET /v1/internal/jobs).
const JobWitness = "witness"

// WitnessCadence is how often the job runs: a cosigned checkpoint per
// account per minute at most.
const WitnessCadence = time.Minute

// Tuning of the witness job.
const (
	// witnessAccountsAtOnce is how many accounts' submissions are in flight
	// at once (each to every witness in parallel).
	witnessAccountsAtOnce = 16
	// witnessMaxBackoff caps the gap between attempts on a failing witness.
	witnessMaxBackoff = time.Hour
	// witnessConflictRetries bounds the 409 round trips of one submission.
	witnessConflictRetries = 3
)

// Outcomes of one submission: the label of metrics.WitnessSubmissions.
const (
	WitnessCosigned = "cosigned" // the witness cosigned the newest block
	WitnessRefused  = "refused"  // it answered 4xx or 5xx (422: inconsistent, a fork)
	WitnessAhead    = "ahead"    // it holds a larger size than our newest block (rollback or fork)
	WitnessError    = "error"    // no answer: connection, timeout, an answer that does not verify
)

// witnessSet is the configured witnesses, each with its client.
type witnessSet struct {
	clients []*witnessclient.Client
	quorum  int
	// lags caches the lag figures for metrics scrapes.
	mu       sync.Mutex
	lags     map[string]store.WitnessLag
	lagsRead time.Time
}

// newWitnessSet builds the clients of the configured witnesses. hc is the
// witnesses' HTTP client: operator-trusted URLs, so not the webhooks'
// SSRF-safe egress (witnessclient's package comment).
func newWitnessSet(ws []config.Witness, quorum int, hc *http.Client) (*witnessSet, error) {
	if hc == nil {
		hc = &http.Client{Timeout: witnessclient.Timeout}
	}
	set := &witnessSet{quorum: quorum}
	for _, w := range ws {
		v, err := verify.NewWitness(w.VKey)
		if err != nil {
			return nil, fmt.Errorf("--witness %s: %w", w.URL, err)
		}
		set.clients = append(set.clients, &witnessclient.Client{URL: w.URL, Witness: v, HTTP: hc})
	}
	return set, nil
}

// Witnesses returns the configured witnesses (verifiers by name) and the quorum.
func (a *App) Witnesses() ([]verify.Witness, int) {
	if a.witnesses == nil {
		return nil, 0
	}
	out := make([]verify.Witness, len(a.witnesses.clients))
	for i, c := range a.witnesses.clients {
		out[i] = c.Witness
	}
	return out, a.witnesses.quorum
}

// WitnessRun is what one run of the witness job did.
type WitnessRun struct {
	Accounts  int // accounts with a sealed block, visited
	Submitted int // submissions sent (409 round trips counted once)
	Cosigned  int
	Failed    int
}

// WitnessSweep runs the witness job once over every account, in id order.
// An account claimed by another replica's run is skipped (writer.Claim).
func (a *App) WitnessSweep(ctx context.Context) (WitnessRun, error) {
	var res WitnessRun
	if a.witnesses == nil || len(a.witnesses.clients) == 0 {
		return res, nil
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, witnessAccountsAtOnce)
	var firstErr error
	after := ""
	for ctx.Err() == nil {
		ids, err := a.store.AccountIDs(ctx, after, anchorPage)
		if err != nil {
			firstErr = err
			break
		}
		for _, id := range ids {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				r, err := a.witnessAccount(ctx, id)
				mu.Lock()
				defer mu.Unlock()
				res.Accounts += r.Accounts
				res.Submitted += r.Submitted
				res.Cosigned += r.Cosigned
				res.Failed += r.Failed
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("witness %s: %w", id, err)
				}
			})
		}
		if len(ids) < anchorPage {
			break
		}
		after = ids[len(ids)-1]
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return res, firstErr
}

// submission is one witness's part of an account's run.
type submission struct {
	client *witnessclient.Client
	state  store.WitnessState
	// set by the work: the cosignature line (empty: none), the size the
	// witness holds, the failure.
	line        string
	witnessSize int64
	outcome     string
	err         error
}

// witnessAccount submits the account's newest block to each witness that
// has not cosigned it and is due (its backoff passed), and records the
// outcomes; the lag figures (log_size) of the others are brought up to date.
func (a *App) witnessAccount(ctx context.Context, userID string) (WitnessRun, error) {
	var res WitnessRun
	block, err := a.store.LastBlock(ctx, nil, userID)
	if errors.Is(err, store.ErrNotFound) {
		return res, nil
	}
	if err != nil {
		return res, err
	}
	res.Accounts = 1
	now := a.now()
	// A read first: most accounts, most runs, have nothing to do, and the
	// claim is a write.
	states, err := a.store.WitnessStates(ctx, nil, userID)
	if err != nil {
		return res, err
	}
	if !a.witnessWork(states, block, now) {
		return res, nil
	}
	var subs []*submission
	claim := func(t *writer.Tx) (bool, error) {
		states, err := a.store.WitnessStates(ctx, t.SQL(), userID)
		if err != nil {
			return false, err
		}
		subs = subs[:0]
		for _, c := range a.witnesses.clients {
			st, ok := states[c.Witness.Name]
			if !ok {
				st = store.WitnessState{UserID: userID, Witness: c.Witness.Name}
			}
			subs = append(subs, &submission{client: c, state: st, witnessSize: st.WitnessSize})
		}
		return a.witnessWork(states, block, now), nil
	}
	work := func() {
		var wg sync.WaitGroup
		for _, s := range subs {
			if !witnessDue(s.state, block, now) {
				continue
			}
			wg.Go(func() { a.submit(ctx, userID, block, s) })
		}
		wg.Wait()
	}
	settle := func(t *writer.Tx) error {
		at := a.now()
		for _, s := range subs {
			st := s.state
			st.LogSize, st.UpdatedAt = int64(block.Size), at.UnixMicro()
			switch {
			case s.outcome == "": // not due: only the lag figure moves
			case s.outcome == WitnessCosigned:
				st.WitnessSize, st.CosignedSize, st.CosignedRoot = int64(block.Size), int64(block.Size), block.Root[:]
				st.CosignedBlock = &block.Index
				st.Failures, st.NextAttemptAt, st.LastError = 0, 0, nil
				if err := a.store.InsertCosignature(ctx, t.SQL(), userID, block.Index,
					store.Cosignature{Witness: s.client.Witness.Name, Signature: s.line}, at.UnixMicro()); err != nil {
					return err
				}
			default:
				st.WitnessSize = s.witnessSize
				st.Failures++
				st.NextAttemptAt = at.Add(witnessBackoff(st.Failures)).UnixMicro()
				msg := s.err.Error()
				st.LastError = &msg
			}
			if err := a.store.SaveWitnessState(ctx, t.SQL(), st); err != nil {
				return err
			}
		}
		return nil
	}
	if err := a.w.Claim(ctx, "witness/"+userID, claim, work, settle); err != nil {
		return res, err
	}
	for _, s := range subs {
		if s.outcome == "" {
			continue
		}
		res.Submitted++
		metrics.WitnessSubmissions.Inc(s.client.Witness.Name, s.outcome)
		if s.outcome == WitnessCosigned {
			res.Cosigned++
			continue
		}
		res.Failed++
		level := a.log.Warn
		if s.outcome == WitnessAhead || isInconsistent(s.err) {
			level = a.log.Error // what a witness is for: a fork or a rollback
		}
		level("witness did not cosign", "witness", s.client.Witness.Name, "user_id", userID, "block", block.Index,
			"tree_size", block.Size, "outcome", s.outcome, "err", s.err)
	}
	return res, nil
}

// witnessWork reports whether an account's run has anything to do: a due
// witness that has not cosigned the newest block, or a lag figure to update.
func (a *App) witnessWork(states map[string]store.WitnessState, block store.BlockRow, now time.Time) bool {
	for _, c := range a.witnesses.clients {
		st, ok := states[c.Witness.Name]
		if !ok || st.LogSize != int64(block.Size) || witnessDue(st, block, now) {
			return true
		}
	}
	return false
}

// witnessDue reports whether the witness of st should get block now: it has
// not cosigned it, its backoff has passed, and it does not hold a larger
// size than the block (then only a newer block can be submitted).
func witnessDue(st store.WitnessState, block store.BlockRow, now time.Time) bool {
	return st.CosignedSize < int64(block.Size) && st.NextAttemptAt <= now.UnixMicro() && st.WitnessSize <= int64(block.Size)
}

// witnessBackoff is the gap before the next attempt after n failures in a
// row: the next run, then runs skipped in doubling numbers, up to an hour.
// Half a cadence less than whole periods, so a run on time is never missed.
func witnessBackoff(n int) time.Duration {
	if n < 1 {
		return 0
	}
	d := WitnessCadence
	for i := 1; i < n && d < witnessMaxBackoff; i++ {
		d *= 2
	}
	return min(d, witnessMaxBackoff) - WitnessCadence/2
}

// submit sends block to s's witness with the consistency proof from the
// size it holds; on a 409 it learns the witness's size and sends again with
// the proof from that size (a witness that cosigned through another
// replica's run, or lost state). A witness holding more than the block
// cannot be given it: outcome ahead.
func (a *App) submit(ctx context.Context, userID string, block store.BlockRow, s *submission) {
	old := s.state.WitnessSize
	for range witnessConflictRetries {
		s.witnessSize = old
		if old > int64(block.Size) {
			s.outcome = WitnessAhead
			s.err = fmt.Errorf("the witness holds size %d of this log, beyond its newest block (size %d): the log was rolled back, or forked", old, block.Size)
			return
		}
		proof, err := merkle.ConsistencyProof(old, int64(block.Size), a.store.HashReader(ctx, nil, userID))
		if err != nil {
			s.outcome, s.err = WitnessError, fmt.Errorf("consistency proof %d→%d: %w", old, block.Size, err)
			return
		}
		line, err := s.client.AddCheckpoint(ctx, uint64(old), proof, block.Note)
		var conflict *witnessclient.ConflictError
		var refused *witnessclient.RefusedError
		switch {
		case err == nil:
			s.line, s.outcome, s.err = line, WitnessCosigned, nil
			return
		case errors.As(err, &conflict) && int64(conflict.Size) == old:
			// The witness holds the size we sent as old, so the 409 is
			// the spec's answer to another root at an equal size (the
			// checkpoint's, when old is its size): a fork.
			s.outcome, s.err = WitnessRefused, fmt.Errorf("%w: %v", errWitnessRoot, err)
			return
		case errors.As(err, &conflict):
			old = int64(conflict.Size)
			s.outcome, s.err = WitnessRefused, err
			continue
		case errors.As(err, &refused):
			s.outcome, s.err = WitnessRefused, err
		default:
			s.outcome, s.err = WitnessError, err
		}
		return
	}
	s.witnessSize = old
}

// errWitnessRoot is a 409 naming the very size submitted as old: C2SP
// tlog-witness answers so when the checkpoint's root differs from the one
// the witness cosigned at that size.
var errWitnessRoot = errors.New("the witness cosigned another root at this size: the log forked")

// isInconsistent reports a witness's refusal of a checkpoint inconsistent
// with what it cosigned before: a 422 (the proof or the root does not
// hold), or a 409 at the size sent (errWitnessRoot).
func isInconsistent(err error) bool {
	var refused *witnessclient.RefusedError
	return errors.Is(err, errWitnessRoot) || errors.As(err, &refused) && refused.Status == http.StatusUnprocessableEntity
}

// WitnessLag is one witness's lag over every account (store.WitnessLag).
type WitnessLag = store.WitnessLag

// WitnessLags returns each configured witness's lag, by name: over every
// account, the newest block's size (as the job last saw it) minus the size
// the witness last cosigned, summed, and the accounts it is behind on.
// Read from the store at most every 10 s (metrics scrapes).
func (a *App) WitnessLags(ctx context.Context) (map[string]WitnessLag, error) {
	set := a.witnesses
	if set == nil || len(set.clients) == 0 {
		return nil, nil
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.lags != nil && a.now().Sub(set.lagsRead) < 10*time.Second {
		return set.lags, nil
	}
	all, err := a.store.WitnessLags(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.WitnessLag, len(set.clients))
	for _, c := range set.clients {
		out[c.Witness.Name] = all[c.Witness.Name]
	}
	set.lags, set.lagsRead = out, a.now()
	return out, nil
}
