package bench

// The witness-sweep workload (issue #40): does the witness job keep up with
// a checkpoint per account per minute, over many accounts and three
// witnesses? The job has no cron route and a fixed one-minute cadence
// (app.WitnessCadence, aligned on the minute): the generator measures the
// first scheduled run after every account's newest block is new.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sweepWitnesses is how many `auditchain witness serve` the workload runs.
const sweepWitnesses = 3

// sweepEvents is how many events each account gets per setup round.
const sweepEvents = 3

// sweepBudget is the target: every account cosigned within the minute.
const sweepBudget = time.Minute

// startSweepWitnesses is the witness-sweep workload's preparation before
// serve starts: a service key of the generator's (serve gets it with
// --service-key-file, so the witnesses can trust it before serve runs), and
// three `witness serve` trusting it (--auditchain-service). It returns the
// serve flags (--witness URL=VKEY each, the cron route to read the job's
// runs) and what stops the witnesses.
func startSweepWitnesses(ctx context.Context, e *env, dir string) ([]string, func() error, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	keyFile := filepath.Join(dir, "service.key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(priv.Seed())+"\n"), 0o600); err != nil {
		return nil, nil, err
	}
	args := []string{"--service-key-file", keyFile, "--cron-secret", CronSecret, "--scheduler=true"}
	var started []*localServer
	stop := func() error {
		var first error
		for _, s := range started {
			if err := s.stop(); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	for i := 1; i <= sweepWitnesses; i++ {
		name := "bench.witness.test/w" + strconv.Itoa(i)
		wkey := filepath.Join(dir, "witness"+strconv.Itoa(i)+".key")
		out, err := exec.CommandContext(ctx, e.o.Exe, "witness", "keygen", "--out", wkey, "--name", name).Output()
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("witness keygen: %w", err)
		}
		srv, err := startListening(ctx, nil, []string{e.o.Exe, "witness", "serve",
			"--key", wkey, "--db", filepath.Join(dir, "witness"+strconv.Itoa(i)+".db"), "--create-db", "--listen", "127.0.0.1:0",
			"--auditchain-service", base64.StdEncoding.EncodeToString(pub), "--log-level", "warn"},
			filepath.Join(dir, "witness"+strconv.Itoa(i)+".log"), "auditchain witness listening on ")
		if err != nil {
			stop()
			return nil, nil, err
		}
		started = append(started, srv)
		fmt.Fprintf(e.progress, "bench: witness %s pid %d at %s\n", name, srv.pid, srv.url)
		args = append(args, "--witness", srv.url+"="+strings.TrimSpace(string(out)))
	}
	return args, stop, nil
}

// runWitnessSweep: every account gets sweepEvents events (POST
// /v1/events/append) and a sealed block (GET /v1/chain/blocks seals the
// tip), a round redone when a witness run started during it (so that every
// newest block is new to the witnesses when the measured run starts); then
// the next scheduled witness run is awaited (GET /v1/internal/jobs) and
// every account's newest block is checked for three cosignatures. An op is
// an account cosigned by the run; its time is the run's (duration_ms).
func runWitnessSweep(ctx context.Context, e *env, res Result) (Result, error) {
	if e.srv == nil {
		return res, errors.New("witness-sweep starts its own server with three witnesses: drop --url")
	}
	res.Mode = "job"
	n := len(e.accounts)
	var before witnessRun
	var err error
	for round := 1; ; round++ {
		if before, err = lastWitnessRun(ctx, e.c); err != nil {
			return res, err
		}
		start := time.Now()
		err := parallelPrep(ctx, e, "witness-sweep: accounts sealed", n, func(ctx context.Context, i int, resp *bytes.Buffer) error {
			a := e.accounts[i]
			for j := range sweepEvents {
				body := []byte(`{"event_id":"evt-` + e.prefix + `-` + strconv.Itoa(round) + `-` + strconv.Itoa(i) + `-` + strconv.Itoa(j) +
					`","event_type":"tool_call","tool":"bash","decision":"allow","raw":{"n":` + strconv.Itoa(j) + `}}`)
				if _, err := e.c.do(ctx, "POST", "/v1/events/append", a.key, body, resp); err != nil {
					return fmt.Errorf("append: %w: %s", err, resp.Bytes())
				}
			}
			if _, err := e.c.do(ctx, "GET", "/v1/chain/blocks?limit=1000", a.key, nil, resp); err != nil {
				return fmt.Errorf("seal: %w: %s", err, resp.Bytes())
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		after, err := lastWitnessRun(ctx, e.c)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(e.progress, "bench: witness-sweep: round %d: %d accounts, %d events each, sealed in %v\n", round, n, sweepEvents, time.Since(start).Round(time.Millisecond))
		if after.StartedAt.Equal(before.StartedAt) && !after.Running {
			before = after
			break
		}
		if round == 3 {
			return res, errors.New("witness-sweep: a witness run started during each of 3 setup rounds: the setup takes about a minute; use fewer --accounts")
		}
		fmt.Fprintf(e.progress, "bench: witness-sweep: a witness run started during round %d: another round\n", round)
	}
	ready := time.Now()
	cpuFrom, cpuErr := sampleProc(e.serverPID)
	fmt.Fprintf(e.progress, "bench: witness-sweep: waiting for the next witness run (on the minute)\n")
	var run witnessRun
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if run, err = lastWitnessRun(ctx, e.c); err != nil {
			return res, err
		}
		if run.StartedAt.After(before.StartedAt) && !run.Running && run.Outcome != "running" && run.DurationMS != nil {
			break
		}
	}
	if run.Outcome != "ok" {
		return res, fmt.Errorf("witness-sweep: the witness run %s: %s", run.Outcome, run.Error)
	}
	took := time.Duration(*run.DurationMS * float64(time.Millisecond))
	if cpuErr == nil {
		// The server's CPU from the end of the setup to the end of the run:
		// the run, and the idle wait for the minute.
		if s, err := sampleProc(e.serverPID); err == nil {
			res.Server = &ServerStats{CPUMicrosPerOp: float64((s.cpu - cpuFrom.cpu).Microseconds()) / float64(max(1, n))}
		}
	}
	fmt.Fprintf(e.progress, "bench: witness-sweep: the run started %v after the setup, took %v\n", run.StartedAt.Sub(ready).Round(time.Millisecond), took.Round(time.Millisecond))

	// Every account's newest block must carry the three cosignatures.
	var missing []string
	var mu sync.Mutex
	err = parallelPrep(ctx, e, "witness-sweep: accounts checked", n, func(ctx context.Context, i int, resp *bytes.Buffer) error {
		a := e.accounts[i]
		if _, err := e.c.do(ctx, "GET", "/v1/chain/blocks?limit=1000", a.key, nil, resp); err != nil {
			return fmt.Errorf("blocks: %w: %s", err, resp.Bytes())
		}
		var page struct {
			Blocks []struct {
				Cosignatures []string `json:"cosignatures"`
			} `json:"blocks"`
			NextCursor *int `json:"next_cursor"`
		}
		if err := json.Unmarshal(resp.Bytes(), &page); err != nil {
			return fmt.Errorf("blocks: %w", err)
		}
		if len(page.Blocks) == 0 || page.NextCursor != nil || len(page.Blocks[len(page.Blocks)-1].Cosignatures) != sweepWitnesses {
			mu.Lock()
			missing = append(missing, a.userID)
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if len(missing) > 0 {
		return res, fmt.Errorf("witness-sweep: %d of %d accounts' newest block lacks %d cosignatures after the run (e.g. %s)", len(missing), n, sweepWitnesses, missing[0])
	}
	res.Ops = int64(n)
	res.Seconds = took.Seconds()
	res.OpsPerSec = float64(n) / took.Seconds()
	res.Extra = map[string]float64{"sweep_seconds": took.Seconds(), "budget_seconds": sweepBudget.Seconds(),
		"witnesses": sweepWitnesses, "cosignatures_per_sec": float64(n*sweepWitnesses) / took.Seconds(),
		"wait_seconds": run.StartedAt.Sub(ready).Seconds()}
	return res, nil
}

// witnessRun is the witness job's newest scheduled run (GET
// /v1/internal/jobs last_run); zero before the first.
type witnessRun struct {
	StartedAt  time.Time `json:"started_at"`
	DurationMS *float64  `json:"duration_ms"`
	Outcome    string    `json:"outcome"`
	Error      string    `json:"error"`
	Running    bool      `json:"-"`
}

func lastWitnessRun(ctx context.Context, c *client) (witnessRun, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/v1/internal/jobs", nil)
	if err != nil {
		return witnessRun{}, err
	}
	req.Header.Set("X-Cron-Secret", CronSecret)
	resp, err := c.hc.Do(req)
	if err != nil {
		return witnessRun{}, fmt.Errorf("GET /v1/internal/jobs: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return witnessRun{}, fmt.Errorf("GET /v1/internal/jobs: %d %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	var out struct {
		Jobs []struct {
			Job     string      `json:"job"`
			Running bool        `json:"running"`
			LastRun *witnessRun `json:"last_run"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return witnessRun{}, fmt.Errorf("GET /v1/internal/jobs: %w", err)
	}
	for _, j := range out.Jobs {
		if j.Job == "witness" {
			var r witnessRun
			if j.LastRun != nil {
				r = *j.LastRun
			}
			r.Running = j.Running
			return r, nil
		}
	}
	return witnessRun{}, errors.New("GET /v1/internal/jobs lists no witness job: this server has no witness job")
}
