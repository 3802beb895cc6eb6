package bench

// The bench accounts. No HTTP route creates an account without an email
// (sign-up by one-time code gives it one, and an account with an email gets
// mail for every notice, which would add mail to workloads that never
// measured it), so the accounts are made as an operator makes them: by
// running the server binary's `auditchain admin create-account` on its store.
// Running the server's own binary (not this one) keeps a server of another
// build working: this build's admin would migrate a fresh store past what an
// older serve knows, and an older serve refuses a newer schema. Everything
// else an account needs (more keys, sessions) goes through the public routes.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/auditchain/auditchain/pkg/api"
)

// adminParallel is how many admin processes create accounts at once.
const adminParallel = 4

// createAccounts creates n accounts (each with its first, unscoped key) by
// running exe admin create-account on db; emailOf(i), when non-nil, gives
// account i its email.
func createAccounts(ctx context.Context, exe, db string, n int, emailOf func(i int) string) ([]account, error) {
	out := make([]account, n)
	create := func(i int) error {
		email := ""
		if emailOf != nil {
			email = emailOf(i)
		}
		a, err := adminCreateAccount(ctx, exe, db, email)
		out[i] = a
		return err
	}
	if n == 0 {
		return out, nil
	}
	// The first call migrates a fresh store: alone, before the others.
	if err := create(0); err != nil {
		return nil, err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = 1
	)
	for range min(adminParallel, n-1) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := i >= n || first != nil
				mu.Unlock()
				if stop {
					return
				}
				if err := create(i); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
}

// adminCreateAccount runs exe admin create-account on db, with email or
// --no-email, and returns the account and its key.
func adminCreateAccount(ctx context.Context, exe, db, email string) (account, error) {
	// admin refuses a sqlite: file that does not exist (without --create-db,
	// which older builds lack): the bench's scratch store starts as an empty
	// file, which SQLite opens as an empty database.
	if path, ok := strings.CutPrefix(db, "sqlite:"); ok {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			err = f.Close()
		}
		if err != nil && !errors.Is(err, os.ErrExist) {
			return account{}, err
		}
	}
	args := []string{"admin", "create-account", "--db", db, "--no-email"}
	if email != "" {
		args[len(args)-1] = "--email=" + email
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return account{}, fmt.Errorf("%s admin create-account: %w: %s", exe, err, strings.TrimSpace(stderr.String()))
	}
	var r struct {
		APIKey   string `json:"api_key"`
		KeyID    string `json:"id"`
		OldKeyID string `json:"key_id"` // binaries before the key's id was "id" as in the API
		UserID   string `json:"user_id"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.APIKey == "" || r.UserID == "" {
		return account{}, fmt.Errorf("%s admin create-account: unexpected answer %q", exe, b)
	}
	return account{userID: r.UserID, keyID: cmp.Or(r.KeyID, r.OldKeyID), key: r.APIKey, email: email}, nil
}

// addKeys gives account a n more keys through POST /v1/keys, authenticated
// by its first (unscoped) key.
func addKeys(ctx context.Context, c *client, a *account, n int) error {
	body := []byte(`{"label":"bench"}`)
	var resp bytes.Buffer
	for range n {
		if _, err := c.do(ctx, "POST", "/v1/keys", a.key, body, &resp); err != nil {
			return fmt.Errorf("create a key: %w: %s", err, resp.Bytes())
		}
		var k api.KeyCreated
		if err := json.Unmarshal(resp.Bytes(), &k); err != nil || k.APIKey == "" {
			return fmt.Errorf("create a key: unexpected answer %s", resp.Bytes())
		}
		a.keys = append(a.keys, k.APIKey)
	}
	return nil
}

// savedAccount is what --account-file keeps: the account whose chain was
// prefilled, so that a later run on the same store measures that chain again.
type savedAccount struct {
	UserID string `json:"user_id"`
	KeyID  string `json:"key_id"`
	APIKey string `json:"api_key"`
	// Email signs the account in (console); Session is its last session
	// token, used again while it lasts (one email gets 5 codes an hour).
	Email   string `json:"email,omitempty"`
	Session string `json:"session,omitempty"`
}

func saveAccount(path string, a account) error {
	b, err := json.Marshal(savedAccount{UserID: a.userID, KeyID: a.keyID, APIKey: a.key, Email: a.email, Session: a.session})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// loadAccount reads --account-file; ok is false when the file does not exist.
func loadAccount(path string) (a account, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return a, false, nil
	}
	if err != nil {
		return a, false, err
	}
	var s savedAccount
	if err := json.Unmarshal(b, &s); err != nil || s.APIKey == "" {
		return a, false, fmt.Errorf("--account-file %s: not an account the bench saved", path)
	}
	return account{userID: s.UserID, keyID: s.KeyID, key: s.APIKey, email: s.Email, session: s.Session}, true, nil
}

// reuseSavedAccount: with --prefill 0 and an --account-file that exists,
// the first account is the saved one, whose chain (on the same --db) is
// measured again instead of prefilling a new one (a 1M-event chain once,
// several runs). Its length is read from GET /v1/chain/tip once the server
// runs (prepareAccounts).
func (e *env) reuseSavedAccount(res *Result) error {
	if !e.w.prefill || e.w.prefillRows || e.prefill != 0 || e.o.AccountFile == "" || len(e.accounts) != 1 {
		return nil
	}
	a, ok, err := loadAccount(e.o.AccountFile)
	if err != nil || !ok {
		return err
	}
	e.accounts[0], e.prefilled = a, true
	return nil
}

// prepareAccounts does, once the server answers, what the accounts need
// beyond admin create-account: the saved chain's length, extra keys, the
// sign-in of --session, the events of --fill-others.
func (e *env) prepareAccounts(ctx context.Context) error {
	if e.prefilled {
		var buf bytes.Buffer
		w := &worker{e: e, c: e.c}
		var t tip
		if err := readTip(ctx, w, e.accounts[0].key, &t, &buf); err != nil {
			return fmt.Errorf("the saved account of %s: %w", e.o.AccountFile, err)
		}
		e.prefill = int(t.seq + 1)
		fmt.Fprintf(e.progress, "bench: using the saved chain of %d events of account %s\n", e.prefill, e.accounts[0].userID)
	}
	if e.w.keys != nil {
		if err := addKeys(ctx, e.c, &e.accounts[0], e.w.keys(e.o)); err != nil {
			return err
		}
	}
	if e.o.Session {
		if err := signInAll(ctx, e); err != nil {
			return err
		}
	}
	return fillOthers(ctx, e, e.o.FillOthers)
}
