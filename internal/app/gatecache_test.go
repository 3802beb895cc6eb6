package app_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// sqliteApp is an App over a fresh SQLite store: the store of which this
// process is the sole writer, the only one where the read caches exist.
func sqliteApp(t *testing.T, o apptest.Options) *app.App {
	t.Helper()
	return apptest.New(t, storetest.Open(t, storetest.DSN(t, storetest.SQLite)), o)
}

// The gate's cache is linearizable with its writes: once a use (or a revoke)
// has been acknowledged, no status read that starts afterwards may show the
// state before it. Readers run flat out while one writer uses the budget up
// and then revokes; each reader checks the uses it sees never go below what
// the writer had acknowledged before the read began, and never go backwards.
func TestGateCacheNeverServesAStateOlderThanAnAcknowledgedWrite(t *testing.T) {
	a := sqliteApp(t, apptest.Options{})
	ctx := context.Background()
	acct, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: "cache@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"} // unscoped
	const budget = 60
	created, err := a.CreateGrant(ctx, p, api.CreateGrantRequest{Subagent: new("worker"), AllowedTools: []string{"search"},
		MaxToolCalls: new(int64(budget)), ExpiresAt: new(domain.FormatTimestamp(a.Now().Add(time.Hour)))})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Grant.GrantID

	var acknowledged atomic.Int64 // uses the writer has had confirmed
	var revoked atomic.Bool
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lastSeen int64
			for reads := 0; ; reads++ {
				select {
				case <-done:
					if reads == 0 {
						errs <- fmt.Errorf("reader %d never read", r)
					}
					return
				default:
				}
				floor, wasRevoked := acknowledged.Load(), revoked.Load()
				var grantID *string
				if r%2 == 1 {
					grantID = &id
				}
				ans, err := a.GrantStatus(ctx, p, api.GrantStatusQuery{Subagent: "worker", GrantID: grantID}, a.Now())
				if err != nil {
					errs <- err
					return
				}
				switch {
				case wasRevoked && ans.Status != domain.GateRevoked:
					errs <- fmt.Errorf("reader %d: status %s after the revoke was acknowledged", r, ans.Status)
					return
				case ans.Uses < floor:
					errs <- fmt.Errorf("reader %d: saw %d uses after %d were acknowledged", r, ans.Uses, floor)
					return
				case ans.Uses < lastSeen:
					errs <- fmt.Errorf("reader %d: uses went back from %d to %d", r, lastSeen, ans.Uses)
					return
				}
				lastSeen = ans.Uses
			}
		}()
	}
	for i := range budget {
		res, err := a.UseGrant(ctx, p, id, api.UseRequest{Subagent: new("worker"), N: new(int64(1))})
		if err != nil {
			t.Fatalf("use %d: %v", i, err)
		}
		acknowledged.Store(res.Uses)
	}
	if _, err := a.RevokeGrant(ctx, p, id, api.RevokeRequest{Subagent: new("worker")}); err != nil {
		t.Fatal(err)
	}
	revoked.Store(true)
	// Give readers a last round after the revoke, then stop them.
	for range 50 {
		if ans, err := a.GrantStatus(ctx, p, api.GrantStatusQuery{Subagent: "worker", GrantID: nil}, a.Now()); err != nil || ans.Status != domain.GateRevoked {
			t.Fatalf("status after revoke = %+v, %v", ans.Status, err)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := acknowledged.Load(); got != budget {
		t.Fatalf("acknowledged %d uses, want %d", got, budget)
	}
}

// A revoked API key is refused by the very next request, although it was
// served from the key cache a moment before.
func TestKeyCacheForgetsARevokedKeyAtOnce(t *testing.T) {
	a := sqliteApp(t, apptest.Options{})
	ctx := context.Background()
	acct, first, err := a.CreateAccount(ctx, app.AccountRequest{Email: "keys@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := a.Authenticate(ctx, first.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.CreateKey(ctx, acct.UserID, api.CreateKeyRequest{Label: new("second")})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the second and third answers come from the cache
		if _, err := a.Authenticate(ctx, second.APIKey); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.RevokeKey(ctx, owner, second.Key.ID); err != nil {
		t.Fatal(err)
	}
	var de *domain.Error
	if _, err := a.Authenticate(ctx, second.APIKey); !errors.As(err, &de) || de.Code != domain.CodeInvalidAPIKey {
		t.Fatalf("revoked key authenticated: err = %v", err)
	}
	if _, err := a.Authenticate(ctx, first.APIKey); err != nil {
		t.Fatalf("the other key must still work: %v", err)
	}
}

// A read cached at one time is not used for an earlier one: the candidates
// it holds left out grants expired at its time, which were live before. Here
// an older grant outlives a newer revoked one until 13:00; asked at 14:00 the
// gate answers revoked (the newest), and with the clock stepped back to 12:30
// it must answer authorized (the older live grant) again.
func TestGateCacheNotUsedForAnEarlierTime(t *testing.T) {
	noon := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := noon
	a := sqliteApp(t, apptest.Options{Now: func() time.Time { return now }})
	ctx := context.Background()
	acct, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: "clock@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
	if _, err := a.CreateGrant(ctx, p, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(5)), ExpiresAt: new(domain.FormatTimestamp(noon.Add(time.Hour)))}); err != nil {
		t.Fatal(err)
	}
	now = noon.Add(time.Minute)
	newer, err := a.CreateGrant(ctx, p, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(5)), ExpiresAt: new(domain.FormatTimestamp(noon.Add(3 * time.Hour)))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RevokeGrant(ctx, p, newer.Grant.GrantID, api.RevokeRequest{Subagent: new("worker")}); err != nil {
		t.Fatal(err)
	}
	// A write of the account empties its cache (the revoke's own status
	// read-back was cached at 12:01), so the next read is cached at 14:00.
	if _, err := a.CreateGrant(ctx, p, api.CreateGrantRequest{Subagent: new("other"), MaxToolCalls: new(int64(1)), ExpiresAt: new(domain.FormatTimestamp(noon.Add(time.Hour)))}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at   time.Time
		want string
	}{
		{noon.Add(2 * time.Hour), domain.GateRevoked},
		{noon.Add(2 * time.Hour), domain.GateRevoked}, // from the cache
		{noon.Add(30 * time.Minute), domain.GateAuthorized},
	} {
		ans, err := a.GrantStatus(ctx, p, api.GrantStatusQuery{Subagent: "worker", GrantID: nil}, step.at)
		if err != nil {
			t.Fatal(err)
		}
		if ans.Status != step.want {
			t.Fatalf("status at %s = %s, want %s", step.at.Format(time.Kitchen), ans.Status, step.want)
		}
	}
}
