package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// streamStatus opens a stream with key and answers its status; a stream that
// opened is held until the test ends or close is called.
func (e *env) streamStatus(key string) (int, map[string]any, func()) {
	e.t.Helper()
	return e.streamStatusWith(key)
}

// streamStatusWith is streamStatus with extra headers (name, value…), such
// as a session cookie.
func (e *env) streamStatusWith(key string, headers ...string) (int, map[string]any, func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/events/stream", nil)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		defer cancel()
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			e.t.Fatal(err)
		}
		return resp.StatusCode, response{Body: body}.JSON(e.t), func() {}
	}
	closed := func() { cancel(); resp.Body.Close() }
	e.t.Cleanup(closed)
	return 200, nil, closed
}

// waitStream opens a stream until it opens (a closed stream's slot is freed
// once its handler has seen the client go).
func (e *env) waitStream(key string) {
	e.t.Helper()
	for range 100 {
		if code, _, _ := e.streamStatus(key); code == 200 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatal("no stream slot came free")
}

func wantTooManyStreams(t *testing.T, code int, m map[string]any, per string, limit int) {
	t.Helper()
	if code != 429 || m["code"] != "too_many_streams" || m["per"] != per || m["limit"] != float64(limit) {
		t.Fatalf("answer %d %v, want 429 too_many_streams per %s limit %d", code, m, per, limit)
	}
}

// An account holds at most --max-streams-per-account open streams, whatever
// its keys; a slot comes free when a stream ends, or when the lease of a
// vanished replica lapses.
func TestStreamsPerAccount(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.MaxStreams = 2 })
		user, k1 := e.account("a@example.com")
		k2 := e.key(user, api.CreateKeyRequest{})
		_, other := e.account("b@example.com")
		if code, _, _ := e.streamStatus(k1); code != 200 {
			t.Fatal(code)
		}
		_, _, closeSecond := e.streamStatus(k2)
		code, m, _ := e.streamStatus(k1)
		wantTooManyStreams(t, code, m, "account", 2)
		if code, _, _ := e.streamStatus(other); code != 200 {
			t.Fatalf("another account: %d", code)
		}
		closeSecond()
		e.waitStream(k2)

		// A replica that vanished holds two leases it never releases: they
		// lapse, and the slots are the account's again.
		e2 := newEnv(t, dsn, func(c *config.Config) { c.MaxStreams = 5 })
		_, k3 := e2.account("c@example.com")
		p, err := e2.app.Authenticate(context.Background(), k3)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if _, err := e2.app.TakeStreamSlot(context.Background(), p); err != nil {
				t.Fatal(err)
			}
		}
		code, m, _ = e2.streamStatus(k3)
		wantTooManyStreams(t, code, m, "account", 5)
		// Renewed, they hold past their first expiry; once the replica stops
		// renewing, they lapse.
		e2.clock.Advance(time.Minute)
		if err := e2.app.RenewStreamLeases(context.Background()); err != nil {
			t.Fatal(err)
		}
		e2.clock.Advance(time.Minute)
		code, m, _ = e2.streamStatus(k3)
		wantTooManyStreams(t, code, m, "account", 5)
		e2.clock.Advance(time.Minute)
		if code, _, _ := e2.streamStatus(k3); code != 200 {
			t.Fatalf("after the leases lapsed: %d", code)
		}
	})
}

// With PostgreSQL the caps hold across replicas: per account, and per key
// (16) rather than 16 on each replica.
func TestStreamsAcrossReplicasShareTheCaps(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	cfg := func(c *config.Config) { c.MaxStreams = 3 }
	a, b := newEnv(t, dsn, cfg), newEnv(t, dsn, cfg)
	user, k1 := a.account("a@example.com")
	k2 := a.key(user, api.CreateKeyRequest{})
	if code, _, _ := a.streamStatus(k1); code != 200 {
		t.Fatal(code)
	}
	if code, _, _ := b.streamStatus(k2); code != 200 {
		t.Fatal(code)
	}
	if code, _, _ := b.streamStatus(k1); code != 200 {
		t.Fatal(code)
	}
	for _, e := range []*env{a, b} {
		code, m, _ := e.streamStatus(k2)
		wantTooManyStreams(t, code, m, "account", 3)
	}

	wide := func(c *config.Config) { c.MaxStreams = 100 }
	c, d := newEnv(t, dsn, wide), newEnv(t, dsn, wide)
	_, key := c.account("b@example.com")
	p, err := c.app.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		replica := c.app
		if i%2 == 1 {
			replica = d.app
		}
		if _, err := replica.TakeStreamSlot(context.Background(), p); err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
	code, m, _ := d.streamStatus(key)
	wantTooManyStreams(t, code, m, "key", 16)
}

// An account holds at most --max-keys-per-account live keys: revoked and
// expired ones do not count.
func TestKeysPerAccount(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.MaxKeys = 3 })
		_, root := e.account("a@example.com") // the first key
		var ids []string
		for i := range 2 {
			r := e.do("POST", "/v1/keys", root, map[string]any{"label": "k"})
			if r.Status != 201 {
				t.Fatalf("key %d: %d %s", i, r.Status, r.Body)
			}
			ids = append(ids, r.JSON(t)["id"].(string))
		}
		before := e.fingerprint()
		m := wantProblem(t, e.do("POST", "/v1/keys", root, map[string]any{}), 429, "too_many_keys")
		if m["limit"] != float64(3) {
			t.Fatalf("limit %v", m["limit"])
		}
		if e.fingerprint() != before {
			t.Fatal("a refused key was written")
		}
		if r := e.do("POST", "/v1/keys/"+ids[0]+"/revoke", root, nil); r.Status != 200 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		soon := e.clock.Now().Add(time.Hour).Format(time.RFC3339)
		if r := e.do("POST", "/v1/keys", root, map[string]any{"expires_at": soon}); r.Status != 201 {
			t.Fatalf("after a revoke: %d %s", r.Status, r.Body)
		}
		wantProblem(t, e.do("POST", "/v1/keys", root, map[string]any{}), 429, "too_many_keys")
		e.clock.Advance(2 * time.Hour)
		if r := e.do("POST", "/v1/keys", root, map[string]any{}); r.Status != 201 {
			t.Fatalf("after a key expired: %d %s", r.Status, r.Body)
		}
	})
}

// Each session holds its own cap of open streams, as each key does: the
// sessions of a replica do not share one (a session has no key id), and a
// session over its cap is refused per key.
func TestStreamsPerSession(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.MaxStreams = 100 })
		e.account("a@example.com")
		e.account("b@example.com")
		_, first := e.signIn("a@example.com")
		_, second := e.signIn("a@example.com")
		_, other := e.signIn("b@example.com")
		open := func(cookie string) (int, map[string]any) {
			code, m, _ := e.streamStatusWith("", "Cookie", api.SessionCookie+"="+cookie)
			return code, m
		}
		for i := range 16 {
			if code, m := open(first); code != 200 {
				t.Fatalf("stream %d of the first session: %d %v", i, code, m)
			}
		}
		code, m := open(first)
		wantTooManyStreams(t, code, m, "key", 16)
		for name, cookie := range map[string]string{"another session of the account": second, "another account's session": other} {
			if code, m := open(cookie); code != 200 {
				t.Errorf("%s, while the first holds its 16: %d %v", name, code, m)
			}
		}
	})
}
