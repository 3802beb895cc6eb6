package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	openapi "github.com/auditchain/auditchain/api"
	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/buildinfo"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/httpapi"
	"github.com/auditchain/auditchain/internal/legal"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

const usage = `usage: auditchain <command> [flags]

commands:
  serve                 run the HTTP API (flags read AUDITCHAIN_*; see serve --help)
  admin create-account  create an account and its first unscoped key
  admin create-key      create another key for an account
  admin announce        mail a mandatory notice (breaking_change.announce) to every account with an email
  verify token FILE --service-key KEY    check a delegation token offline
  verify export FILE --service-key KEY   check an exported chain offline
  bench [flags] WORKLOAD…                load generator (docs/bench.md)
  mcp [--url URL] [--api-key KEY]        serve auditchain's tools to an agent over stdio (docs/mcp.md)
  mcp proxy [--subagent NAME] -- COMMAND [ARGS…]   gate and record every tool call of an MCP server
  hook --host HOST                       gate and record an agent host's tool call (docs/hooks.md)
  hook flush | install | uninstall | doctor  send spooled events; set a host up, take it out, check it
  events    append | search | get | tail            the record (client verbs: --url, --api-key
  grants    create | status | use | revoke | list     the gate            or AUDITCHAIN_URL and
  proposals list | get | create | ratify | enact | reject  governance     AUDITCHAIN_API_KEY;
  chain     tip | verify | proof | export | public-key                    --json for scripts)
  keys      create | list | revoke
  machines  keygen | register | list                  signing keys
  version               print the module version and the commit it was built from
  help [COMMAND…]       print this, or a command's help

Every command and group takes -h or --help. Exit codes: 0 success, 1 error,
2 usage error, 3 the gate said no (docs/cli.md, docs/cli-verbs.md).
`

