package client_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
	"github.com/auditchain/auditchain/pkg/verify"
)

// eachServer runs fn against a real API on every store.
func eachServer(t *testing.T, fn func(t *testing.T, s *httpapitest.Server)) {
	storetest.Each(t, func(t *testing.T, dsn string) { fn(t, httpapitest.Start(t, dsn, apptest.Options{})) })
}

func newClient(t *testing.T, s *httpapitest.Server, token string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(s.URL, token, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func str(s string) *string { return &s }

// checkChain reads the account's events and checks they form one chain:
// sequences 0…n-1, each prev_hash the previous payload_hash.
func checkChain(t *testing.T, c *client.Client, n int) []api.Event {
	t.Helper()
	res, err := c.Search(context.Background(), api.SearchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Count != n {
		t.Fatalf("%d events stored, want %d", res.Count, n)
	}
	evs := res.Results // newest first
	for i := range evs {
		e := evs[len(evs)-1-i]
		if e.Sequence != int64(i) {
			t.Fatalf("event %d has sequence %d", i, e.Sequence)
		}
		if i > 0 && (e.PrevHash == nil || *e.PrevHash != evs[len(evs)-i].PayloadHash) {
			t.Fatalf("event %d does not link to event %d", i, i-1)
		}
	}
	return evs
}

// The client keeps the tip: it starts from an empty chain, chains its own
// appends, and follows the service's events (a grant's grant.created event,
// written by the service) without the caller doing anything.
func TestAppendFollowsTheTipAcrossServerWrittenEvents(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "tip@example.com")
		c := newClient(t, s, token)
		ctx := context.Background()
		for i := range 2 {
			res, err := c.Append(ctx, client.Event{EventType: "tool_call", Tool: str("search"), Decision: str("allow"),
				Raw: map[string]any{"input_sha256": strings.Repeat("ab", 32), "n": i}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != "appended" || res.Event.Sequence != int64(i) || res.Event.Surface != client.SurfaceSDK {
				t.Fatalf("append %d: %+v", i, res.Event)
			}
		}
		// The service appends grant.created at the tip.
		if _, err := c.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(3)),
			ExpiresAt: new(client.FormatTimestamp(time.Now().Add(time.Hour)))}); err != nil {
			t.Fatal(err)
		}
		res, err := c.Append(ctx, client.Event{EventType: "tool_result", Raw: map[string]any{"ok": true}})
		if err != nil {
			t.Fatalf("append after a server-written event: %v", err)
		}
		if res.Event.Sequence != 3 {
			t.Fatalf("appended at %d, want 3 (after the service's event at 2)", res.Event.Sequence)
		}
		checkChain(t, c, 4)

		// Another writer moves the tip: a second client of the same account.
		other := newClient(t, s, token)
		if _, err := other.Append(ctx, client.Event{EventType: "note"}); err != nil {
			t.Fatal(err)
		}
		if res, err := c.Append(ctx, client.Event{EventType: "note"}); err != nil || res.Event.Sequence != 5 {
			t.Fatalf("after another writer: %+v, %v", res, err)
		}
		checkChain(t, c, 6)
	})
}

// dropFirstAnswer passes requests to the real server, but loses the answer
// of the first one matching: the service has carried it out, the caller sees
// a transport error.
type dropFirstAnswer struct {
	match   func(*http.Request) bool
	dropped atomic.Int32
}

