package main

// `auditchain admin list-accounts`, and the account lookup behind
// `admin create-key --email`: the way back to an account whose keys are
// lost (docs/operations.md "Lost keys").

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
)

const listAccountsUsage = `usage: auditchain admin list-accounts [--json] [--db DSN]

Lists every account: user_id, email, administrator or not, when it was
created and how many events its chain holds, oldest user_id first.
`

// listedAccount is one account in admin list-accounts --json.
type listedAccount struct {
	UserID    string  `json:"user_id"`
	Email     *string `json:"email"`
	Admin     bool    `json:"admin"`
	CreatedAt string  `json:"created_at"`
	Events    int64   `json:"events"`
}

func (e adminEnv) listAccounts(args []string) error {
	fs, open := e.newAdmin("list-accounts", listAccountsUsage)
	asJSON := fs.Bool("json", false, "print the accounts as a JSON array")
	if err := e.noArgs(fs, args); err != nil {
		return err
	}
	a, closeStore, err := open(nil)
	if err != nil {
		return err
	}
	defer closeStore()
	out := []listedAccount{}
	err = eachAccount(e.ctx, a.Store, func(acct store.AccountSummary) error {
		out = append(out, listedAccount{UserID: acct.UserID, Email: acct.Email, Admin: acct.IsAdmin,
			CreatedAt: acct.CreatedAt.Format(time.RFC3339), Events: acct.EventCount})
		return nil
	})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, out)
	}
	return printAccounts(e.stdout, out)
}

func printAccounts(w io.Writer, as []listedAccount) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "USER_ID\tEMAIL\tADMIN\tCREATED\tEVENTS")
	for _, a := range as {
		email := "-"
		if a.Email != nil {
			email = *a.Email
		}
		admin := "no"
		if a.Admin {
			admin = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", a.UserID, email, admin, a.CreatedAt, a.Events)
	}
	return tw.Flush()
}

// userIDByEmail is the account an email address owns, for create-key --email.
func userIDByEmail(ctx context.Context, a *adminApp, email string) (string, error) {
	norm, ok := domain.NormalizeEmail(email)
	if !ok {
		return "", usagef("--email: %q is not one plain address like name@example.com", email)
	}
	acct, err := a.Store.AccountByEmail(ctx, nil, norm)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("no account has the email %s (auditchain admin list-accounts lists them; admin create-account --email %s creates one)",
			norm, shellQuote(strings.TrimSpace(email)))
	}
	return acct.UserID, err
}

// explainAccountExists is create-account's error, saying on account_exists
// how to get a key to the account that exists (so the README's bootstrap may
// be run again): admin create-key --email, or signing in by code.
func explainAccountExists(err error, st *store.Store, email string) error {
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeAccountExists {
		return explain(err)
	}
	return fmt.Errorf("%s: an account with the email %s exists already; for a new key to it run\n"+
		"  auditchain admin create-key --db %s --email %s\n"+
		"or sign in with a code mailed to that address (README \"Sign in\")", de.Code, email, st.DBFlag(), shellQuote(email))
}
