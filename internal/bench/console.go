package bench

// The console at size (issue #37 "Fast at size"): an account of --prefill
// events (default 1,000,000) and --grants grants (default 10,000), signed in
// by one-time code as a person is, then every console page requested in turn
// for --duration: the server's time per page (its Server-Timing header), the
// client's, and the page's bytes with its assets. Then the live view: an
// activity page's stream (GET /v1/events/stream with the session cookie,
// re-fetching the rows at most once a second, as console.js does) open while
// events are appended at --rate (default 200/s) for --live, with the
// server's RSS and Go heap sampled every second.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
)

// consolePage is one page the workload requests.
type consolePage struct {
	name, path string
	hist       Histogram // server time (Server-Timing), else the client's
	client     Histogram // the client's time
	bytes      int64     // the page's body, last seen
	assets     int64     // the assets it links (each counted once)
	status     int
	notBuilt   bool
	timed      bool // the answer carried Server-Timing
}

// consoleSubagents is how many distinct sub-agents the grants are spread over.
const consoleSubagents = 500

// runConsole is the console workload.
func runConsole(ctx context.Context, e *env, res Result) (Result, error) {
	res.Mode, res.Clients = "closed", 1
	acct := &e.accounts[0]
	if acct.email == "" {
		return res, errors.New("console signs in by one-time code: its account needs an email (a saved --account-file from an older bench has none)")
	}
	if !e.prefilled {
		if err := prefill(ctx, e, 0, e.prefill, false); err != nil {
			return res, err
		}
		if err := consoleGrants(ctx, e, acct.key, e.o.Grants); err != nil {
			return res, err
		}
	}
	token, err := consoleSession(ctx, e, acct)
	if err != nil {
		return res, fmt.Errorf("sign in to the console: %w", err)
	}
	pages, err := consolePages(ctx, e, acct.key)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(e.progress, "bench: console: %d pages for %v\n", len(pages), e.o.Duration)
	for _, p := range pages {
		fmt.Fprintf(e.progress, "bench: console page %-22s %s\n", p.name, p.path)
	}
	res.Extra = map[string]float64{}
	if err := measurePages(ctx, e, token, pages, &res); err != nil {
		return res, err
	}
	if e.o.Live > 0 {
		if err := measureLive(ctx, e, acct.key, token, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// consoleSession is the saved account's session while it lasts (an email
// gets 5 codes an hour, and a kept account is measured again and again),
// else a new one by one-time code, saved with the account.
func consoleSession(ctx context.Context, e *env, acct *account) (string, error) {
	if acct.session != "" {
		var buf bytes.Buffer
		if _, err := e.c.do(ctx, "GET", "/v1/auth/session", acct.session, nil, &buf); err == nil {
			return acct.session, nil
		}
	}
	token, err := signIn(ctx, e.c, e.sink, acct.email)
	if err != nil {
		return "", err
	}
	acct.session = token
	if e.o.AccountFile != "" {
		if err := saveAccount(e.o.AccountFile, *acct); err != nil {
			return "", err
		}
	}
	return token, nil
}

// consoleGrants creates n grants over consoleSubagents sub-agents, and one
// tool call each for the first sub-agents (so a sub-agent filter finds rows).
func consoleGrants(ctx context.Context, e *env, key string, n int) error {
	if n <= 0 {
		return nil
	}
	expires := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	err := parallelPrep(ctx, e, "console: grants", n, func(ctx context.Context, i int, resp *bytes.Buffer) error {
		body := []byte(`{"subagent":"sub-` + strconv.Itoa(i%consoleSubagents) + `","expires_at":"` + expires +
			`","max_tool_calls":1000,"allowed_tools":["bash","read_file","grep"]}`)
		if _, err := e.c.do(ctx, "POST", "/v1/grants", key, body, resp); err != nil {
			if ab := notBuilt(err); ab != nil {
				return ab
			}
			return fmt.Errorf("create a grant: %w: %s", err, resp.Bytes())
		}
		return nil
	})
	if err != nil {
		return err
	}
	pool := newRawPool(nil)
	var resp bytes.Buffer
	for i := range 20 {
		body := []byte(`{"subagent":"sub-` + strconv.Itoa(i) + `","tool":"bash","event_id":"evt-` + e.prefix + `-tc-` +
			strconv.Itoa(i) + `","raw":` + string(pool.raws[i]) + `}`)
		if _, err := e.c.do(ctx, "POST", "/v1/tool-calls", key, body, &resp); err != nil {
			return fmt.Errorf("a tool call: %w: %s", err, resp.Bytes())
		}
	}
	return nil
}

// consolePages lists what the workload requests: the overview; the
// activity's first page, a deep page, and a page per filter (a sub-agent
// with rows, one with none, which reads the whole bounded window, a surface
// no event has, a tool, a decision, an event type, after and before); the
// rows the live view re-fetches; three event pages (newest, middle, oldest:
// fields, neighbours and the inclusion proof); and every other panel of the
// navigation (a panel not on this build answers 404, reported as absent).
func consolePages(ctx context.Context, e *env, key string) ([]*consolePage, error) {
	var tip tip
	var buf bytes.Buffer
	w := &worker{e: e, c: e.c}
	if err := readTip(ctx, w, key, &tip, &buf); err != nil {
		return nil, err
	}
	if tip.seq < 0 {
		return nil, errors.New("console: the account's chain is empty (--prefill 0 without a saved account?)")
	}
	// Event ids at three depths, from the search route.
	idAt := func(cursor int64) (string, string, error) {
		body := `{"limit":1}`
		if cursor >= 0 {
			body = `{"limit":1,"cursor":` + strconv.FormatInt(cursor, 10) + `}`
		}
		if _, err := e.c.do(ctx, "POST", "/v1/events/search", key, []byte(body), &buf); err != nil {
			return "", "", err
		}
		var r struct {
			Results []api.Event `json:"results"`
		}
		if err := json.Unmarshal(buf.Bytes(), &r); err != nil || len(r.Results) == 0 {
			return "", "", fmt.Errorf("search at cursor %d: %s", cursor, buf.Bytes())
		}
		return r.Results[0].EventID, r.Results[0].TS, nil
	}
	newest, ts, err := idAt(-1)
	if err != nil {
		return nil, err
	}
	middle, _, err := idAt(tip.seq / 2)
	if err != nil {
		return nil, err
	}
	oldest, _, err := idAt(1)
	if err != nil {
		return nil, err
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return nil, fmt.Errorf("the newest event's ts %q: %w", ts, err)
	}
	form := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04") }
	pages := []*consolePage{
		{name: "overview", path: "/console/"},
		{name: "activity", path: "/console/activity"},
		{name: "activity deep", path: "/console/activity?cursor=" + strconv.FormatInt(tip.seq/2, 10)},
		{name: "activity subagent", path: "/console/activity?subagent=sub-3"},
		{name: "activity subagent none", path: "/console/activity?subagent=nobody"},
		{name: "activity surface none", path: "/console/activity?surface=mcp_stdio"},
		{name: "activity tool", path: "/console/activity?tool=grep"},
		{name: "activity decision", path: "/console/activity?decision=deny"},
		{name: "activity type", path: "/console/activity?type=tool_call"},
		{name: "activity after", path: "/console/activity?after=" + url.QueryEscape(form(at.Add(-time.Hour)))},
		{name: "activity before", path: "/console/activity?before=" + url.QueryEscape(form(at.Add(-time.Hour)))},
		{name: "activity rows", path: "/console/activity/rows"},
		{name: "event newest", path: "/console/events/" + url.PathEscape(newest)},
		{name: "event middle", path: "/console/events/" + url.PathEscape(middle)},
		{name: "event oldest", path: "/console/events/" + url.PathEscape(oldest)},
	}
	for _, panel := range []string{"gate", "governance", "notifications", "webhooks", "keys", "team", "legal", "usage", "export"} {
		pages = append(pages, &consolePage{name: panel, path: "/console/" + panel})
	}
	return pages, nil
}

var (
	assetRef      = regexp.MustCompile(`(?:src|href)="(/console/assets/[^"]+)"`)
	notBuiltMark  = []byte("This panel is not built yet")
	serverTimeDur = regexp.MustCompile(`(?:^|,)\s*app;dur=([0-9.]+)`)
)

// getPage requests path with the session and answers its body, status,
// and server time (0 when the answer has no Server-Timing).
func getPage(ctx context.Context, c *client, path, token string, body *bytes.Buffer) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Cookie", api.SessionCookie+"="+token)
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	body.Reset()
	if _, err := body.ReadFrom(res.Body); err != nil {
		return res.StatusCode, 0, err
	}
	var srv time.Duration
	if m := serverTimeDur.FindStringSubmatch(res.Header.Get("Server-Timing")); m != nil {
		ms, _ := strconv.ParseFloat(m[1], 64)
		srv = time.Duration(ms * float64(time.Millisecond))
	}
	return res.StatusCode, srv, nil
}

// measurePages requests the pages in turn (one client, closed loop) for
// --duration, after --warmup, and reports per page p50/p99 of the server's
// time and the bytes of the page with its assets.
func measurePages(ctx context.Context, e *env, token string, pages []*consolePage, res *Result) error {
	var body bytes.Buffer
	assetSize := map[string]int64{}
	for _, p := range pages {
		status, _, err := getPage(ctx, e.c, p.path, token, &body)
		if err != nil {
			return fmt.Errorf("GET %s: %w", p.path, err)
		}
		p.status = status
		switch {
		case status == http.StatusNotFound && !strings.HasPrefix(p.name, "event"):
			fmt.Fprintf(e.progress, "bench: console page %s: 404, not on this build\n", p.name)
			continue
		case status != http.StatusOK:
			return fmt.Errorf("GET %s: %d: %.300s", p.path, status, body.Bytes())
		}
		p.notBuilt = bytes.Contains(body.Bytes(), notBuiltMark)
		for _, m := range assetRef.FindAllSubmatch(body.Bytes(), -1) {
			a := string(m[1])
			if _, ok := assetSize[a]; !ok {
				var ab bytes.Buffer
				if st, _, err := getPage(ctx, e.c, a, token, &ab); err != nil || st != http.StatusOK {
					return fmt.Errorf("GET %s: %d %v", a, st, err)
				}
				assetSize[a] = int64(ab.Len())
			}
			p.assets += assetSize[a]
		}
	}
	live := slices.DeleteFunc(slices.Clone(pages), func(p *consolePage) bool { return p.status != http.StatusOK })
	var cpuFrom procSample
	sampled := false
	loop := func(until time.Time, record bool) error {
		for time.Now().Before(until) {
			for _, p := range live {
				t0 := time.Now()
				status, srv, err := getPage(ctx, e.c, p.path, token, &body)
				d := time.Since(t0)
				if err != nil {
					return fmt.Errorf("GET %s: %w", p.path, err)
				}
				if status != http.StatusOK {
					return fmt.Errorf("GET %s: %d: %.300s", p.path, status, body.Bytes())
				}
				if !record {
					continue
				}
				p.bytes = int64(body.Len())
				p.client.Record(d)
				if srv > 0 {
					p.timed = true
					p.hist.Record(srv)
				} else {
					p.hist.Record(d)
				}
				res.Ops++
			}
		}
		return ctx.Err()
	}
	if err := loop(time.Now().Add(e.o.Warmup), false); err != nil {
		return err
	}
	if e.serverPID > 0 {
		if s, err := sampleProc(e.serverPID); err == nil {
			cpuFrom, sampled = s, true
		}
	}
	t0 := time.Now()
	if err := loop(t0.Add(e.o.Duration), true); err != nil {
		return err
	}
	elapsed := time.Since(t0)
	res.Seconds = elapsed.Seconds()
	res.OpsPerSec = float64(res.Ops) / elapsed.Seconds()
	var all Histogram
	var worstP99 float64
	var heaviest int64
	for _, p := range live {
		all.Merge(&p.hist)
		l, cl := latencyOf(&p.hist), latencyOf(&p.client)
		key := strings.ReplaceAll(p.name, " ", "_")
		res.Extra[key+"_p50_ms"] = l.P50
		res.Extra[key+"_p99_ms"] = l.P99
		res.Extra[key+"_kb"] = float64(p.bytes+p.assets) / 1024
		worstP99 = max(worstP99, l.P99)
		heaviest = max(heaviest, p.bytes+p.assets)
		src := "server"
		if !p.timed {
			src = "client (no Server-Timing)"
		}
		note := ""
		if p.notBuilt {
			note = " (not built on this build)"
		}
		fmt.Fprintf(e.progress, "bench: console %-22s p50 %7.2f ms  p99 %7.2f ms  (client p99 %7.2f ms, %s, n=%d)  page %6.1f KB + assets %5.1f KB%s\n",
			p.name, l.P50, l.P99, cl.P99, src, p.hist.Count(), float64(p.bytes)/1024, float64(p.assets)/1024, note)
	}
	res.Latency = latencyOf(&all)
	res.Extra["worst_page_p99_ms"] = worstP99
	res.Extra["heaviest_page_kb"] = float64(heaviest) / 1024
	if sampled {
		if s, err := sampleProc(e.serverPID); err == nil {
			cpu := s.cpu - cpuFrom.cpu
			res.Server = &ServerStats{CPUMicrosPerOp: float64(cpu.Microseconds()) / float64(max(res.Ops, 1)),
				CPUCores: cpu.Seconds() / elapsed.Seconds(), PeakRSSMB: float64(s.hwmKB) / 1024, RSSMB: float64(s.rssKB) / 1024}
		}
	}
	return nil
}

// measureLive opens the activity page's live view — the session's event
// stream, and a re-fetch of the first page's rows at most once a second
// while frames arrive — and appends events at --rate (default 200/s) for
// --live. The server's RSS (from /proc, when it runs here) and Go heap (from
// /metrics, when it answers) are sampled every second; the report holds the
// first and last samples and the highest, and what the stream delivered.
func measureLive(ctx context.Context, e *env, key, token string, res *Result) error {
	rate := e.o.Rate
	if rate <= 0 {
		rate = 200
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, "GET", e.c.base+"/v1/events/stream", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Cookie", api.SessionCookie+"="+token)
	req.Header.Set("Accept", "text/event-stream")
	streamClient := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	resp, err := streamClient.Do(req)
	if err != nil {
		return fmt.Errorf("live: open the stream: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("live: the stream answered %d: %s", resp.StatusCode, b)
	}
	var (
		frames, lagged, refetches atomic.Int64
		pending                   atomic.Bool
		readErr                   atomic.Value
		wg                        sync.WaitGroup
		ready                     = make(chan struct{})
	)
	// The reader: counts frames and marks that rows are due.
	wg.Go(func() {
		br := bufio.NewReader(resp.Body)
		var event string
		once := sync.Once{}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if sctx.Err() == nil {
					readErr.Store(err.Error())
				}
				once.Do(func() { close(ready) })
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				event = line[7:]
				if event == "ready" {
					once.Do(func() { close(ready) })
				}
				if event == "lagged" {
					lagged.Add(1)
				}
			case strings.HasPrefix(line, "data: ") && event == "event":
				frames.Add(1)
				pending.Store(true)
			}
		}
	})
	// The page's refresh: at most once a second, when frames came.
	var rowsHist Histogram
	var rowsMu sync.Mutex
	wg.Go(func() {
		var body bytes.Buffer
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
			}
			if !pending.Swap(false) {
				continue
			}
			t0 := time.Now()
			status, srv, err := getPage(sctx, e.c, "/console/activity/rows", token, &body)
			if err != nil || status != http.StatusOK {
				if sctx.Err() == nil {
					readErr.Store(fmt.Sprintf("rows: %d %v", status, err))
				}
				continue
			}
			refetches.Add(1)
			rowsMu.Lock()
			rowsHist.Record(cmpDuration(srv, time.Since(t0)))
			rowsMu.Unlock()
		}
	})
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		return errors.New("live: the stream sent no ready frame within 10s")
	}
	type sample struct{ rssMB, heapMB float64 }
	var samples []sample
	sampleNow := func() {
		var s sample
		if e.serverPID > 0 {
			if p, err := sampleProc(e.serverPID); err == nil {
				s.rssMB = float64(p.rssKB) / 1024
			}
		}
		s.heapMB = heapMB(ctx, e.c)
		samples = append(samples, s)
	}
	sampleNow()
	fmt.Fprintf(e.progress, "bench: console live: appending at %.0f/s for %v with the activity stream open\n", rate, e.o.Live)
	pool := newRawPool(nil)
	w := &worker{id: 1<<20 + 1, e: e, c: e.c, errs: map[string]int64{}}
	s := &chainState{accts: []int{0}, tips: []tip{{seq: -1}}}
	var buf bytes.Buffer
	if err := readTip(ctx, w, key, &s.tips[0], &buf); err != nil {
		return err
	}
	var appendHist Histogram
	sched := newSchedule(time.Now(), rate)
	t0 := time.Now()
	nextSample := t0.Add(time.Second)
	var appended int64
	for i := int64(0); time.Since(t0) < e.o.Live && ctx.Err() == nil; i++ {
		due := sched.at(i)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if err := appendOne(ctx, w, s, 0, &s.tips[0], pool, ""); err != nil {
			w.countErr(err)
		} else {
			appended++
			appendHist.Record(time.Since(due))
		}
		if time.Now().After(nextSample) {
			sampleNow()
			nextSample = nextSample.Add(time.Second)
		}
	}
	elapsed := time.Since(t0)
	// The last frames, then the last sample.
	deadline := time.Now().Add(5 * time.Second)
	for frames.Load() < appended && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	sampleNow()
	cancel()
	resp.Body.Close()
	wg.Wait()
	if v := readErr.Load(); v != nil {
		return fmt.Errorf("live: %s", v)
	}
	first, last := samples[0], samples[len(samples)-1]
	var peakRSS, peakHeap float64
	for _, s := range samples {
		peakRSS, peakHeap = max(peakRSS, s.rssMB), max(peakHeap, s.heapMB)
	}
	x := res.Extra
	x["live_appended_per_s"] = float64(appended) / elapsed.Seconds()
	x["live_frames"] = float64(frames.Load())
	x["live_appended"] = float64(appended)
	x["live_lagged"] = float64(lagged.Load())
	x["live_rows_refetches"] = float64(refetches.Load())
	x["live_rows_p99_ms"] = latencyOf(&rowsHist).P99
	x["live_append_p99_ms"] = latencyOf(&appendHist).P99
	// The middle sample too: memory that grows keeps growing in the second
	// half; a cache that fills stops.
	half := samples[len(samples)/2]
	x["live_rss_mb_half"], x["live_heap_mb_half"] = half.rssMB, half.heapMB
	x["live_rss_mb_first"], x["live_rss_mb_last"], x["live_rss_mb_peak"] = first.rssMB, last.rssMB, peakRSS
	x["live_heap_mb_first"], x["live_heap_mb_last"], x["live_heap_mb_peak"] = first.heapMB, last.heapMB, peakHeap
	if len(w.errs) > 0 {
		res.Errors = w.errs
	}
	fmt.Fprintf(e.progress, "bench: console live: %d appended (%.0f/s), %d frames, %d lagged, %d row refreshes (p99 %.1f ms); RSS %.1f → %.1f → %.1f MB (peak %.1f), heap %.1f → %.1f → %.1f MB (peak %.1f)\n",
		appended, x["live_appended_per_s"], frames.Load(), lagged.Load(), refetches.Load(), x["live_rows_p99_ms"],
		first.rssMB, half.rssMB, last.rssMB, peakRSS, first.heapMB, half.heapMB, last.heapMB, peakHeap)
	if frames.Load() < appended {
		return fmt.Errorf("live: the stream delivered %d frames of %d appends", frames.Load(), appended)
	}
	return nil
}

// cmpDuration is a when it is set, else b.
func cmpDuration(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// heapMB is the server's Go heap in use from GET /metrics (0 when it does
// not answer it).
func heapMB(ctx context.Context, c *client) float64 {
	v, _ := metricValue(ctx, c, "go_memstats_heap_alloc_bytes")
	return v / (1 << 20)
}
