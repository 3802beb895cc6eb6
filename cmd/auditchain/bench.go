package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/bench"
	"github.com/auditchain/auditchain/internal/config"
)

// benchCmd is `auditchain bench [flags] WORKLOAD…` (docs/bench.md).
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "")
	var o bench.Options
	var wrap string
	var serverArgs multiFlag
	fs.StringVar(&o.URL, "url", "", "target running server(s), comma-separated (default: start one on a temporary SQLite database per run)")
	fs.StringVar(&o.DB, "db", "", "store: with --url the server's (bench accounts are created there by admin create-account); without, the started server's")
	fs.StringVar(&o.Exe, "server-exe", "", "the auditchain binary run as the server and as admin (default: $"+bench.ServerExeEnv+", else this one)")
	fs.StringVar(&o.MailSink, "mail-sink", "", "address of the generator's SMTP sink for sign-in codes (default: a free loopback port given to the started server; with --url: required by otp-verify and --session)")
	fs.StringVar(&o.AccountFile, "account-file", "", "with --db: keep the prefilled account here; --prefill 0 with the same file measures its chain again")
	fs.IntVar(&o.ServerPID, "server-pid", 0, "with --url: PID of a server on this machine, to report its CPU and RSS")
	fs.StringVar(&wrap, "server-wrap", "", "command prefix for the started server, e.g. a strace fsync-delay recipe")
	fs.Var(&serverArgs, "server-arg", "extra flag for the started server (repeatable)")
	config.DurationVar(fs, &o.Duration, "duration", 10*time.Second, "measured time per run")
	config.DurationVar(fs, &o.Warmup, "warmup", time.Second, "unmeasured time before each run's measurement")
	fs.Float64Var(&o.Rate, "rate", 0, "open loop: operations per second, latency from each one's due time (0: closed loop)")
	fs.IntVar(&o.Clients, "clients", 0, "concurrent clients (default per workload: 64; batch 4; search 16; heal-scan 1)")
	fs.IntVar(&o.Accounts, "accounts", 0, "accounts (default 100 where the workload uses several)")
	fs.IntVar(&o.Prefill, "prefill", -1, "events prefilled on the first account (-1: 100000 for search, heal-scan and restart, 0 for sequential and hot; 0 with --account-file: its saved chain)")
	fs.IntVar(&o.FillOthers, "fill-others", 0, "events on every account but the first, by batches")
	fs.IntVar(&o.BatchSize, "batch-size", 500, "events per batch call (batch, prefill)")
	fs.IntVar(&o.Listeners, "listeners", 5000, "SSE streams (listeners)")
	fs.IntVar(&o.Events, "events", 100, "events appended to the listeners")
	fs.BoolVar(&o.Signed, "signed", false, "prefill Ed25519-signed events (heal-scan, search)")
	fs.IntVar(&o.Runs, "runs", 1, "repeat each workload; report the medians")
	fs.IntVar(&o.Restarts, "restarts", 5, "server restarts measured per run (restart)")
	fs.IntVar(&o.Grants, "grants", 10000, "grants created on the account (console)")
	config.DurationVar(fs, &o.Live, "live", 30*time.Second, "console: how long events are appended at --rate (default 200/s) with the activity stream open (0: skip)")
	fs.BoolVar(&o.Session, "session", false, "authenticate with a session cookie (each account signed in by one-time code) instead of the API key")
	fs.BoolVar(&o.SpreadRequests, "spread-requests", false, "with several --url targets: send each append to a target picked at random, not each client to one (no account affinity)")
	fs.StringVar(&o.HookExe, "hook-exe", "", "the auditchain binary the hook workload runs as the hook (default: this one)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: auditchain bench [flags] WORKLOAD…\n\nworkloads:\n%s\nflags:\n", bench.WorkloadHelp())
		fs.PrintDefaults()
	}
	// Flags may follow workload names.
	var err error
	if o.Workloads, err = parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if len(o.Workloads) == 0 {
		fs.Usage()
		return usagef("bench needs at least one workload")
	}
	o.ServerWrap = strings.Fields(wrap)
	o.ServerArgs = serverArgs
	if !*quiet {
		o.Progress = stderr
	}
	results, err := bench.Run(ctx, o)
	if len(results) > 0 {
		var werr error
		if *asJSON {
			werr = bench.WriteJSON(stdout, results)
		} else {
			werr = bench.WriteTable(stdout, results)
		}
		if err == nil {
			err = werr
		}
	}
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Error != "" {
			return fmt.Errorf("workload %s failed: %s", r.Workload, r.Error)
		}
	}
	return nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