// run is the whole program; main only supplies the process's context, arguments,
// environment and streams, so tests can run it in-process. Help asked for
// (-h, --help, help) goes to stdout and answers nil.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, errHelpShown) {
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	switch args[0] {
	case "help", "-h", "--help", "-help":
		if len(args) > 1 && args[0] == "help" {
			// `auditchain help admin create-key` is `auditchain admin create-key --help`.
			return dispatch(ctx, append(args[1:len(args):len(args)], "--help"), getenv, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return errHelpShown
	}
	cmd, ok := commands(ctx, getenv, stdout, stderr)[args[0]]
	if !ok {
		fmt.Fprint(stderr, usage)
		return usagef("unknown command %q", args[0])
	}
	return cmd(args[1:])
}

// commands is every top-level command but help, by name.
func commands(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) map[string]func(args []string) error {
	return map[string]func([]string) error{
		"serve":     func(args []string) error { return serve(ctx, args, getenv, stdout, stderr) },
		"admin":     func(args []string) error { return adminCmd(ctx, args, getenv, stdout, stderr) },
		"verify":    func(args []string) error { return verifyCmd(ctx, args, stdout, stderr) },
		"bench":     func(args []string) error { return benchCmd(ctx, args, stdout, stderr) },
		"mcp":       func(args []string) error { return mcpCmd(ctx, args, getenv, stdout, stderr) },
		"hook":      func(args []string) error { return hookCmd(ctx, args, getenv, os.Stdin, stdout, stderr) },
		"events":    func(args []string) error { return eventsCmd(ctx, args, getenv, stdout, stderr) },
		"grants":    func(args []string) error { return grantsCmd(ctx, args, getenv, stdout, stderr) },
		"proposals": func(args []string) error { return proposalsCmd(ctx, args, getenv, stdout, stderr) },
		"chain":     func(args []string) error { return chainCmd(ctx, args, getenv, stdout, stderr) },
		"keys":      func(args []string) error { return keysCmd(ctx, args, getenv, stdout, stderr) },
		"machines":  func(args []string) error { return machinesCmd(ctx, args, getenv, stdout, stderr) },
		"version": func(args []string) error {
			if _, err := parseFlags(newFlags("version", "usage: auditchain version\n"), args, stdout, stderr); err != nil {
				return err
			}
			fmt.Fprintln(stdout, buildinfo.Read().Long())
			return nil
		},
	}
}

// group runs the subcommand args[0] of a command group (admin, verify):
// without one, or with an unknown one, it prints the group's usage on stderr
// (a usage error); -h, --help or help print it on stdout, and `help SUB`
// shows SUB's help.
func group(name, groupUsage string, args []string, stdout, stderr io.Writer, subs map[string]func([]string) error) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, groupUsage)
		return usagef("%s needs a subcommand", name)
	}
	switch args[0] {
	case "-h", "--help", "-help":
		fmt.Fprint(stdout, groupUsage)
		return errHelpShown
	case "help":
		if len(args) == 1 {
			fmt.Fprint(stdout, groupUsage)
			return errHelpShown
		}
		return group(name, groupUsage, []string{args[1], "--help"}, stdout, stderr, subs)
	}
	sub, ok := subs[args[0]]
	if !ok {
		fmt.Fprint(stderr, groupUsage)
		return usagef("unknown %s command %q (%s commands: %s)", name, args[0], name, strings.Join(slices.Sorted(maps.Keys(subs)), ", "))
	}
	return sub(args[1:])
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var out bytes.Buffer
	cfg, err := config.Parse(args, getenv, &out)
	if errors.Is(err, flag.ErrHelp) {
		stdout.Write(out.Bytes())
		return errHelpShown
	}
	stderr.Write(out.Bytes())
	if err != nil {
		return usageError{err}
	}
	if err := checkStore(cfg.DB, cfg.CreateDB, true); err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	mailer, err := mail.New(cfg.Mail, mail.Options{From: cfg.MailFrom, Log: log})
	if err != nil {
		return fmt.Errorf("--mail: %w", err)
	}
	docs := legal.Default()
	if cfg.LegalDir != "" {
		if docs, err = legal.Load(cfg.LegalDir); err != nil {
			return fmt.Errorf("--legal-dir: %w", err)
		}
	}

	st, err := store.OpenWith(ctx, cfg.DB, store.Options{MaxConns: cfg.DBMaxConns})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	release, err := st.LockServing()
	if err != nil {
		return err
	}
	defer release()

	doc := openapi.OpenAPIJSON()
	a := app.New(st, cfg, log)
	defer a.Close()
	a.Mail, a.Legal = mailer, docs
	if err := a.LoadServiceKey(ctx); err != nil {
		return err
	}
	busCtx, stopBus := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBus()
	if err := a.StartBus(busCtx, cfg.DB); err != nil {
		return fmt.Errorf("stream bus: %w", err)
	}
	// Notification email goes out after each commit that queues some, and
	// every minute for rows a crash or another replica left queued.
	mailCtx, stopMail := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMail()
	go a.RunMailer(mailCtx, app.NewRealTicker(time.Minute))
	// The usage meter's counts go to the store every few seconds, and once
	// more on the way out (after the server stopped taking requests).
	usageCtx, stopUsage := context.WithCancel(context.WithoutCancel(ctx))
	usageDone := make(chan struct{})
	go func() {
		defer close(usageDone)
		a.RunUsageFlusher(usageCtx, app.NewRealTicker(app.UsageFlushInterval))
	}()
	defer func() { stopUsage(); <-usageDone }()
	// The operator jobs on their cadence (CONTRACT.md "Operator jobs"),
	// unless an external cron calls the routes (--scheduler=false).
	if cfg.Scheduler {
		jobsCtx, stopJobs := context.WithCancel(context.WithoutCancel(ctx))
		a.StartJobs(jobsCtx)
		defer func() { stopJobs(); a.WaitJobs() }()
	}
	handler := httpapi.NewServer(a, log, doc)

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		// Streams clear their own write deadline (SSE must not be cut).
		WriteTimeout:   60 * time.Second,
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// Requests must not inherit the signal's cancellation: on SIGTERM
		// in-flight requests finish (Shutdown waits for them) and streams end
		// through handler.Close; a cancelled request could otherwise get no answer.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	srv.RegisterOnShutdown(handler.Close)
	if err := hintFirstAccount(ctx, st, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "auditchain listening on http://%s\n", ln.Addr())
	fmt.Fprintf(stdout, "auditchain data in %s\n", st.Location)
	log.Info("serving", "addr", ln.Addr().String(), "store", string(st.Dialect), "env", cfg.Env)

	if cfg.DebugAddr != "" {
		// Profiling stays off the public listener (docs/reliability.md).
		dbg := http.NewServeMux()
		dbg.HandleFunc("/debug/pprof/", pprof.Index)
		dbg.HandleFunc("/debug/pprof/profile", pprof.Profile)
		dbg.HandleFunc("/debug/pprof/trace", pprof.Trace)
		dsrv := &http.Server{Addr: cfg.DebugAddr, Handler: dbg, ReadHeaderTimeout: 10 * time.Second}
		go dsrv.ListenAndServe()
		defer dsrv.Close()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

const adminUsage = `usage: auditchain admin <command> [flags]

commands:
  create-account  create an account and its first unscoped key
  create-key      create another key for an account
  announce        mail a mandatory notice to every account with an email

Each works on the store named by --db (default $AUDITCHAIN_DB, else
sqlite:./data/auditchain.db), also while the server runs on it, and names the
store it used on stderr. A sqlite: file that does not exist is refused (serve
creates the default one) unless --create-db. "auditchain admin COMMAND --help"
shows its flags.
`

// checkStore refuses a sqlite: store whose file does not exist, naming it: a
// typo in --db (./data/auditchain.bd) would otherwise start an empty store,
// or hand out a key that the server running on the real one refuses. The
// file is created by serve on the default store (its ./data directory too,
// so a fresh clone starts with no step before), and by any command given
// --create-db (docs/decisions/first-contact.md).
func checkStore(dsn string, create, serving bool) error {
	path, ok := strings.CutPrefix(dsn, "sqlite:")
	if !ok {
		return nil
	}
	switch _, err := os.Stat(path); {
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sqlite: %w", err)
	}
	isDefault := filepath.Clean(path) == filepath.Clean(strings.TrimPrefix(config.DefaultDB, "sqlite:"))
	if create || (serving && isDefault) {
		if isDefault {
			return os.MkdirAll(filepath.Dir(path), 0o750)
		}
		return nil // the store creates the file; its directory must exist
	}
	abs, _ := filepath.Abs(path)
	hint := "check --db (or AUDITCHAIN_DB) for a typo, or add --create-db to start a new, empty store there"
	if isDefault && !serving {
		hint = "start `auditchain serve` once to create the default store, or add --create-db"
	}
	return fmt.Errorf("no store at %s: %s does not exist; %s", dsn, abs, hint)
}

func adminCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	// newAdmin is an admin command's flags with --db; open opens that store
	// and names it on stderr (stdout stays the command's JSON).
	newAdmin := func(name, synopsis string) (*flag.FlagSet, func() (*app.App, func(), error)) {
		fs := newFlags("admin "+name, synopsis)
		db := new(string)
		config.SecretVar(fs, db, "db", envOr(getenv, "AUDITCHAIN_DB", config.DefaultDB), config.DefaultDB, "store: sqlite:PATH or a postgres:// URL (env AUDITCHAIN_DB)")
		createDB := fs.Bool("create-db", false, "create the sqlite: store if its file does not exist")
		return fs, func() (*app.App, func(), error) {
			if err := checkStore(*db, *createDB, false); err != nil {
				return nil, nil, err
			}
			st, err := store.Open(ctx, *db)
			if err != nil {
				return nil, nil, fmt.Errorf("open store %s: %w", store.Redacted(*db), err)
			}
			fmt.Fprintf(stderr, "auditchain admin %s: store %s\n", name, st.Location)
			cfg := config.Config{EpochAnchor: domain.DefaultEpochAnchor}
			a := app.New(st, cfg, slog.New(slog.NewTextHandler(stderr, nil)))
			return a, func() { a.Close(); st.Close() }, nil
		}
	}
	// noArgs parses flags that take no positional argument.
	noArgs := func(fs *flag.FlagSet, args []string) error {
		rest, err := parseFlags(fs, args, stdout, stderr)
		if err == nil && len(rest) > 0 {
			return usagef("admin %s: unexpected arguments %q", fs.Name(), rest)
		}
		return err
	}
	return group("admin", adminUsage, args, stdout, stderr, map[string]func([]string) error{
		"create-account": func(args []string) error {
			fs, open := newAdmin("create-account", "usage: auditchain admin create-account --email EMAIL [--admin] [--db DSN]\n       auditchain admin create-account --no-email [--db DSN]\n\nPrints the account and its first key (unscoped) as JSON; the token (api_key) is shown once.\n")
			email := fs.String("email", "", "account email")
			isAdmin := fs.Bool("admin", false, "make the account an administrator")
			noEmail := fs.Bool("no-email", false, "create an account without an email")
			if err := noArgs(fs, args); err != nil {
				return err
			}
			if *email == "" && !*noEmail {
				return usagef("create-account needs --email EMAIL or --no-email")
			}
			if *email != "" && *noEmail {
				return usagef("--email and --no-email exclude each other")
			}
			a, closeStore, err := open()
			if err != nil {
				return err
			}
			defer closeStore()
			acct, key, err := a.CreateAccount(ctx, app.AccountRequest{Email: *email, NoEmail: *noEmail, Admin: *isAdmin})
			if err != nil {
				return explain(err)
			}
			return printJSON(stdout, accountCreated{UserID: acct.UserID, Email: acct.Email, KeyCreated: httpapi.KeyCreatedView(key)})
		},
		"create-key": func(args []string) error {
			fs, open := newAdmin("create-key", "usage: auditchain admin create-key --user-id UUID [--scopes S,…] [--machine M] [--label L] [--expires-at T] [--db DSN]\n\nPrints the key as POST /v1/keys answers it; the token (api_key) is shown once.\n")
			userID := fs.String("user-id", "", "account user_id (UUID)")
			scopes := fs.String("scopes", "", "comma-separated scopes (empty: unscoped)")
			machine := fs.String("machine", "", "machine label")
			label := fs.String("label", "", "key label")
			expires := fs.String("expires-at", "", "expiry timestamp (RFC 3339)")
			if err := noArgs(fs, args); err != nil {
				return err
			}
			if *userID == "" {
				return usagef("create-key needs --user-id UUID")
			}
			req := app.KeyRequest{Machine: *machine, Label: *label}
			if *scopes != "" {
				req.Scopes = strings.Split(*scopes, ",")
			}
			if *expires != "" {
				t, err := domain.ParseTimestamp(*expires)
				if err != nil {
					return usagef("--expires-at: %q is not an RFC 3339 timestamp", *expires)
				}
				req.ExpiresAt = &t
			}
			a, closeStore, err := open()
			if err != nil {
				return err
			}
			defer closeStore()
			key, err := a.CreateKey(ctx, *userID, req)
			if err != nil {
				return explain(err)
			}
			return printJSON(stdout, httpapi.KeyCreatedView(key))
		},
		"announce": func(args []string) error {
			fs, open := newAdmin("announce", "usage: auditchain admin announce --subject S --body-file F [--type T] [--mail M] [--limit-per-day N] [--db DSN]\n")
			typ := fs.String("type", domain.NoticeBreakingChange, "notice type (a mandatory one)")
			subject := fs.String("subject", "", "email subject (one line)")
			bodyFile := fs.String("body-file", "", "file holding the plain-text body")
			mailSpec := new(string)
			config.SecretVar(fs, mailSpec, "mail", envOr(getenv, "AUDITCHAIN_MAIL", mail.ProviderLog), mail.ProviderLog, "mail transport: log, outbox:DIR or smtp://user:pass@host:port (env AUDITCHAIN_MAIL)")
			mailFrom := fs.String("mail-from", getenv("AUDITCHAIN_MAIL_FROM"), "sender address")
			defPerDay := app.DefaultAnnounceLimitPerDay
			if v := getenv("AUDITCHAIN_ANNOUNCE_LIMIT_PER_DAY"); v != "" {
				var err error
				if defPerDay, err = strconv.Atoi(v); err != nil {
					return usagef("AUDITCHAIN_ANNOUNCE_LIMIT_PER_DAY: %v", err)
				}
			}
			perDay := fs.Int("limit-per-day", defPerDay, "announcements this deployment may send a day, each to every account (env AUDITCHAIN_ANNOUNCE_LIMIT_PER_DAY)")
			if err := noArgs(fs, args); err != nil {
				return err
			}
			if *subject == "" || *bodyFile == "" {
				return usagef("announce needs --subject S and --body-file F")
			}
			if *perDay < 1 {
				return usagef("--limit-per-day must be at least 1")
			}
			body, err := os.ReadFile(*bodyFile)
			if err != nil {
				return fmt.Errorf("--body-file: %w", err)
			}
			log := slog.New(slog.NewTextHandler(stderr, nil))
			mailer, err := mail.New(*mailSpec, mail.Options{From: *mailFrom, Log: log})
			if err != nil {
				return fmt.Errorf("--mail: %w", err)
			}
			a, closeStore, err := open()
			if err != nil {
				return err
			}
			defer closeStore()
			a.Mail = mailer
			a.Cfg.AnnounceLimitPerDay = *perDay
			n, err := a.Announce(ctx, *typ, *subject, string(body))
			if err != nil {
				return explain(err)
			}
			st := mailer.Stats()
			if err := printJSON(stdout, map[string]any{"type": *typ, "accounts_notified": n, "emails_sent": st.Sent, "emails_failed": st.Failed}); err != nil {
				return err
			}
			// docs/cli.md: nobody to mail is not a failure; mail that went
			// to nobody is (exit 1), some failures are said on stderr.
			switch {
			case n == 0:
				fmt.Fprintln(stderr, "auditchain admin announce: no account has an email: nothing was mailed")
			case st.Sent == 0 && st.Failed > 0:
				return fmt.Errorf("admin announce: no email went out: all %d failed (the notices are recorded, their email rows failed); check --mail and announce again", st.Failed)
			case st.Failed > 0:
				fmt.Fprintf(stderr, "auditchain admin announce: %d of %d emails failed; their rows are failed (POST /v1/notifications/{id}/redeliver sends one again)\n", st.Failed, st.Sent+st.Failed)
			}
			return nil
		},
	})
}

