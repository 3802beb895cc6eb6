// Package bench is `auditchain bench`: a load generator that runs named
// workloads against a running server or one it starts itself, and reports
// throughput, latency percentiles, errors by status, and — when the server is
// local — its CPU time per operation and peak memory (docs/performance.md).
//
// It is a client: it talks to the server only through the public routes,
// runs the server binary as a child process (serve, and admin create-account
// for the accounts), and imports no server package (TestBenchImportsNoServer).
package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Options configure one `auditchain bench` invocation.
type Options struct {
	// URL targets a running server; empty starts a local one (Exe serve).
	URL string
	// DB is the store: with URL, the running server's (the accounts are
	// created there by Exe admin create-account); without, the local
	// server's (empty: a fresh SQLite file in a temporary directory for
	// every run).
	DB string
	// Exe is the auditchain binary run as the local server and as admin
	// (empty: the ServerExeEnv environment variable, else this executable).
	Exe string
	// MailSink is the address of the generator's SMTP sink, which reads the
	// sign-in codes the server mails (otp-verify, Session). Empty: a free
	// loopback port, given to the started server as --mail; with URL the
	// server must already mail to it (so it is required there).
	MailSink string
	// AccountFile, with DB, keeps the account whose chain was prefilled: a
	// later run with Prefill 0 and the same file measures that chain again.
	AccountFile string
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
	// FillOthers puts this many events on every account but the first
	// before measuring (growth with the number of accounts).
	FillOthers int
	BatchSize  int  // events per batch call
	Listeners  int  // SSE connections (listeners)
	Events     int  // events delivered to the listeners
	Signed     bool // prefill signed events (heal-scan, search)
	Runs       int  // repeat each workload; the report holds medians
	Restarts   int  // server restarts measured per run (restart)
	// Grants are the grants the console workload creates (default 10,000).
	Grants int
	// Live is how long the console workload appends with the activity
	// stream open (0: no live step).
	Live time.Duration
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
		return nil, errors.New("--url needs --db, the running server's store: the bench accounts are created there by auditchain admin create-account")
	}
	if o.AccountFile != "" && o.DB == "" {
		return nil, errors.New("--account-file needs --db: it names an account of that store")
	}
	if o.Exe == "" {
		o.Exe = os.Getenv(ServerExeEnv)
	}
	if o.Exe == "" {
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

// account is one bench account: its credential (its first key, or with
// --session its session token), and extra keys when asked for.
type account struct {
	userID string
	keyID  string
	key    string
	keys   []string
	email  string // with --session
	// session is a saved session token (--account-file, console).
	session string
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
	prefilled bool // the first account is a saved one whose chain is already there
	db        string
	sink      *mailSink    // the SMTP sink, for workloads that sign in
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
	if w.ownServer {
		res, err := w.run(ctx, e, res)
		if err != nil && res.Error == "" {
			res.Error = err.Error()
		}
		return res
	}

	if w.prepServer != nil && o.URL != "" {
		return fail(fmt.Errorf("%s starts its own server (and what it needs beside it): drop --url", w.name))
	}
	db := o.DB
	var tmp string
	if o.URL == "" && (db == "" || w.prepServer != nil) {
		var err error
		tmp, err = os.MkdirTemp("", "auditchain-bench-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(tmp)
		if db == "" {
			db = "sqlite:" + filepath.Join(tmp, "bench.db")
		}
	}
	e.db = db
	var serverArgs []string
	if w.signsIn || o.Session {
		if o.URL != "" && o.MailSink == "" {
			return fail(errors.New("sign-in codes are mailed to the generator's SMTP sink: with --url give --mail-sink ADDR and run the server with --mail smtp://ADDR and the --otp-limit-* flags lifted"))
		}
		sink, err := startMailSink(cmp.Or(o.MailSink, "127.0.0.1:0"))
		if err != nil {
			return fail(err)
		}
		defer sink.close()
		e.sink, serverArgs = sink, sink.serverArgs()
	}
	fmt.Fprintf(o.Progress, "bench: creating %d accounts\n", nAccounts)
	var emailOf func(int) string
	if o.Session || w.signsIn {
		emailOf = func(i int) string { return benchEmail(e.prefix+"s", i) }
	}
	accts, err := createAccounts(ctx, o.Exe, db, nAccounts, emailOf)
	if err != nil {
		return fail(fmt.Errorf("create bench accounts in %s: %w", db, err))
	}
	e.accounts = accts
	if err := e.reuseSavedAccount(&res); err != nil {
		return fail(err)
	}
	sqlitePath, isSQLite := strings.CutPrefix(db, "sqlite:")
	sizeBefore := int64(0)
	if isSQLite {
		sizeBefore = sqliteBytes(sqlitePath)
	}

	base := o.URL
	var srv *localServer
	if base == "" {
		logDir := tmp
		if logDir == "" {
			logDir = os.TempDir()
		}
		e.logDir = logDir
		// The workload's serve flags first: --server-arg may override them.
		args := append(serverArgs, w.serverArgs...)
		if w.prepServer != nil {
			more, stop, err := w.prepServer(ctx, e, tmp)
			if err != nil {
				return fail(err)
			}
			defer func() {
				if err := stop(); err != nil && res.Error == "" {
					res.Error = err.Error()
				}
			}()
			args = append(args, more...)
		}
		args = append(args, o.ServerArgs...)
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
	if err := e.prepareAccounts(ctx); err != nil {
		res.Error = err.Error()
	} else {
		if e.prefilled {
			res.Prefill = e.prefill
		}
		res, err = w.run(ctx, e, res)
		if err != nil {
			res.Error = err.Error()
		}
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
