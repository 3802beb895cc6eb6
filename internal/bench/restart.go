package bench

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// runRestart measures how long a restarted server takes to be useful on a
// database of --prefill events (docs/performance.md: 5M events ready in
// ≤2 s). After the prefill it stops the server (SIGTERM) --restarts times and
// starts it again; each restart is one operation, its latency the time from
// starting the process to the first append accepted on the prefilled account
// (GET /v1/chain/tip, then POST /v1/events at the tip). extra holds the
// medians of the earlier steps: the "listening" line and the first 200 from
// GET /v1/health.
func runRestart(ctx context.Context, e *env, res Result) (Result, error) {
	if e.srv == nil {
		return res, errors.New("restart starts and stops the server itself: it cannot be used with --url")
	}
	if err := prefill(ctx, e, 0, e.prefill, false); err != nil {
		return res, err
	}
	events := int64(e.prefill)
	n := max(e.o.Restarts, 1)
	res.Mode = "closed"
	var listen, health, first Histogram
	pool := newRawPool(nil)
	key := e.accounts[0].key
	w := &worker{id: 0, e: e, errs: map[string]int64{}}
	s := &chainState{accts: []int{0}, tips: []tip{{seq: -1}}}
	t0 := time.Now()
	for i := range n {
		if err := e.srv.stop(); err != nil {
			return res, fmt.Errorf("stop server: %w", err)
		}
		e.srv = nil
		start := time.Now()
		srv, err := startServer(ctx, e.o.Exe, e.o.ServerWrap, e.db, e.o.ServerArgs, filepath.Join(e.logDir, fmt.Sprintf("bench-server-restart%d.log", i)))
		if err != nil {
			return res, err
		}
		e.srv, e.serverPID = srv, srv.pid
		tl := time.Since(start)
		listen.Record(tl)
		c := newClient(srv.url, 1)
		w.c = c
		var buf bytes.Buffer
		for {
			if _, err := c.do(ctx, "GET", "/v1/health", "", nil, &buf); err == nil {
				break
			}
			if time.Since(start) > time.Minute {
				c.close()
				return res, errors.New("restart: /v1/health did not answer 200 within a minute")
			}
			time.Sleep(time.Millisecond)
		}
		th := time.Since(start)
		health.Record(th)
		err = readTip(ctx, w, key, &s.tips[0], &buf)
		if err == nil {
			s.tips[0].n = int64(i)
			err = appendOne(ctx, w, s, 0, &s.tips[0], pool, "")
		}
		c.close()
		if err != nil {
			w.countErr(err)
			continue
		}
		tf := time.Since(start)
		first.Record(tf)
		res.Ops++
		fmt.Fprintf(e.progress, "bench: restart %d/%d: listening %.1f ms, health %.1f ms, first append %.1f ms\n",
			i+1, n, tl.Seconds()*1e3, th.Seconds()*1e3, tf.Seconds()*1e3)
	}
	res.Seconds = time.Since(t0).Seconds()
	res.OpsPerSec = float64(res.Ops) / res.Seconds
	res.Latency = latencyOf(&first)
	if len(w.errs) > 0 {
		res.Errors = w.errs
	}
	res.Extra = map[string]float64{"restarts": float64(n), "events_on_account": float64(events),
		"listening_p50_ms": latencyOf(&listen).P50, "health_p50_ms": latencyOf(&health).P50, "health_max_ms": latencyOf(&health).Max}
	if s, err := sampleProc(e.serverPID); err == nil {
		res.Server = &ServerStats{PeakRSSMB: float64(s.hwmKB) / 1024, RSSMB: float64(s.rssKB) / 1024}
	}
	return res, nil
}

// longestChain returns the account of db with the most events, with a new
// key, and its event count (0 when db holds no event).
func longestChain(ctx context.Context, db string) (account, int64, error) {
	st, err := store.Open(ctx, db)
	if err != nil {
		return account{}, 0, err
	}
	defer st.Close()
	var a account
	var n int64
	err = st.DB().QueryRowContext(ctx, `SELECT user_id, event_count FROM chain_heads ORDER BY event_count DESC LIMIT 1`).Scan(&a.userID, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return a, 0, nil
	}
	if err != nil {
		return a, 0, err
	}
	ap := app.New(app.Deps{Store: st, Config: provisionConfig()})
	defer ap.Close()
	k, err := ap.CreateKey(ctx, a.userID, api.CreateKeyRequest{Label: new("bench-restart")})
	if err != nil {
		return a, 0, err
	}
	a.keyID, a.key = k.ID, k.APIKey
	return a, n, nil
}
