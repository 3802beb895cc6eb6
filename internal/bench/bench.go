// Package bench is `auditchain bench`: a load generator that runs named
// workloads against a running server or one it starts itself, and reports
// throughput, latency percentiles, errors by status, and — when the server is
// local — its CPU time per operation and peak memory (docs/performance.md).
package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Options configure one `auditchain bench` invocation.
type Options struct {
	// URL targets a running server; empty starts a local one (Exe serve).
	URL string
	// DB is the store: with URL, the running server's (used only to create
	// bench accounts and keys); without, the local server's (empty: a fresh
	// SQLite file in a temporary directory for every run).
	DB string
	// Exe is the auditchain binary run as the local server (empty: the
	// ServerExeEnv environment variable, else this executable).
	Exe string
	// ServerWrap prefixes the server command (e.g. strace … to slow fsync).
	ServerWrap []string
	// ServerArgs are extra `serve` flags for the local server.
	ServerArgs []string
	// ServerPID, with URL, names a local server process to sample.
	ServerPID int

	Workloads []string
	Duration  time.Duration // measured time per run (closed and open loop)
	Warmup    time.Duration // unmeasured time before it
	Rate      float64       // > 0: open loop at Rate operations per second
	Clients   int           // 0: the workload's default
	Accounts  int           // 0: the workload's default
	// Prefill is the events on the first account before measuring (search,
	// heal-scan, sequential, hot, restart); < 0: the workload's default.
	Prefill int
	// DirectPrefill writes the prefill straight into the store before the
	// server starts (directPrefill) instead of by batch calls over HTTP.
	DirectPrefill bool
	// FillOthers, with DirectPrefill, puts this many events on every account
	// but the first (growth with the number of accounts).
	FillOthers int
	BatchSize  int  // events per batch call
	Listeners  int  // SSE connections (listeners)
	Events     int  // events delivered to the listeners
	Signed     bool // prefill signed events (heal-scan, search)
	Runs       int  // repeat each workload; the report holds medians
	Restarts   int  // server restarts measured per run (restart)
	// Session authenticates every bench account's requests with a session
	// cookie (signed in by one-time code) instead of its API key.
	Session bool
	// SpreadRequests, with several URLs, sends each append of a client to
	// a target picked at random instead of all to one (a load balancer
	// without account affinity).
	SpreadRequests bool

	// HookExe is the auditchain binary the hook workload runs as the hook
	// (empty: this executable).
	HookExe string

	// Progress receives one line per step; nil: discarded.
	Progress io.Writer
}

