package main

// `auditchain admin`: create-account, create-key and announce, on the store
// named by --db, also while the server runs on it. The operator's commands
// (backup, check, pin, list-accounts) are in admin_*.go.

import (
	"context"
	"crypto/ed25519"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

const adminUsage = `usage: auditchain admin <command> [flags]

commands:
  create-account  create an account and its first unscoped key
  create-key      create another key for an account (by --user-id or --email)
  list-accounts   list the accounts: user_id, email, created, events
  announce        mail a mandatory notice to every account with an email
  backup          copy a sqlite: store while serve runs (PostgreSQL: pg_dump)
  check           check every account's chain, tree, newest block and pin
  pin             write the pinned state that check and serve --pin-state hold the store to

Each works on the store named by --db (default $AUDITCHAIN_DB, else
sqlite:./data/auditchain.db), also while the server runs on it, and names the
store it used on stderr. A sqlite: file that does not exist is refused (serve
creates the default one) unless --create-db. "auditchain admin COMMAND --help"
shows its flags.
`

// opener opens an admin command's store and builds the App over it, with
// what deps adds to its dependencies (nil: nothing).
type opener func(deps func(*app.Deps)) (*adminApp, func(), error)

// adminApp is the App an admin command runs, beside the store it was built
// over: backup, check and list-accounts read the store itself.
type adminApp struct {
	*app.App
	Store *store.Store
	// ServiceKey is the service identity, for the commands that sign with
	// it (withServiceKey reads it; nil elsewhere).
	ServiceKey ed25519.PrivateKey
}

func adminCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	// newAdmin is an admin command's flags with --db; open opens that store,
	// names it on stderr (stdout stays the command's JSON) and builds the
	// App over it, with what deps adds (nil: nothing).
	newAdmin := func(name, synopsis string) (*flag.FlagSet, opener) {
		fs := newFlags("admin "+name, synopsis)
		db := new(string)
		config.SecretVar(fs, db, "db", envOr(getenv, "AUDITCHAIN_DB", config.DefaultDB), config.DefaultDB, "store: sqlite:PATH or a postgres:// URL (env AUDITCHAIN_DB)")
		createDB := fs.Bool("create-db", false, "create the sqlite: store if its file does not exist")
		return fs, func(deps func(*app.Deps)) (*adminApp, func(), error) {
			if err := checkStore(*db, *createDB, false); err != nil {
				return nil, nil, err
			}
			st, err := store.Open(ctx, *db)
			if err != nil {
				return nil, nil, fmt.Errorf("open store %s: %w", store.Redacted(*db), err)
			}
			fmt.Fprintf(stderr, "auditchain admin %s: store %s\n", name, st.Location)
			d := app.Deps{Store: st, Config: config.Config{EpochAnchor: domain.DefaultEpochAnchor},
				Log: slog.New(slog.NewTextHandler(stderr, nil))}
			if deps != nil {
				deps(&d)
			}
			a := app.New(d)
			return &adminApp{App: a, Store: st}, func() { a.Close(); st.Close() }, nil
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
	env := adminEnv{ctx: ctx, getenv: getenv, stdout: stdout, stderr: stderr, newAdmin: newAdmin, noArgs: noArgs}
	return group("admin", adminUsage, args, stdout, stderr, map[string]func([]string) error{
		"list-accounts": env.listAccounts,
		"backup":        env.backup,
		"check":         env.check,
		"pin":           env.pin,
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
			a, closeStore, err := open(nil)
			if err != nil {
				return err
			}
			defer closeStore()
			acct, key, err := a.CreateAccount(ctx, app.AccountRequest{Email: *email, NoEmail: *noEmail, Admin: *isAdmin})
			if err != nil {
				return explainAccountExists(err, a.Store, *email)
			}
			return printJSON(stdout, accountCreated{UserID: acct.UserID, Email: acct.Email, KeyCreated: key})
		},
		"create-key": func(args []string) error {
			fs, open := newAdmin("create-key", "usage: auditchain admin create-key --user-id UUID [--scopes S,…] [--machine M] [--label L] [--expires-at T] [--db DSN]\n       auditchain admin create-key --email ADDR [flags as above]\n\nPrints the key as POST /v1/keys answers it; the token (api_key) is shown once.\nWith --email, the key is for the account that address owns (a lost key's way back).\n")
			userID := fs.String("user-id", "", "account user_id (UUID)")
			email := fs.String("email", "", "the account's email, instead of --user-id")
			scopes := fs.String("scopes", "", "comma-separated scopes (empty: unscoped)")
			machine := fs.String("machine", "", "machine label")
			label := fs.String("label", "", "key label")
			expires := fs.String("expires-at", "", "expiry timestamp (RFC 3339)")
			if err := noArgs(fs, args); err != nil {
				return err
			}
			if (*userID == "") == (*email == "") {
				return usagef("create-key needs --user-id UUID or --email ADDR (one of them)")
			}
			req := api.CreateKeyRequest{Machine: machine, Label: label}
			if *scopes != "" {
				req.Scopes = strings.Split(*scopes, ",")
			}
			if *expires != "" {
				if _, err := domain.ParseTimestamp(*expires); err != nil {
					return usagef("--expires-at: %q is not an RFC 3339 timestamp", *expires)
				}
				req.ExpiresAt = expires
			}
			a, closeStore, err := open(nil)
			if err != nil {
				return err
			}
			defer closeStore()
			if *email != "" {
				if *userID, err = userIDByEmail(ctx, a, *email); err != nil {
					return err
				}
			}
			key, err := a.CreateKey(ctx, *userID, req)
			if err != nil {
				return explain(err)
			}
			return printJSON(stdout, key)
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
			a, closeStore, err := open(func(d *app.Deps) {
				d.Mail = mailer
				d.Config.AnnounceLimitPerDay = *perDay
			})
			if err != nil {
				return err
			}
			defer closeStore()
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
