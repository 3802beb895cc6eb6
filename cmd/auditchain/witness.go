package main

// `auditchain witness keygen|serve|evidence`: a C2SP tlog-witness anyone can run
// beside (not inside) an auditchain service (docs/witness.md).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/auditchain/auditchain/internal/witness"
)

const witnessUsage = `usage: auditchain witness <command> [flags]

commands:
  keygen --out FILE --name NAME   make a witness key: FILE gets the secret key, stdout its vkey
  serve --key FILE --db PATH [--listen ADDR] [--log VKEY]… [--log-file FILE] [--auditchain-service KEY]…
                                  cosign the checkpoints of those logs (C2SP tlog-witness)
  evidence --db PATH              the split views it refused: two roots at one size, both log-signed

A witness keeps, per log, the latest checkpoint it cosigned, and cosigns a new
one only when the log's key signed it and a consistency proof shows it extends
that one. docs/witness.md says what it checks, what it keeps and what it proves.
`

const witnessKeygenUsage = `usage: auditchain witness keygen --out FILE --name NAME

Makes an Ed25519 witness key named NAME (a schema-less URL that names the
witness, like witness.example.org/w1). FILE (created, readable by you only)
gets the secret signer key; stdout gets the verifier key (vkey, of the
cosignature/v1 type) to give the logs and the auditors: a service's
--witness URL=VKEY, verify export --witness VKEY.
`

const witnessServeUsage = `usage: auditchain witness serve --key FILE --db PATH [--listen ADDR] [--log VKEY]… [--log-file FILE] [--auditchain-service KEY]…

Serves C2SP tlog-witness: POST /add-checkpoint (old size, consistency proof,
checkpoint; answers the cosignature lines, or 409 with the size it holds) and
GET /<sha256 of origin>/checkpoint (the latest it cosigned).

Which logs it witnesses:
  --log VKEY               a log whose origin is the key's name (repeatable)
  --log-file FILE          one "VKEY" or "ORIGIN VKEY" per line; # comments
  --auditchain-service KEY every account log of an auditchain service: any origin
                           auditchain/<uuid> signed by KEY, its service key (a vkey,
                           the standard base64 of GET /v1/delegation/public-key's
                           public_key, or a file holding either or that answer)

PATH must exist unless --create-db: a witness started on an empty state by a
typo would cosign a rolled-back log again.
`

const witnessEvidenceUsage = `usage: auditchain witness evidence --db PATH

Prints, one JSON object a line, oldest first, the checkpoints the witness
whose state is PATH refused because they have the size it last cosigned and
another root, although the log's key signed them (at most 100 a log, the
newest), each beside the checkpoint it had cosigned then: origin,
received_at, kind (same_size_other_root), tree_size, submitted, cosigned.
The two notes prove a split view by themselves to anyone with the log's
key. Reads PATH read-only: a serving witness may hold it. docs/witness.md.
`

// witnessCmd is the `auditchain witness` group.
func witnessCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return group("witness", witnessUsage, args, stdout, stderr, map[string]func([]string) error{
		"keygen":   func(args []string) error { return witnessKeygenCmd(args, stdout, stderr) },
		"serve":    func(args []string) error { return witnessServeCmd(ctx, args, getenv, stdout, stderr) },
		"evidence": func(args []string) error { return witnessEvidenceCmd(ctx, args, getenv, stdout, stderr) },
	})
}

func witnessEvidenceCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("witness evidence", witnessEvidenceUsage)
	db := fs.String("db", getenv("AUDITCHAIN_WITNESS_DB"), "the witness's state, a SQLite file of its own (env AUDITCHAIN_WITNESS_DB)")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if err := noPositional(rest); err != nil {
		return err
	}
	if *db == "" {
		return usagef("witness evidence needs --db PATH: the state witness serve keeps")
	}
	if _, err := os.Stat(*db); err != nil {
		return fmt.Errorf("witness evidence: %w", err)
	}
	evidence, err := witness.ReadEvidence(ctx, *db)
	if err != nil {
		return fmt.Errorf("witness evidence: %w", err)
	}
	enc := json.NewEncoder(stdout)
	for _, e := range evidence {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}

func witnessKeygenCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("witness keygen", witnessKeygenUsage)
	out := fs.String("out", "", "the file to create with the secret key")
	name := fs.String("name", "", "the witness's name (a schema-less URL, e.g. witness.example.org/w1)")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if err := noPositional(rest); err != nil {
		return err
	}
	if *out == "" || *name == "" {
		return usagef("witness keygen needs --out FILE and --name NAME")
	}
	skey, vkey, err := witness.GenerateKey(*name)
	if err != nil {
		return usageError{err}
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("witness keygen: %w", err)
	}
	_, err = fmt.Fprintln(f, skey)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("witness keygen: %w", err)
	}
	_, err = fmt.Fprintln(stdout, vkey)
	return err
}

func witnessServeCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("witness serve", witnessServeUsage)
	keyFile := fs.String("key", getenv("AUDITCHAIN_WITNESS_KEY"), "the witness key file (witness keygen) (env AUDITCHAIN_WITNESS_KEY)")
	db := fs.String("db", getenv("AUDITCHAIN_WITNESS_DB"), "the witness's state, a SQLite file of its own (env AUDITCHAIN_WITNESS_DB)")
	createDB := fs.Bool("create-db", false, "create the --db file if it does not exist")
	listen := fs.String("listen", envOr(getenv, "AUDITCHAIN_WITNESS_LISTEN", "127.0.0.1:8090"), "address to listen on (env AUDITCHAIN_WITNESS_LISTEN)")
	var logs, services multiFlag
	fs.Var(&logs, "log", "a log's verifier key; its name is the origin (repeatable)")
	logFile := fs.String("log-file", getenv("AUDITCHAIN_WITNESS_LOG_FILE"), `a file of logs, one "VKEY" or "ORIGIN VKEY" per line (env AUDITCHAIN_WITNESS_LOG_FILE)`)
	fs.Var(&services, "auditchain-service", "an auditchain service key: witness every auditchain/<uuid> it signs (repeatable)")
	logLevel := fs.String("log-level", envOr(getenv, "AUDITCHAIN_LOG_LEVEL", "info"), "debug, info, warn or error (env AUDITCHAIN_LOG_LEVEL)")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if err := noPositional(rest); err != nil {
		return err
	}
	if *keyFile == "" || *db == "" {
		return usagef("witness serve needs --key FILE and --db PATH")
	}
	signer, vkey, err := witness.ReadSigner(*keyFile)
	if err != nil {
		return fmt.Errorf("--key: %w", err)
	}
	trusted := witness.NewLogs()
	for _, v := range logs {
		if err := trusted.AddLog("", v); err != nil {
			return usagef("--log: %v", err)
		}
	}
	if *logFile != "" {
		if err := trusted.AddLogFile(*logFile); err != nil {
			return fmt.Errorf("--log-file: %w", err)
		}
	}
	for _, s := range services {
		pub, err := witness.ParseServiceKey(s)
		if err != nil {
			if pub, err = readServiceKey(s); err != nil {
				return usagef("--auditchain-service: %v", err)
			}
		}
		if err := trusted.AddService(pub); err != nil {
			return usagef("--auditchain-service: %v", err)
		}
	}
	if trusted.Len() == 0 {
		return usagef("witness serve needs a log to witness: --log VKEY, --log-file FILE or --auditchain-service KEY")
	}
	if _, err := os.Stat(*db); errors.Is(err, os.ErrNotExist) && !*createDB {
		return fmt.Errorf("--db %s does not exist: give the witness's existing state, or --create-db to start a new one (a new state cosigns every log afresh)", *db)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	state, err := witness.OpenState(ctx, *db)
	if err != nil {
		return err
	}
	defer state.Close()
	w, err := witness.New(signer, vkey, trusted, state)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	// A cosignature is answered only once it is durable, so in-flight
	// requests finish on SIGTERM.
	srv := newHTTPServer(ctx, witness.Handler(w, log), log, listenerLimits{read: 30 * time.Second, write: 30 * time.Second, maxHeaderBytes: 16 << 10})
	fmt.Fprintf(stdout, "auditchain witness vkey %s\n", vkey)
	fmt.Fprintf(stdout, "auditchain witness state in %s\n", *db)
	fmt.Fprintf(stdout, "auditchain witness listening on http://%s\n", ln.Addr())
	log.Info("witness serving", "addr", ln.Addr().String(), "name", signer.Name(), "logs", trusted.Len())

	return serveUntilDone(ctx, srv, ln, log, 30*time.Second)
}