// accountCreated is what admin create-account prints: the account's user_id
// and email beside its first key as POST /v1/keys answers it (so the key's
// id is "id", as everywhere in the API, and the token "api_key").
type accountCreated struct {
	UserID string  `json:"user_id"`
	Email  *string `json:"email"`
	api.KeyCreated
}

// hintFirstAccount tells, on a store without any account, how to create the
// first one. serve never creates an account or prints a key itself
// (docs/decisions/first-account.md).
func hintFirstAccount(ctx context.Context, st *store.Store, stdout io.Writer) error {
	ids, err := st.AccountIDs(ctx, "", 1)
	if err != nil || len(ids) > 0 {
		return err
	}
	db := st.Location
	if st.Dialect == store.Postgres {
		db = "'postgres://…'" // the same URL as serve's --db; Location has no credentials
	}
	fmt.Fprintf(stdout, "auditchain has no account yet; create the first (its API key is shown once) with:\n"+
		"  auditchain admin create-account --db %s --email you@example.com\n", db)
	return nil
}

// explain turns a domain error into a one-line message for the terminal.
func explain(err error) error {
	var de *domain.Error
	if errors.As(err, &de) {
		msg := de.Detail
		for _, f := range de.Fields {
			msg = f.Field + ": " + f.Message
		}
		return fmt.Errorf("%s: %s", de.Code, msg)
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// envOr reads an environment variable, or def when it is unset or empty.
func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