func (o *Options) defaults() {
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	if o.Listeners <= 0 {
		o.Listeners = 5000
	}
	if o.Events <= 0 {
		o.Events = 100
	}
	if o.Runs <= 0 {
		o.Runs = 1
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Run runs every workload Runs times and returns one (median) result each. A
// workload that fails carries its error in Result.Error; Run itself fails only
// on bad options.
func Run(ctx context.Context, o Options) ([]Result, error) {
	o.defaults()
	if len(o.Workloads) == 0 {
		return nil, errors.New("name at least one workload: " + strings.Join(WorkloadNames(), ", "))
	}
	var wls []*workload
	for _, name := range o.Workloads {
		w := lookup(name)
		if w == nil {
			return nil, fmt.Errorf("unknown workload %q (known: %s)", name, strings.Join(WorkloadNames(), ", "))
		}
		wls = append(wls, w)
	}
	if o.URL != "" && o.DB == "" {
		return nil, errors.New("--url needs --db, the running server's store, to create the bench accounts and keys")
	}
	if o.URL == "" && o.Exe == "" {
		o.Exe = os.Getenv(ServerExeEnv)
	}
	if o.URL == "" && o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the auditchain binary to start a server: %w", err)
		}
		o.Exe = exe
	}
	var out []Result
	for _, w := range wls {
		var runs []Result
		for i := range o.Runs {
			fmt.Fprintf(o.Progress, "bench: %s run %d/%d\n", w.name, i+1, o.Runs)
			r := runOnce(ctx, &o, w, i)
			if r.Error != "" {
				fmt.Fprintf(o.Progress, "bench: %s: %s\n", w.name, r.Error)
			}
			runs = append(runs, r)
			if ctx.Err() != nil {
				break
			}
		}
		out = append(out, median(runs))
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

// account is one bench account: its first key, and extra keys when asked for.
type account struct {
	userID string
	keyID  string
	key    string
	keys   []string
}

// env is one run of one workload.
type env struct {
	o         *Options
	w         *workload
	c         *client   // the first target: setup requests
	cs        []*client // every target (--url a,b): workers spread over them
	clients   int
	rate      float64 // > 0: open loop at this many operations per second
	accounts  []account
	prefix    string // makes this run's event ids unique
	serverPID int
	stored    atomic.Int64 // events this run stored (bytes per event)
	progress  io.Writer
	prefill   int  // events on the first account before measuring
	prefilled bool // written directly before the server started
	db        string
	srv       *localServer // the started server, if any (restart replaces it)
	logDir    string
}

func runOnce(ctx context.Context, o *Options, w *workload, run int) (res Result) {
	e := &env{o: o, w: w, progress: o.Progress,
		prefix: "b" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36) + strconv.Itoa(run)}
	e.clients = w.clients
	if o.Clients > 0 && !w.fixedClients {
		e.clients = o.Clients
	}
	nAccounts := w.accounts
	if o.Accounts > 0 && !w.fixedAccounts {
		nAccounts = o.Accounts
	}
	res = Result{Workload: w.name, Mode: "closed", Clients: e.clients, Accounts: nAccounts, Runs: 1}
	if rate := cmp.Or(o.Rate, w.defRate); rate > 0 && w.openLoop {
		res.Mode, res.Rate, e.rate = "open", rate, rate
	}
	if w.prefill {
		e.prefill = o.Prefill
		if e.prefill < 0 {
			e.prefill = w.defPrefill
		}
		res.Prefill = e.prefill
	}
	fail := func(err error) Result { res.Error = err.Error(); return res }

	db := o.DB
	var tmp string
	if o.URL == "" && db == "" {
		var err error
		tmp, err = os.MkdirTemp("", "auditchain-bench-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(tmp)
		db = "sqlite:" + filepath.Join(tmp, "bench.db")
	}
	keys := 0
	if w.keys != nil {
		keys = w.keys(o)
	}
	fmt.Fprintf(o.Progress, "bench: creating %d accounts\n", nAccounts)
	accts, err := provisionFor(ctx, o, db, nAccounts, keys, e.sessionPrefix())
	if err != nil {
		return fail(fmt.Errorf("create bench accounts in %s: %w", db, err))
	}
	e.accounts = accts
	if w.prefill && !w.prefillRows && e.prefill == 0 && o.DB != "" && len(accts) == 1 {
		// --prefill 0 on an existing --db: measure its longest chain again
		// instead of prefilling a new one (a 1M-event chain once, several runs).
		a, n, err := longestChain(ctx, db)
		if err != nil {
			return fail(err)
		}
		if n > 0 {
			e.accounts[0], e.prefill, res.Prefill, e.prefilled = a, int(n), int(n), true
			fmt.Fprintf(o.Progress, "bench: using the existing chain of %d events of account %s\n", n, a.userID)
		}
	}
	sqlitePath, isSQLite := strings.CutPrefix(db, "sqlite:")
	sizeBefore := int64(0)
	if isSQLite {
		sizeBefore = sqliteBytes(sqlitePath)
	}

	if o.DirectPrefill && w.prefill && !w.prefillRows && !e.prefilled {
		if o.URL != "" {
			return fail(errors.New("--direct-prefill writes the store before the server starts: it cannot be used with --url"))
		}
		if o.Signed {
			return fail(errors.New("--direct-prefill writes unsigned events: drop --signed"))
		}
		prog := func(label string) func(done, total int, rate float64) {
			return func(done, total int, rate float64) {
				fmt.Fprintf(o.Progress, "bench: direct prefill%s %d/%d events (%.0f/s)\n", label, done, total, rate)
			}
		}
		if err := directPrefill(ctx, db, accts[:1], e.prefill, prog("")); err != nil {
			return fail(err)
		}
		if err := directPrefill(ctx, db, accts[1:], o.FillOthers, prog(" (other accounts)")); err != nil {
			return fail(err)
		}
		e.prefilled = true
		e.stored.Add(int64(e.prefill + o.FillOthers*(len(accts)-1)))
	}
	e.db = db

	base := o.URL
	var srv *localServer
	if base == "" {
		logDir := tmp
		if logDir == "" {
			logDir = os.TempDir()
		}
		e.logDir = logDir
		// The workload's serve flags first: --server-arg may override them.
		args := append(append([]string{}, w.serverArgs...), o.ServerArgs...)
		srv, err = startServer(ctx, o.Exe, o.ServerWrap, db, args, filepath.Join(logDir, "bench-server.log"))
		if err != nil {
			return fail(err)
		}
		base = srv.url
		e.serverPID = srv.pid
		e.srv = srv
		fmt.Fprintf(o.Progress, "bench: server pid %d at %s (%s)\n", srv.pid, base, db)
	} else {
		e.serverPID = o.ServerPID
	}
	urls := strings.Split(base, ",")
	for _, u := range urls {
		c := newClient(strings.TrimRight(strings.TrimSpace(u), "/"), max(e.clients/len(urls)+1, 1))
		defer c.close()
		e.cs = append(e.cs, c)
	}
	e.c = e.cs[0]

	res, err = w.run(ctx, e, res)
	if err != nil {
		res.Error = err.Error()
	}
	if srv != nil && e.srv != nil {
		if err := e.srv.stop(); err != nil && res.Error == "" {
			res.Error = "server: " + err.Error()
		}
		if isSQLite && e.stored.Load() > 0 && res.Server != nil {
			res.Server.BytesPerEvent = float64(sqliteBytes(sqlitePath)-sizeBefore) / float64(e.stored.Load())
		}
	}
	return res
}

// sessionPrefix is, with --session, what makes this run's account emails
// unique; empty without.
func (e *env) sessionPrefix() string {
	if !e.o.Session {
		return ""
	}
	return e.prefix + "s"
}

// provisionConfig is the configuration the generator writes accounts and
// keys with: the listeners workload gives one account a key per 16 streams,
// beyond --max-keys-per-account's default.
func provisionConfig() config.Config {
	return config.Config{EpochAnchor: domain.DefaultEpochAnchor, MaxKeys: math.MaxInt32}
}

// provision creates n accounts (unscoped keys) through the store, and extra
// keys on the first one, exactly as `auditchain admin` does. With a
// sessionPrefix the accounts have emails and sign in by one-time code: their
// credential is the session token instead of the key.
func provision(ctx context.Context, db string, n, extraKeys int, sessionPrefix string) ([]account, error) {
	st, err := store.Open(ctx, db)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	a := app.New(app.Deps{Store: st, Config: provisionConfig()})
	sa, catcher := signInApp(st)
	out := make([]account, n)
	for i := range out {
		req := app.AccountRequest{NoEmail: true}
		if sessionPrefix != "" {
			req = app.AccountRequest{Email: benchEmail(sessionPrefix, i)}
		}
		acct, key, err := a.CreateAccount(ctx, req)
		if err != nil {
			return nil, err
		}
		out[i] = account{userID: acct.UserID, keyID: key.ID, key: key.APIKey}
		if sessionPrefix != "" {
			if out[i].key, err = signIn(ctx, sa, catcher, *acct.Email); err != nil {
				return nil, fmt.Errorf("sign in %s: %w", *acct.Email, err)
			}
		}
	}
	for range extraKeys {
		k, err := a.CreateKey(ctx, out[0].userID, api.CreateKeyRequest{Label: new("bench")})
		if err != nil {
			return nil, err
		}
		out[0].keys = append(out[0].keys, k.APIKey)
	}
	return out, nil
}

// clientFor spreads workers over the targets.
func (e *env) clientFor(i int) *client {
	if len(e.cs) == 0 {
		return e.c
	}
	return e.cs[i%len(e.cs)]
}

// worker is one client of the load: its own histogram, counters and buffers.
type worker struct {
	id      int
	e       *env
	c       *client
	rnd     *rand.Rand // picks targets (target)
	hist    Histogram
	ops     int64
	items   int64
	retries int64
	errs    map[string]int64
	body    []byte
	resp    bytes.Buffer
	state   any
}

// target is the client for the worker's next append: its own, or with
// SpreadRequests any target at random (a balancer without affinity: a
// fixed turn would line up with the client's round-robin over its accounts
// and keep each account on one target after all).
func (w *worker) target() *client {
	cs := w.e.cs
	if !w.e.o.SpreadRequests || len(cs) < 2 {
		return w.c
	}
	if w.rnd == nil {
		w.rnd = rand.New(rand.NewPCG(uint64(w.id), 0x5eed))
	}
	return cs[w.rnd.IntN(len(cs))]
}

func (w *worker) countErr(err error) {
	var se *statusError
	k := "transport"
	if errors.As(err, &se) {
		k = se.key()
	} else if !isTransport(err) {
		k = err.Error()
	}
	w.errs[k]++
}

func isTransport(err error) bool {
	var ue interface{ Timeout() bool }
	return errors.As(err, &ue) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// opFunc performs one operation and returns how many items it carried
// (events in a batch, events a scan read; 1 otherwise).
type opFunc func(ctx context.Context, w *worker) (int, error)

// errDone, returned by an operation, stops its worker without counting an
// error: the workload has spent what it prepared (revoke's grants in a closed
// loop). The measured window then ends when the last worker stopped.
var errDone = errors.New("bench: the workload's prepared operations are spent")

// errAbort wraps an error that makes further operations pointless (501).
type errAbort struct{ error }

func notBuilt(err error) error {
	var se *statusError
	if errors.As(err, &se) && se.status == 501 {
		return errAbort{fmt.Errorf("%s %s answers 501 not_implemented: this server does not have that route yet", se.method, se.path)}
	}
	return nil
}

// loadResult is what drive measured.
type loadResult struct {
	hist    Histogram
	ops     int64
	items   int64
	retries int64
	errs    map[string]int64
	elapsed time.Duration
	cpu     time.Duration // server CPU over the measured window
	proc    procSample    // server at the end
	sampled bool
	abort   error
}

// drive runs op on e.clients workers: in a closed loop (each worker sends its
// next request when the last one answered), or, with a rate > 0 (operations per second), in an open loop
// where operation i is due at start + i/rate whatever happened before, and its
// latency counts from that due time — queueing in the server or in the
// generator shows up instead of slowing the schedule (no coordinated omission).
func drive(ctx context.Context, e *env, mk func(w *worker) opFunc, rate float64) loadResult {
	open := rate > 0
	o := e.o
	n := max(e.clients, 1)
	workers := make([]*worker, n)
	for i := range workers {
		workers[i] = &worker{id: i, e: e, c: e.clientFor(i), errs: map[string]int64{}}
	}
	ops := make([]opFunc, n)
	for i, w := range workers {
		ops[i] = mk(w)
	}
	start := time.Now()
	from := start.Add(o.Warmup)
	end := from.Add(o.Duration)
	var sched *schedule
	if open {
		sched = newSchedule(start, rate)
	}
	var abort atomic.Pointer[error]
	var cpuFrom procSample
	var cpuOK atomic.Bool
	stopSampler := make(chan struct{})
	var samplerDone sync.WaitGroup
	if e.serverPID > 0 {
		samplerDone.Add(1)
		go func() {
			defer samplerDone.Done()
			select {
			case <-time.After(time.Until(from)):
				if s, err := sampleProc(e.serverPID); err == nil {
					cpuFrom = s
					cpuOK.Store(true)
				}
			case <-stopSampler:
			}
		}()
	}
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := ops[i]
			for ctx.Err() == nil && abort.Load() == nil {
				var due time.Time
				if open {
					var ok bool
					due, ok = sched.next(end)
					if !ok {
						return
					}
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					}
				} else {
					due = time.Now()
					if !due.Before(end) {
						return
					}
				}
				items, err := op(ctx, w)
				done := time.Now()
				if err != nil {
					if errors.Is(err, errDone) {
						return // the workload's prepared operations are spent
					}
					var ab errAbort
					if errors.As(err, &ab) {
						abort.CompareAndSwap(nil, &ab.error)
						return
					}
					if ctx.Err() != nil {
						return
					}
					if !due.Before(from) {
						w.countErr(err)
					}
					continue
				}
				if !due.Before(from) {
					w.hist.Record(done.Sub(due))
					w.ops++
					w.items += int64(items)
				}
			}
		}()
	}
	wg.Wait()
	finished := time.Now()
	close(stopSampler)
	samplerDone.Wait()
	var r loadResult
	r.errs = map[string]int64{}
	for _, w := range workers {
		r.hist.Merge(&w.hist)
		r.ops += w.ops
		r.items += w.items
		r.retries += w.retries
		for k, v := range w.errs {
			r.errs[k] += v
		}
	}
	r.elapsed = max(finished.Sub(from), time.Millisecond)
	if cpuOK.Load() {
		if s, err := sampleProc(e.serverPID); err == nil {
			r.cpu, r.proc, r.sampled = s.cpu-cpuFrom.cpu, s, true
		}
	}
	if p := abort.Load(); p != nil {
		r.abort = *p
	}
	return r
}