func (d *dropFirstAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !d.match(r) || !d.dropped.CompareAndSwap(0, 1) {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errors.New("connection reset after the request was sent (test)")
}

// loseFirstAnswerBehindAnotherWriter loses the first answer of POST path,
// and another client of the account appends one event (evt-other) before
// the resend.
func loseFirstAnswerBehindAnotherWriter(t *testing.T, s *httpapitest.Server, token, path string) *dropFirstAnswer {
	other := newClient(t, s, token)
	var once sync.Once
	return &dropFirstAnswer{match: func(r *http.Request) bool {
		if r.Method != "POST" || r.URL.Path != path {
			return false
		}
		once.Do(func() {
			if _, err := other.Append(context.Background(), client.Event{EventID: "evt-other", EventType: "note"}); err != nil {
				t.Error(err)
			}
		})
		return true
	}}
}

// An append whose answer is lost is resent unchanged; the service answers
// with the stored event, so the chain holds it once.
func TestAppendWhoseAnswerWasLostIsStoredOnce(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "lost@example.com")
		drop := &dropFirstAnswer{match: func(r *http.Request) bool { return r.Method == "POST" && r.URL.Path == "/v1/events" }}
		var waits []time.Duration
		c := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: drop}),
			client.WithSleep(func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }))
		ctx := context.Background()
		res, err := c.Append(ctx, client.Event{EventID: "evt-lost-answer", EventType: "tool_call", Raw: map[string]any{"k": 1}})
		if err != nil {
			t.Fatal(err)
		}
		if drop.dropped.Load() != 1 || len(waits) != 1 {
			t.Fatalf("dropped %d answers, waited %v: the lost answer was not retried once", drop.dropped.Load(), waits)
		}
		if res.Event.EventID != "evt-lost-answer" || res.Event.Sequence != 0 {
			t.Fatalf("%+v", res.Event)
		}
		if _, err := c.Append(ctx, client.Event{EventType: "note"}); err != nil {
			t.Fatal(err)
		}
		checkChain(t, c, 2)
	})
}

// A grant with a grant_id whose answer is lost is sent again; the service
// refuses the resend (the id exists), which the client reports as
// ErrAnswerLost rather than as a plain conflict, and there is one grant.
// A tool call whose answer is lost is sent again and answered with the
// stored call, metered once.
func TestWritesWhoseAnswerWasLost(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "lost-grant@example.com")
		drop := &dropFirstAnswer{match: func(r *http.Request) bool { return r.Method == "POST" && r.URL.Path == "/v1/grants" }}
		c := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: drop}),
			client.WithSleep(func(context.Context, time.Duration) error { return nil }))
		ctx := context.Background()
		id := "g-10571"
		_, err := c.CreateGrant(ctx, api.CreateGrantRequest{GrantID: &id, Subagent: new("w"), MaxToolCalls: new(int64(3)), AllowedTools: []string{"t"},
			ExpiresAt: new(client.FormatTimestamp(time.Now().Add(time.Hour)))})
		if !errors.Is(err, client.ErrAnswerLost) || !client.IsCode(err, "grant_id_exists") {
			t.Fatalf("CreateGrant after a lost answer: %v, want ErrAnswerLost wrapping grant_id_exists", err)
		}
		if gs, err := c.Grants(ctx, "w"); err != nil || gs.Count != 1 || gs.Grants[0].GrantID != id {
			t.Fatalf("grants: %+v, %v", gs, err)
		}
		// Without a lost answer, the same conflict is a plain *Error.
		if _, err := c.CreateGrant(ctx, api.CreateGrantRequest{GrantID: &id, Subagent: new("w"), MaxToolCalls: new(int64(3)),
			ExpiresAt: new(client.FormatTimestamp(time.Now().Add(time.Hour)))}); errors.Is(err, client.ErrAnswerLost) || !client.IsCode(err, "grant_id_exists") {
			t.Fatalf("a second CreateGrant: %v", err)
		}

		drop = &dropFirstAnswer{match: func(r *http.Request) bool { return r.URL.Path == "/v1/tool-calls" }}
		c = newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: drop}),
			client.WithSleep(func(context.Context, time.Duration) error { return nil }))
		res, err := c.GateToolCall(ctx, api.ToolCallRequest{Subagent: new("w"), Tool: new("t"), Raw: json.RawMessage(`{"h":"1"}`)})
		if err != nil || drop.dropped.Load() != 1 || res.Decision != "allow" || !res.Metered {
			t.Fatalf("tool call after a lost answer: %+v, %v (dropped %d)", res, err, drop.dropped.Load())
		}
		if st, err := c.GrantStatus(ctx, api.GrantStatusQuery{Subagent: "w"}); err != nil || st.Uses != 1 {
			t.Fatalf("uses after a resent tool call: %+v, %v", st, err)
		}
	})
}

