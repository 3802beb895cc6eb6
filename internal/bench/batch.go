package bench

// Batches of linked events (POST /v1/events/batch): the batch workload, and
// the prefill of every workload that needs a long chain.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"
)

// batchTS is the ts of batch rows: sent, so the client knows the payload hash
// and can link the chain without asking the server.
func batchTS() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000+00:00") }

// batcher builds linked batches for one client.
type batcher struct {
	e       *env
	pool    *rawPool
	machine string
	ts      string
	size    int
}

// appendBatch sends size linked events to account a from tip t.
func (b *batcher) appendBatch(ctx context.Context, w *worker, s *chainState, a int, t *tip) error {
	e := b.e
	seq := t.seq
	s.hbuf = append(s.hbuf[:0], t.hash...)
	hash := s.hbuf
	if t.hash == nil {
		hash = nil
	}
	n := t.n
	w.body = append(w.body[:0], `{"events":[`...)
	for k := range b.size {
		if k > 0 {
			w.body = append(w.body, ',')
		}
		r := int((n + int64(w.id)*31) % rawPoolSize)
		s.id = appendEventID(s.id[:0], e.prefix, w.id, n)
		n++
		seq++
		spec := eventSpec{id: s.id, seq: seq, prevHash: hash, raw: b.pool.raws[r], tool: benchTools[seq%3],
			decision: benchDecisions[(seq/3)%3], machine: b.machine, ts: b.ts}
		if b.pool.sigs != nil {
			spec.sig = b.pool.sigs[r]
		}
		start := len(w.body)
		w.body = appendCanonical(w.body, &spec)
		hash = appendHashOf(s.hbuf[:0], w.body[start:])
		s.hbuf = hash
	}
	w.body = append(w.body, "]}"...)
	t.n = n
	if _, err := w.c.do(ctx, "POST", "/v1/events/batch", e.accounts[a].key, w.body, &w.resp); err != nil {
		if ab := notBuilt(err); ab != nil {
			return ab
		}
		_ = readTip(ctx, w, e.accounts[a].key, t, &s.sbuf)
		return err
	}
	var res struct {
		Ingested int               `json:"ingested"`
		Skipped  int               `json:"skipped"`
		Errors   []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(w.resp.Bytes(), &res); err != nil {
		return fmt.Errorf("batch answer: %w", err)
	}
	e.stored.Add(int64(res.Ingested))
	if res.Ingested != b.size || len(res.Errors) > 0 {
		if err := readTip(ctx, w, e.accounts[a].key, t, &s.sbuf); err != nil {
			return err
		}
		first := ""
		if len(res.Errors) > 0 {
			first = ": " + string(res.Errors[0])
		}
		return fmt.Errorf("batch rows refused (ingested %d of %d)%s", res.Ingested, b.size, first)
	}
	t.seq = seq
	t.hash = append(t.hash[:0], hash...)
	return nil
}

func batchSetup(ctx context.Context, e *env) (func(w *worker) opFunc, error) {
	b := &batcher{e: e, pool: newRawPool(nil), ts: batchTS(), size: e.o.BatchSize}
	return func(w *worker) opFunc {
		s := newChainState(e, w.id)
		return func(ctx context.Context, w *worker) (int, error) {
			a, t := s.pick()
			return b.size, b.appendBatch(ctx, w, s, a, t)
		}
	}, nil
}

// prefill appends n linked events to account a in batches, fast: the same
// route and rows as any client's batch, so the chain, its Merkle tree and
// its head are the ones the service builds. The prefilled first account is
// kept in --account-file when one is given.
func prefill(ctx context.Context, e *env, a, n int, signed bool) error {
	if a == 0 && e.prefilled {
		return nil // the saved account's chain (--account-file)
	}
	b := &batcher{e: e, ts: batchTS(), size: e.o.BatchSize}
	if signed {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		if err := registerMachineKeys(ctx, e, pub); err != nil {
			return err
		}
		b.pool, b.machine = newRawPool(priv), benchMachine
	} else {
		b.pool = newRawPool(nil)
	}
	w := &worker{id: 1 << 20, e: e, c: e.c, errs: map[string]int64{}}
	s := &chainState{accts: []int{a}, tips: []tip{{seq: -1}}}
	start := time.Now()
	last := start
	for done := 0; done < n; {
		b.size = min(e.o.BatchSize, n-done)
		if err := b.appendBatch(ctx, w, s, a, &s.tips[0]); err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
		done += b.size
		if a == 0 && (time.Since(last) > 5*time.Second || done == n) {
			last = time.Now()
			fmt.Fprintf(e.progress, "bench: prefilled %d/%d events (%.0f/s)\n", done, n, float64(done)/time.Since(start).Seconds())
		}
	}
	if a == 0 && n > 0 && e.o.AccountFile != "" {
		return saveAccount(e.o.AccountFile, e.accounts[0])
	}
	return nil
}

// fillOthers puts n events on every account but the first (--fill-others),
// prepParallel accounts at a time.
func fillOthers(ctx context.Context, e *env, n int) error {
	if n <= 0 || len(e.accounts) < 2 {
		return nil
	}
	return parallelPrep(ctx, e, "fill-others: accounts", len(e.accounts)-1, func(ctx context.Context, i int, _ *bytes.Buffer) error {
		return prefill(ctx, e, i+1, n, false)
	})
}
