package app

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
)

func TestReadCacheKeepsOnlyReadsNoWriteRaced(t *testing.T) {
	miss := func(c *readCache[string, int]) (int, bool) { v, _, ok := c.get("a", "k"); return v, ok }

	tests := []struct {
		name    string
		run     func(c *readCache[string, int])
		wantHit bool
	}{
		{"a read stored with a current ticket is served", func(c *readCache[string, int]) {
			_, tk, _ := c.get("a", "k")
			c.put("a", tk, "k", 1)
		}, true},
		{"a write ended after the ticket was taken: the read is not kept", func(c *readCache[string, int]) {
			_, tk, _ := c.get("a", "k")
			c.begin("a")()
			c.put("a", tk, "k", 1)
		}, false},
		{"a write pending when the read is stored: not kept", func(c *readCache[string, int]) {
			_, tk, _ := c.get("a", "k")
			c.begin("a") // never ends within this step
			c.put("a", tk, "k", 1)
		}, false},
		{"a write ended after the entry was stored drops it", func(c *readCache[string, int]) {
			_, tk, _ := c.get("a", "k")
			c.put("a", tk, "k", 1)
			c.begin("a")()
		}, false},
		{"a write of another scope changes nothing", func(c *readCache[string, int]) {
			_, tk, _ := c.get("a", "k")
			c.put("a", tk, "k", 1)
			c.begin("b")()
		}, true},
		{"a ticket taken while a write was pending is never honoured", func(c *readCache[string, int]) {
			end := c.begin("a")
			_, tk, _ := c.get("a", "k")
			end()
			c.put("a", tk, "k", 1)
		}, false},
		{"ending a write twice counts once", func(c *readCache[string, int]) {
			end := c.begin("a")
			end()
			end()
			_, tk, _ := c.get("a", "k")
			c.put("a", tk, "k", 1)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newReadCache[string, int](10, 10)
			tt.run(c)
			if v, hit := miss(c); hit != tt.wantHit || (hit && v != 1) {
				t.Fatalf("get after the steps = (%d, %v), want hit %v", v, hit, tt.wantHit)
			}
		})
	}
}

func TestReadCacheBypassedWhileAWriteIsPending(t *testing.T) {
	c := newReadCache[string, int](10, 10)
	_, tk, _ := c.get("a", "k")
	c.put("a", tk, "k", 1)
	end := c.begin("a")
	if _, _, hit := c.get("a", "k"); hit {
		t.Fatal("a pending write must make readers go to the database")
	}
	end()
	if _, _, hit := c.get("a", "k"); hit {
		t.Fatal("the write's end must drop what was cached before it")
	}
}

func TestReadCacheIsBounded(t *testing.T) {
	c := newReadCache[string, int](4, 3)
	pending := c.begin("busy") // a scope with a pending write must survive eviction
	for i := range 100 {
		scope := fmt.Sprint("s", i)
		for k := range 10 {
			_, tk, _ := c.get(scope, fmt.Sprint(k))
			c.put(scope, tk, fmt.Sprint(k), k)
		}
	}
	c.mu.Lock()
	scopes := len(c.scopes)
	_, busy := c.scopes["busy"]
	for name, s := range c.scopes {
		if len(s.entries) > 3 {
			t.Errorf("scope %s holds %d entries, bound is 3", name, len(s.entries))
		}
	}
	c.mu.Unlock()
	if scopes > 4 {
		t.Errorf("%d scopes cached, bound is 4", scopes)
	}
	if !busy {
		t.Error("the scope with a pending write was evicted")
	}
	pending()
	var nilCache *readCache[string, int]
	if _, _, hit := nilCache.get("a", "k"); hit {
		t.Error("a nil cache must always miss")
	}
	nilCache.begin("a")()
}