// An answer lost while another writer appends behind it: the resend finds
// its event stored (no longer at the tip) and gets it back, written once;
// the next append follows the moved tip.
func TestAppendWhoseAnswerWasLostBehindAnotherWriter(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "lost-behind@example.com")
		ctx := context.Background()
		drop := loseFirstAnswerBehindAnotherWriter(t, s, token, "/v1/events")
		c := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: drop}),
			client.WithSleep(func(context.Context, time.Duration) error { return nil }))
		res, err := c.Append(ctx, client.Event{EventID: "evt-mine", EventType: "note"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Event.EventID != "evt-mine" || res.Event.Sequence != 0 {
			t.Fatalf("the resend answered %+v", res.Event)
		}
		next, err := c.Append(ctx, client.Event{EventID: "evt-next", EventType: "note"})
		if err != nil || next.Event.Sequence != 2 {
			t.Fatalf("after the resend: %+v, %v", next, err)
		}
		evs := checkChain(t, c, 3)
		if evs[0].EventID != "evt-next" || evs[1].EventID != "evt-other" || evs[2].EventID != "evt-mine" {
			t.Fatalf("chain %v %v %v", evs[2].EventID, evs[1].EventID, evs[0].EventID)
		}
	})
}

// With a signer the client signs each event; the service checks it against
// the registered key, and the stored signature verifies offline.
func TestSignedAppend(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "signed@example.com")
		ctx := context.Background()
		pub, priv, _ := ed25519.GenerateKey(nil)
		plain := newClient(t, s, token)
		if _, err := plain.RegisterSigningKey(ctx, "laptop", pub); err != nil {
			t.Fatal(err)
		}
		c := newClient(t, s, token, client.WithSigner("laptop", priv))
		res, err := c.Append(ctx, client.Event{EventType: "tool_call", Raw: map[string]any{"b": 2, "a": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		e := res.Event
		if e.MachineID == nil || *e.MachineID != "laptop" || e.Signature == nil {
			t.Fatalf("%+v", e)
		}
		if err := verify.VerifyEventSignature(pub, e.Raw, *e.Signature); err != nil {
			t.Fatalf("stored signature: %v", err)
		}
		// AppendNext signs the same way, before it knows the place: the
		// signature covers raw only.
		next, err := c.AppendNext(ctx, client.Event{EventType: "tool_result", Raw: map[string]any{"exit": 0}})
		if err != nil {
			t.Fatal(err)
		}
		if n := next.Event; n.Signature == nil || verify.VerifyEventSignature(pub, n.Raw, *n.Signature) != nil || n.MachineSequence != 1 {
			t.Fatalf("signed AppendNext: %+v", n)
		}
		// A key that is not the registered one is refused.
		_, other, _ := ed25519.GenerateKey(nil)
		forger := newClient(t, s, token, client.WithSigner("laptop", other))
		_, err = forger.Append(ctx, client.Event{EventType: "tool_call", Raw: map[string]any{"a": 1}})
		var pe *client.Error
		if !errors.As(err, &pe) || pe.Status != 401 || pe.Code != "event_signature_invalid" {
			t.Fatalf("append signed by another key: %v", err)
		}
		if _, err := forger.AppendNext(ctx, client.Event{EventType: "tool_call", Raw: map[string]any{"a": 1}}); !client.IsCode(err, "event_signature_invalid") {
			t.Fatalf("AppendNext signed by another key: %v", err)
		}
	})
}

