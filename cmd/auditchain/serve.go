package main

// `auditchain serve`: the HTTP API on one store, with its background loops.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"time"

	openapi "github.com/auditchain/auditchain/api"
	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/httpapi"
	"github.com/auditchain/auditchain/internal/legal"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/store"
)

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var out bytes.Buffer
	cfg, err := config.Parse(args, getenv, &out)
	if errors.Is(err, flag.ErrHelp) {
		stdout.Write(out.Bytes())
		return errHelpShown
	}
	var fe *config.FlagError
	if errors.As(err, &fe) {
		return usageError{flagProblem(fe.Flags, fe.Err)}
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
	serviceKey, err := app.LoadServiceKey(ctx, st, cfg.ServiceKeyFile, rand.Reader)
	if err != nil {
		return err
	}
	if err := checkPinState(ctx, st, serviceKey.Public().(ed25519.PublicKey), cfg.PinState); err != nil {
		return err
	}
	a := app.New(app.Deps{Store: st, Config: cfg, Log: log, ServiceKey: serviceKey, Mail: mailer, Legal: docs})
	defer a.Close()
	// The background loops run until a.Close, which stops them (after the
	// HTTP server, deferred later, has finished its requests), each in turn.
	// The operator jobs run unless an external cron calls the routes
	// (--scheduler=false).
	if err := a.Start(ctx, app.Loops{Bus: cfg.DB, MailSweep: app.NewRealTicker(time.Minute),
		UsageFlush: app.NewRealTicker(app.UsageFlushInterval), Scheduler: cfg.Scheduler}); err != nil {
		return err
	}
	if len(cfg.Witnesses) > 0 {
		names := make([]string, len(cfg.Witnesses))
		for i, w := range cfg.Witnesses {
			names[i] = w.Name
		}
		if cfg.Scheduler {
			log.Info("witnesses: the witness job submits every account's newest block each minute", "witnesses", names, "quorum", cfg.WitnessQuorum)
		} else {
			// The witness job has no cron route: only the scheduler runs it.
			log.Warn("--witness is set but --scheduler=false: nothing submits checkpoints to the witnesses", "witnesses", names)
		}
	}
	handler := httpapi.NewServer(a, cfg, log, doc)

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	// Streams clear their own write deadline (SSE must not be cut) and end
	// through handler.Close on shutdown.
	srv := newHTTPServer(ctx, handler, log, listenerLimits{read: 60 * time.Second, write: 60 * time.Second, maxHeaderBytes: 64 << 10})
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
	return serveUntilDone(ctx, srv, ln, log, cfg.ShutdownTimeout)
}

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

// hintFirstAccount tells, on a store without any account, how to create the
// first one. serve never creates an account or prints a key itself
// (docs/decisions/first-account.md).
func hintFirstAccount(ctx context.Context, st *store.Store, stdout io.Writer) error {
	ids, err := st.AccountIDs(ctx, "", 1)
	if err != nil || len(ids) > 0 {
		return err
	}
	fmt.Fprintf(stdout, "auditchain has no account yet; create the first (its API key is shown once) with:\n"+
		"  auditchain admin create-account --db %s --email you@example.com\n", st.DBFlag())
	return nil
}
