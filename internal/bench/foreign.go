package bench

// A server of another build (ServerExeEnv, Options.Exe): an A/B against a
// commit whose bench lacks the workload runs this generator against that
// commit's serve. Its store must then be written only by that build: this
// build's store code would migrate it past what the older binary knows, and
// the older serve refuses a newer schema. So the accounts are created by the
// server binary's own `admin create-account`.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// foreignServer reports whether the started server is a binary other than
// this one.
func foreignServer(o *Options) bool {
	if o.URL != "" || o.Exe == "" {
		return false
	}
	self, err := os.Executable()
	if err != nil {
		return true
	}
	a, errA := os.Stat(self)
	b, errB := os.Stat(o.Exe)
	return errA != nil || errB != nil || !os.SameFile(a, b)
}

// provisionFor creates the run's accounts: through the store as
// `auditchain admin` does, or, for a server of another build, by running
// that binary's `admin create-account` (unscoped keys only: no extra keys,
// no sessions).
func provisionFor(ctx context.Context, o *Options, db string, n, extraKeys int, sessionPrefix string) ([]account, error) {
	if !foreignServer(o) {
		return provision(ctx, db, n, extraKeys, sessionPrefix)
	}
	if extraKeys > 0 || sessionPrefix != "" {
		return nil, errors.New("extra keys and --session need the generator's own store code: not with a server of another build (" + ServerExeEnv + ")")
	}
	out := make([]account, n)
	// The first call migrates a fresh store: alone, before the others.
	if n > 0 {
		a, err := adminCreateAccount(ctx, o.Exe, db)
		if err != nil {
			return nil, err
		}
		out[0] = a
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = 1
	)
	for range min(4, n) {
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
				a, err := adminCreateAccount(ctx, o.Exe, db)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				out[i] = a
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
}

func adminCreateAccount(ctx context.Context, exe, db string) (account, error) {
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
	cmd := exec.CommandContext(ctx, exe, "admin", "create-account", "--db", db, "--no-email")
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
	return account{userID: r.UserID, keyID: cmp.Or(r.KeyID, r.OldKeyID), key: r.APIKey}, nil
}