// fill turns a load result into the report's fields.
func (r *loadResult) fill(res *Result) {
	res.Seconds = r.elapsed.Seconds()
	res.Ops = r.ops
	res.OpsPerSec = float64(r.ops) / r.elapsed.Seconds()
	if r.ops > 0 && r.items != r.ops {
		res.ItemsPerOp = float64(r.items) / float64(r.ops)
		res.ItemsPerSec = float64(r.items) / r.elapsed.Seconds()
	}
	res.Latency = latencyOf(&r.hist)
	if len(r.errs) > 0 {
		res.Errors = r.errs
	}
	res.Retries = r.retries
	if r.sampled {
		s := &ServerStats{PeakRSSMB: float64(r.proc.hwmKB) / 1024, RSSMB: float64(r.proc.rssKB) / 1024,
			CPUCores: r.cpu.Seconds() / r.elapsed.Seconds()}
		if r.ops > 0 {
			s.CPUMicrosPerOp = float64(r.cpu.Microseconds()) / float64(r.ops)
			if r.items != r.ops && r.items > 0 {
				s.CPUMicrosPerItem = float64(r.cpu.Microseconds()) / float64(r.items)
			}
		}
		res.Server = s
	}
	if r.abort != nil {
		res.Error = r.abort.Error()
	}
}

func latencyOf(h *Histogram) Latency {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
	return Latency{P50: ms(h.Quantile(0.5)), P90: ms(h.Quantile(0.9)), P99: ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)), Max: ms(h.Max()), Mean: ms(h.Mean())}
}
