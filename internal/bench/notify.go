package bench

// The workloads of notifications and webhooks (issue #20): revoke, whose
// transaction now also writes the grant.revoked notice's rows, and
// webhook-deliver, the cron drain of queued webhook rows to a receiver that
// runs inside the generator.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/auditchain/auditchain/internal/notify/webhook"
)

// CronSecret is the --cron-secret webhook-deliver gives the server it
// starts; a server given with --url must run with it (and
// --webhook-allow-private --scheduler=false) for that workload.
const CronSecret = "bench-cron-secret"

// webhookServerArgs are the serve flags webhook-deliver needs: loopback
// endpoints (the receiver is in the generator), the cron route, and no
// built-in scheduler, whose drain (kicked as soon as a row is queued) would
// deliver the rows during the setup instead of in the timed drains.
var webhookServerArgs = []string{"--webhook-allow-private", "--cron-secret", CronSecret, "--scheduler=false"}

// prepParallel is how many requests prepare a workload's state at once.
const prepParallel = 32

// parallelPrep runs do(i) for i in [0, n) on prepParallel goroutines, each
// with its own buffer, printing progress every 5 s; the first error stops it.
func parallelPrep(ctx context.Context, e *env, what string, n int, do func(ctx context.Context, i int, resp *bytes.Buffer) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		done  atomic.Int64
		first error
		once  sync.Once
		wg    sync.WaitGroup
	)
	start := time.Now()
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				d := done.Load()
				fmt.Fprintf(e.progress, "bench: %s %d/%d (%.0f/s)\n", what, d, n, float64(d)/time.Since(start).Seconds())
			case <-stop:
				return
			}
		}
	}()
	for range min(prepParallel, n) {
		wg.Go(func() {
			var resp bytes.Buffer
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(ctx, i, &resp); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	if first != nil {
		return first
	}
	fmt.Fprintf(e.progress, "bench: %s %d in %v (%.0f/s)\n", what, n, time.Since(start).Round(time.Millisecond),
		float64(n)/time.Since(start).Seconds())
	return nil
}

// runRevoke is loadRun over revokeSetup, reporting as prefill the grants
// prepared.
func runRevoke(ctx context.Context, e *env, res Result) (Result, error) {
	res, err := loadRun(revokeSetup)(ctx, e, res)
	res.Prefill = e.prefill
	return res, err
}

// revokeGrant is one prepared grant: its account and its revoke request.
type revokeGrant struct {
	acct int
	url  string
	body []byte
}

// revokeSetup creates the grants the run will revoke, one live grant per
// revoke, each for a sub-agent of its own (so the revoke's status read after
// the write reads one grant, however many the account holds), spread
// round-robin over the accounts. In an open loop they are rate × (warmup +
// duration) and a margin; in a closed loop --prefill (default 20,000), and a
// worker stops when they are spent (errDone).
func revokeSetup(ctx context.Context, e *env) (func(w *worker) opFunc, error) {
	n := e.prefill
	if e.rate > 0 {
		n = int(math.Ceil(e.rate*(e.o.Warmup+e.o.Duration).Seconds())) + e.clients + 64
	}
	if n <= 0 {
		return nil, errors.New("revoke spends one prepared grant per operation: give --prefill N (closed loop) or --rate R")
	}
	e.prefill = n // the report's prefill: the grants prepared
	expires := time.Now().UTC().Add(48 * time.Hour).Format(time.RFC3339)
	grants := make([]revokeGrant, n)
	revoked := []byte(`"outcome":"revoked"`)
	err := parallelPrep(ctx, e, "revoke: created grants", n, func(ctx context.Context, i int, resp *bytes.Buffer) error {
		a := i % len(e.accounts)
		sub := "rv-" + e.prefix + "-" + strconv.Itoa(i)
		gid, err := createGrant(ctx, e, e.accounts[a].key, sub, 1000, expires, resp)
		if err != nil {
			return err
		}
		grants[i] = revokeGrant{acct: a, url: "/v1/grants/" + gid + "/revoke", body: []byte(`{"subagent":"` + sub + `"}`)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var taken atomic.Int64
	var spent sync.Once
	return func(w *worker) opFunc {
		return func(ctx context.Context, w *worker) (int, error) {
			i := taken.Add(1) - 1
			if i >= int64(len(grants)) {
				if e.rate > 0 {
					return 0, errAbort{errors.New("revoke ran out of prepared grants")}
				}
				spent.Do(func() {
					fmt.Fprintf(e.progress, "bench: revoke: the %d prepared grants are spent: the run ends early\n", len(grants))
				})
				return 0, errDone
			}
			g := &grants[i]
			_, err := w.c.do(ctx, "POST", g.url, e.accounts[g.acct].key, g.body, &w.resp)
			if ab := notBuilt(err); ab != nil {
				return 0, ab
			}
			if err == nil && !bytes.Contains(w.resp.Bytes(), revoked) {
				err = fmt.Errorf("revoke answered without outcome revoked: %s", w.resp.String())
			}
			return 1, err
		}
	}, nil
}

// hookReceiver is webhook-deliver's receiver: an HTTP server in the
// generator that answers 204 to every request, counts them, checks each
// carries webhook-id, webhook-timestamp and a webhook-signature that the
// endpoint's secret verifies, and counts distinct webhook-ids (a second
// request with an id already seen is a duplicate: every answer is 2xx, so
// the server has no reason to retry).
type hookReceiver struct {
	srv *http.Server
	url string

	drainStart atomic.Int64 // unix ns the current drain was called

	mu       sync.Mutex
	secrets  map[string]string // path → the endpoint's secret
	seen     map[string]struct{}
	hist     Histogram // from the drain's call to the request's arrival
	requests int64
	dups     int64
	badSig   int64
	noHeader int64
	wrongURL int64
}

func startReceiver(want int) (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &hookReceiver{url: "http://" + ln.Addr().String(), secrets: map[string]string{}, seen: make(map[string]struct{}, want)}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	at := time.Now()
	id := req.Header.Get("Webhook-Id")
	sig := req.Header.Get("Webhook-Signature")
	ts, tsErr := strconv.ParseInt(req.Header.Get("Webhook-Timestamp"), 10, 64)
	r.mu.Lock()
	secret, known := r.secrets[req.URL.Path]
	r.mu.Unlock()
	good := false
	if id != "" && sig != "" && tsErr == nil && known {
		if want, err := webhook.Sign(secret, id, time.Unix(ts, 0), body); err == nil {
			for s := range strings.FieldsSeq(sig) {
				good = good || s == want
			}
		}
	}
	r.mu.Lock()
	r.requests++
	switch {
	case !known:
		r.wrongURL++
	case id == "" || sig == "" || tsErr != nil:
		r.noHeader++
	case !good:
		r.badSig++
	}
	if id != "" {
		if _, dup := r.seen[id]; dup {
			r.dups++
		} else {
			r.seen[id] = struct{}{}
		}
	}
	if s := r.drainStart.Load(); s > 0 {
		r.hist.Record(at.Sub(time.Unix(0, s)))
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *hookReceiver) count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

func (r *hookReceiver) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// drainResult is the cron route's answer.
type drainResult struct {
	Webhooks sendCounts `json:"webhooks"`
}

// sendCounts is what one drain reports.
type sendCounts struct {
	Drained int `json:"drained"`
	Sent    int `json:"sent"`
	Failed  int `json:"failed"`
}

// maxDrains bounds the cron calls of one run.
const maxDrains = 1000

// runWebhookDeliver: K accounts (--accounts, default 20) each register an
// endpoint at the receiver subscribed to grant.revoked; --prefill rows
// (default 20,000) are queued round-robin over them by POST
// /v1/notifications/test (setup, not measured); then the cron route
// POST /v1/internal/cron/webhooks is called until the receiver has every row
// or a drain drains nothing. An operation is one delivery received; the
// window is from the first drain's call to the last one's answer; latency is
// from the call of the drain that sent a row to its arrival.
func runWebhookDeliver(ctx context.Context, e *env, res Result) (Result, error) {
	n := e.prefill
	if n <= 0 {
		return res, errors.New("webhook-deliver queues --prefill rows: give a positive --prefill")
	}
	res.Mode = "drain"
	rcv, err := startReceiver(n)
	if err != nil {
		return res, err
	}
	defer rcv.srv.Close()

	// One endpoint per account, at a path of its own (its secret verifies).
	for k, a := range e.accounts {
		path := "/hook/" + strconv.Itoa(k)
		body := []byte(`{"url":"` + rcv.url + path + `","types":["grant.revoked"]}`)
		var resp bytes.Buffer
		if _, err := e.c.do(ctx, "POST", "/v1/webhooks", a.key, body, &resp); err != nil {
			if ab := notBuilt(err); ab != nil {
				return res, ab
			}
			return res, fmt.Errorf("register webhook: %w: %s (the server needs --webhook-allow-private)", err, resp.Bytes())
		}
		var h struct {
			Secret string `json:"secret"`
		}
		if err := json.Unmarshal(resp.Bytes(), &h); err != nil || h.Secret == "" {
			return res, fmt.Errorf("register webhook: no secret in %s", resp.Bytes())
		}
		rcv.mu.Lock()
		rcv.secrets[path] = h.Secret
		rcv.mu.Unlock()
	}

	queued := []byte(`"webhook":"queued"`)
	testBody := []byte(`{"type":"grant.revoked"}`)
	qStart := time.Now()
	err = parallelPrep(ctx, e, "webhook-deliver: queued rows", n, func(ctx context.Context, i int, resp *bytes.Buffer) error {
		a := e.accounts[i%len(e.accounts)]
		if _, err := e.c.do(ctx, "POST", "/v1/notifications/test", a.key, testBody, resp); err != nil {
			if ab := notBuilt(err); ab != nil {
				return ab
			}
			return fmt.Errorf("queue a notice: %w: %s", err, resp.Bytes())
		}
		if !bytes.Contains(resp.Bytes(), queued) {
			return fmt.Errorf("queue a notice: the webhook row is not queued: %s", resp.Bytes())
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	qSeconds := time.Since(qStart).Seconds()
	if got := rcv.count(); got > 0 {
		return res, fmt.Errorf("the receiver got %d requests before the first drain", got)
	}
	fmt.Fprintf(e.progress, "bench: webhook-deliver: draining %d rows to %d endpoints\n", n, len(e.accounts))

	var cpuFrom, selfFrom procSample
	sampled := false
	if e.serverPID > 0 {
		if s, err := sampleProc(e.serverPID); err == nil {
			cpuFrom, sampled = s, true
		}
	}
	self, selfErr := sampleProc(os.Getpid())
	selfFrom = self
	var (
		total  sendCounts
		drains int
		drainT Histogram
	)
	t0 := time.Now()
	for drains < maxDrains && ctx.Err() == nil {
		start := time.Now()
		rcv.drainStart.Store(start.UnixNano())
		d, err := cronDrain(ctx, e.c)
		drainT.Record(time.Since(start))
		drains++
		if err != nil {
			return res, err
		}
		total.Drained += d.Drained
		total.Sent += d.Sent
		total.Failed += d.Failed
		fmt.Fprintf(e.progress, "bench: webhook-deliver: drain %d: drained %d, sent %d, failed %d in %v\n",
			drains, d.Drained, d.Sent, d.Failed, time.Since(start).Round(time.Millisecond))
		if rcv.distinct() >= n || d.Drained == 0 {
			break
		}
	}
	elapsed := max(time.Since(t0), time.Millisecond)

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	res.Seconds = elapsed.Seconds()
	res.Ops = rcv.requests
	res.OpsPerSec = float64(rcv.requests) / elapsed.Seconds()
	res.Latency = latencyOf(&rcv.hist)
	res.Extra = map[string]float64{
		"rows_queued": float64(n), "endpoints": float64(len(e.accounts)),
		"distinct_webhook_ids": float64(len(rcv.seen)), "duplicates": float64(rcv.dups),
		"drains": float64(drains), "drain_p50_ms": latencyOf(&drainT).P50, "drain_max_ms": latencyOf(&drainT).Max,
		"drained_reported": float64(total.Drained), "sent_reported": float64(total.Sent), "failed_reported": float64(total.Failed),
		"queue_seconds": qSeconds, "queue_rows_per_sec": float64(n) / qSeconds,
	}
	errs := map[string]int64{}
	if missing := int64(n - len(rcv.seen)); missing > 0 {
		errs["undelivered"] = missing
	}
	for k, v := range map[string]int64{"duplicate webhook-id": rcv.dups, "bad signature": rcv.badSig,
		"missing webhook headers": rcv.noHeader, "unknown endpoint path": rcv.wrongURL, "drain failed": int64(total.Failed)} {
		if v > 0 {
			errs[k] = v
		}
	}
	if len(errs) > 0 {
		res.Errors = errs
	}
	if sampled {
		if s, err := sampleProc(e.serverPID); err == nil {
			cpu := s.cpu - cpuFrom.cpu
			res.Server = &ServerStats{PeakRSSMB: float64(s.hwmKB) / 1024, RSSMB: float64(s.rssKB) / 1024,
				CPUCores: cpu.Seconds() / elapsed.Seconds()}
			if rcv.requests > 0 {
				res.Server.CPUMicrosPerOp = float64(cpu.Microseconds()) / float64(rcv.requests)
			}
		}
	}
	if s, err := sampleProc(os.Getpid()); err == nil && selfErr == nil && rcv.requests > 0 {
		// The generator is idle but for the receiver during the drains.
		res.Extra["receiver_cpu_us_per_delivery"] = float64((s.cpu - selfFrom.cpu).Microseconds()) / float64(rcv.requests)
	}
	return res, nil
}

// cronDrain calls the webhooks job once.
func cronDrain(ctx context.Context, c *client) (sendCounts, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/v1/internal/cron/webhooks", nil)
	if err != nil {
		return sendCounts{}, err
	}
	req.Header.Set("X-Cron-Secret", CronSecret)
	resp, err := c.hc.Do(req)
	if err != nil {
		return sendCounts{}, fmt.Errorf("drain: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusNotImplemented {
			return sendCounts{}, errAbort{errors.New("POST /v1/internal/cron/webhooks answers 501 not_implemented: this server does not have that route yet")}
		}
		return sendCounts{}, fmt.Errorf("drain: POST /v1/internal/cron/webhooks: %d %s (the server needs --cron-secret %s)",
			resp.StatusCode, bytes.TrimSpace(b), CronSecret)
	}
	var d drainResult
	if err := json.Unmarshal(b, &d); err != nil {
		return sendCounts{}, fmt.Errorf("drain answer %s: %w", b, err)
	}
	return d.Webhooks, nil
}
