package bench

// The operator jobs' workload (issue #21): grant-expiry over many grants,
// the job whose cost grows with what it visits.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// jobServerArgs are the serve flags grant-expiry needs: the cron route, and
// no built-in scheduler (whose run would race the timed one).
var jobServerArgs = []string{"--cron-secret", CronSecret, "--scheduler=false"}

// runGrantExpiry: --prefill grants (default 100,000) spread round-robin over
// the accounts (--accounts, default 100), every one expiring within the next
// 24 hours — the worst case, where every grant the job visits gets its
// notice (three rows) — are created over HTTP (setup, not measured); then
// POST /v1/internal/cron/grant-expiry runs once (timed: the first run, which
// writes every notice), and once more (timed: a second run visits the same
// grants and notifies nobody). An operation is one grant visited.
func runGrantExpiry(ctx context.Context, e *env, res Result) (Result, error) {
	n := e.prefill
	if n <= 0 {
		return res, errors.New("grant-expiry creates --prefill grants: give a positive --prefill")
	}
	res.Mode = "job"
	expires := time.Now().Add(12 * time.Hour).UTC().Format(time.RFC3339)
	err := parallelPrep(ctx, e, "grant-expiry: grants", n, func(ctx context.Context, i int, resp *bytes.Buffer) error {
		a := e.accounts[i%len(e.accounts)]
		body := []byte(`{"subagent":"sub-` + strconv.Itoa(i) + `","expires_at":"` + expires + `","max_tool_calls":10}`)
		if _, err := e.c.do(ctx, "POST", "/v1/grants", a.key, body, resp); err != nil {
			return fmt.Errorf("create a grant: %w: %s", err, resp.Bytes())
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	var settled time.Duration
	if e.serverPID > 0 {
		if settled, err = settle(ctx, e.serverPID, serverSettleLimit); err != nil {
			return res, err
		}
		fmt.Fprintf(e.progress, "bench: grant-expiry: the server idle %v after the setup\n", settled.Round(time.Millisecond))
	}
	var cpuFrom procSample
	sampled := false
	if e.serverPID > 0 {
		if s, err := sampleProc(e.serverPID); err == nil {
			cpuFrom, sampled = s, true
		}
	}
	first, firstT, err := cronGrantExpiry(ctx, e.c)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(e.progress, "bench: grant-expiry: first run %+v in %v\n", first, firstT.Round(time.Millisecond))
	if sampled {
		if s, err := sampleProc(e.serverPID); err == nil {
			res.Server = &ServerStats{CPUMicrosPerOp: float64((s.cpu - cpuFrom.cpu).Microseconds()) / float64(max(1, first.Expiring))}
		}
	}
	second, secondT, err := cronGrantExpiry(ctx, e.c)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(e.progress, "bench: grant-expiry: second run %+v in %v\n", second, secondT.Round(time.Millisecond))
	if first.Expiring != n || first.Notified != n || second.Notified != 0 {
		return res, fmt.Errorf("grant-expiry: first run %+v, second %+v; want %d expiring and notified, then none notified", first, second, n)
	}
	res.Seconds = firstT.Seconds()
	res.Ops = int64(first.Expiring)
	res.OpsPerSec = float64(first.Expiring) / firstT.Seconds()
	res.Extra = map[string]float64{"grants": float64(n), "first_run_seconds": firstT.Seconds(), "second_run_seconds": secondT.Seconds(),
		"notified": float64(first.Notified), "users": float64(first.Users), "settle_seconds": settled.Seconds()}
	return res, nil
}

// serverSettleLimit bounds settle's wait.
const serverSettleLimit = 30 * time.Second

// settle waits until the server pid has been idle — at most 2 clock ticks
// (20 ms) of CPU over half a second — or limit passed, and says how long it
// waited. A timed job then measures the job, not the tail of the setup's
// work still running in the server (the WAL's checkpoint, the Merkle
// builder, after 100,000 grants' events): a scheduled job does not start
// the moment a bulk load ends.
func settle(ctx context.Context, pid int, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	prev, err := sampleProc(pid)
	if err != nil {
		return 0, err
	}
	for time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		s, err := sampleProc(pid)
		if err != nil {
			return time.Since(start), err
		}
		if s.cpu-prev.cpu <= 2*(time.Second/clockTicks) {
			break
		}
		prev = s
	}
	return time.Since(start), nil
}

type grantExpiryCounts struct {
	Expiring, Notified, Users int
}

func cronGrantExpiry(ctx context.Context, c *client) (grantExpiryCounts, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/v1/internal/cron/grant-expiry", nil)
	if err != nil {
		return grantExpiryCounts{}, 0, err
	}
	req.Header.Set("X-Cron-Secret", CronSecret)
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return grantExpiryCounts{}, 0, fmt.Errorf("grant-expiry: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusNotImplemented {
			return grantExpiryCounts{}, 0, errAbort{errors.New("POST /v1/internal/cron/grant-expiry answers 501: this server does not have that job yet")}
		}
		return grantExpiryCounts{}, 0, fmt.Errorf("grant-expiry: %d %s (the server needs --cron-secret %s)", resp.StatusCode, bytes.TrimSpace(b), CronSecret)
	}
	var out struct {
		Swept grantExpiryCounts `json:"swept"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return grantExpiryCounts{}, 0, fmt.Errorf("grant-expiry answer %s: %w", b, err)
	}
	return out.Swept, took, nil
}