// The service's problems come back as *client.Error with the code, the
// validation fields and every other member.
func TestErrorsCarryTheProblemsCodeAndMembers(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "errors@example.com")
		c := newClient(t, s, token)
		ctx := context.Background()
		g, err := c.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(2)), AllowedTools: []string{"search"},
			ExpiresAt: new(client.FormatTimestamp(time.Now().Add(time.Hour)))})
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.GrantStatus(ctx, api.GrantStatusQuery{Subagent: "worker", Tool: str("search")})
		if err != nil || !st.Authorized || st.GrantRecord == nil || st.GrantID != g.Grant.GrantID || st.Remaining != 2 {
			t.Fatalf("status: %+v, %v", st, err)
		}
		if st, err := c.GrantStatus(ctx, api.GrantStatusQuery{Subagent: "worker", Tool: str("shell")}); err != nil || st.Authorized || st.Status != "tool_not_allowed" {
			t.Fatalf("status for another tool: %+v, %v", st, err)
		}
		_, err = c.UseGrant(ctx, g.Grant.GrantID, api.UseRequest{Subagent: new("worker"), N: new(int64(3))})
		var pe *client.Error
		if !errors.As(err, &pe) || pe.Status != 409 || pe.Code != "budget_exhausted" {
			t.Fatalf("use over budget: %v", err)
		}
		var remaining int64
		if !pe.Member("remaining", &remaining) || remaining != 2 {
			t.Fatalf("budget_exhausted members %v", pe.Members)
		}
		if !client.IsCode(err, "budget_exhausted") {
			t.Fatal("IsCode")
		}
		_, err = c.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(2)), ExpiresAt: new("tomorrow")})
		if !errors.As(err, &pe) || pe.Status != 422 || pe.Detail == "" {
			t.Fatalf("bad expiry: %v", err)
		}
		if _, err := client.New("ftp://x", token); err == nil {
			t.Fatal("a non-http base URL was accepted")
		}
	})
}

// injectTooMany answers 429 with Retry-After (after, default "2") to the
// first request, then lets requests through to the real server.
type injectTooMany struct {
	sent  atomic.Int32
	after string
}

func (i *injectTooMany) RoundTrip(r *http.Request) (*http.Response, error) {
	if i.sent.Add(1) == 1 {
		after := i.after
		if after == "" {
			after = "2"
		}
		body := `{"type":"urn:auditchain:problem:rate_limit_exceeded","title":"Too Many Requests","status":429,"detail":"slow down","code":"rate_limit_exceeded"}`
		return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {after}, "Content-Type": {"application/problem+json"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A 429 with Retry-After is waited for and retried; one asking for longer
// than the client's bound is returned.
func TestRetryAfterIsHonoured(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "retry@example.com")
		var waits []time.Duration
		sleep := client.WithSleep(func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil })
		c := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: &injectTooMany{}}), sleep)
		if _, err := c.Tip(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(waits) != 1 || waits[0] != 2*time.Second {
			t.Fatalf("waited %v, want once 2s", waits)
		}
		waits = nil
		short := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: &injectTooMany{}}), sleep,
			client.WithRetries(4, time.Second))
		if _, err := short.Tip(context.Background()); !client.IsCode(err, "rate_limit_exceeded") || len(waits) != 0 {
			t.Fatalf("Retry-After over the bound: %v, waited %v", err, waits)
		}
		// An HTTP date is waited until, on the client's clock.
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		dated := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: &injectTooMany{after: now.Add(5 * time.Second).Format(http.TimeFormat)}}),
			sleep, client.WithClock(func() time.Time { return now }))
		if _, err := dated.Tip(context.Background()); err != nil || len(waits) != 1 || waits[0] != 5*time.Second {
			t.Fatalf("Retry-After as a date: %v, waited %v", err, waits)
		}
	})
}

// The surface header is what the client was told, and it is stored.
func TestSurfaceIsSentAndStored(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "surface@example.com")
		c := newClient(t, s, token, client.WithSurface(client.SurfaceCLI))
		res, err := c.Append(context.Background(), client.Event{EventType: "note"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Event(context.Background(), res.Event.EventID)
		if err != nil || got.Event.Surface != "cli" {
			t.Fatalf("%+v, %v", got, err)
		}
		raw, _ := json.Marshal(got.Event)
		if strings.Contains(string(raw), `"raw"`) {
			t.Fatalf("the single read shows raw: %s", raw)
		}
	})
}