// The gate's cache is linearizable with its writes: once a use (or a revoke)
// has been acknowledged, no status read that starts afterwards may show the
// state before it. Readers run flat out while one writer uses the budget up
// and then revokes; each reader checks the uses it sees never go below what
// the writer had acknowledged before the read began, and never go backwards.
func TestGateCacheNeverServesAStateOlderThanAnAcknowledgedWrite(t *testing.T) {
	a := sqliteApp(t)
	ctx := context.Background()
	if err := a.LoadServiceKey(ctx); err != nil {
		t.Fatal(err)
	}
	acct, _, err := a.CreateAccount(ctx, AccountRequest{Email: "cache@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	p := Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"} // unscoped
	const budget = 60
	created, err := a.CreateGrant(ctx, p, GrantRequest{Subagent: "worker", AllowedTools: []string{"search"},
		MaxToolCalls: budget, ExpiresAt: a.Now().Add(time.Hour)})
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
				ans, err := a.GrantStatus(ctx, p, "worker", nil, grantID, a.Now())
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
		res, err := a.UseGrant(ctx, p, id, "worker", 1)
		if err != nil {
			t.Fatalf("use %d: %v", i, err)
		}
		acknowledged.Store(res.Grant.Uses)
	}
	if _, err := a.RevokeGrant(ctx, p, id, "worker"); err != nil {
		t.Fatal(err)
	}
	revoked.Store(true)
	// Give readers a last round after the revoke, then stop them.
	for range 50 {
		if ans, err := a.GrantStatus(ctx, p, "worker", nil, nil, a.Now()); err != nil || ans.Status != domain.GateRevoked {
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
	a := sqliteApp(t)
	ctx := context.Background()
	acct, first, err := a.CreateAccount(ctx, AccountRequest{Email: "keys@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := a.Authenticate(ctx, first.Token)
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.CreateKey(ctx, acct.UserID, KeyRequest{Label: "second"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the second and third answers come from the cache
		if _, err := a.Authenticate(ctx, second.Token); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.RevokeKey(ctx, owner, second.Key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, second.Token); err != errInvalidKey {
		t.Fatalf("revoked key authenticated: err = %v", err)
	}
	if _, err := a.Authenticate(ctx, first.Token); err != nil {
		t.Fatalf("the other key must still work: %v", err)
	}
}

// A read cached at one time is not used for an earlier one: the candidates
// it holds left out grants expired at its time, which were live before. Here
// an older grant outlives a newer revoked one until 13:00; asked at 14:00 the
// gate answers revoked (the newest), and with the clock stepped back to 12:30
// it must answer authorized (the older live grant) again.
func TestGateCacheNotUsedForAnEarlierTime(t *testing.T) {
	a := sqliteApp(t)
	ctx := context.Background()
	if err := a.LoadServiceKey(ctx); err != nil {
		t.Fatal(err)
	}
	noon := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := noon
	a.Now = func() time.Time { return now }
	acct, _, err := a.CreateAccount(ctx, AccountRequest{Email: "clock@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	p := Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
	if _, err := a.CreateGrant(ctx, p, GrantRequest{Subagent: "worker", MaxToolCalls: 5, ExpiresAt: noon.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	now = noon.Add(time.Minute)
	newer, err := a.CreateGrant(ctx, p, GrantRequest{Subagent: "worker", MaxToolCalls: 5, ExpiresAt: noon.Add(3 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RevokeGrant(ctx, p, newer.Grant.GrantID, "worker"); err != nil {
		t.Fatal(err)
	}
	// A write of the account empties its cache (the revoke's own status
	// read-back was cached at 12:01), so the next read is cached at 14:00.
	if _, err := a.CreateGrant(ctx, p, GrantRequest{Subagent: "other", MaxToolCalls: 1, ExpiresAt: noon.Add(time.Hour)}); err != nil {
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
		ans, err := a.GrantStatus(ctx, p, "worker", nil, nil, step.at)
		if err != nil {
			t.Fatal(err)
		}
		if ans.Status != step.want {
			t.Fatalf("status at %s = %s, want %s", step.at.Format(time.Kitchen), ans.Status, step.want)
		}
	}
}
