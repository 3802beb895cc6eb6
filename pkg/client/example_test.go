package client_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// The examples run against a real server on SQLite, started once for them
// (examples get no *testing.T); TestMain stops it.

func TestMain(m *testing.M) {
	code := m.Run()
	examples.stop()
	os.Exit(code)
}

var examples exampleEnv

type exampleEnv struct {
	once     sync.Once
	tb       *mainTB
	srv      *httpapitest.Server
	accounts int
}

// exampleAccount returns the base URL of the examples' server and the key
// of a new account.
func exampleAccount() (baseURL, apiKey string) {
	examples.once.Do(func() {
		examples.tb = &mainTB{}
		examples.srv = httpapitest.Start(examples.tb, storetest.DSN(examples.tb, storetest.SQLite), apptest.Options{})
	})
	examples.accounts++
	_, token := examples.srv.Account(examples.tb, fmt.Sprintf("example%d@example.com", examples.accounts))
	return examples.srv.URL, token
}

func (e *exampleEnv) stop() {
	if e.tb != nil {
		e.tb.cleanup()
	}
}

// mainTB is the testing.TB the examples' server is built with: failures
// panic (failing the example), cleanups run from TestMain.
type mainTB struct {
	testing.TB // nil: only the methods below are called
	cleanups   []func()
	dir        string
}

func (t *mainTB) Helper()                           {}
func (t *mainTB) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *mainTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (t *mainTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *mainTB) Logf(format string, args ...any)   {}
func (t *mainTB) TempDir() string {
	if t.dir == "" {
		d, err := os.MkdirTemp("", "client-examples-")
		if err != nil {
			panic(err)
		}
		t.dir = d
	}
	return t.dir
}

func (t *mainTB) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	if t.dir != "" {
		os.RemoveAll(t.dir)
	}
}

// Append keeps the chain: the first event is sequence 0 with no prev_hash,
// each next one links to the one before. The client reads the tip once and
// checks the payload_hash the service stored against its own.
func ExampleClient_Append() {
	baseURL, apiKey := exampleAccount()
	c, err := client.New(baseURL, apiKey)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	var prev string
	for i, tool := range []string{"search", "fetch", "summarise"} {
		res, err := c.Append(ctx, client.Event{
			EventID:   fmt.Sprintf("evt-example-%d", i),
			EventType: "tool_call",
			Tool:      &tool,
			Raw:       map[string]any{"input_sha256": fmt.Sprintf("%064x", i)},
		})
		if err != nil {
			panic(err)
		}
		e := res.Event
		fmt.Println(e.EventID, e.Sequence, e.PrevHash == nil || *e.PrevHash == prev, e.Surface)
		prev = e.PayloadHash
	}
	// Output:
	// evt-example-0 0 true sdk
	// evt-example-1 1 true sdk
	// evt-example-2 2 true sdk
}

// A signed append: register the machine's public key once, then every event
// the client appends carries machine_id, signature and signature_key, and
// the service refuses an event of that machine whose signature fails.
func ExampleWithSigner() {
	baseURL, apiKey := exampleAccount()
	ctx := context.Background()
	pub, priv, _ := ed25519.GenerateKey(nil)
	admin, _ := client.New(baseURL, apiKey)
	if _, err := admin.RegisterSigningKey(ctx, "build-box", pub); err != nil {
		panic(err)
	}
	c, _ := client.New(baseURL, apiKey, client.WithSigner("build-box", priv))
	res, err := c.Append(ctx, client.Event{EventType: "tool_call", Raw: map[string]any{"cmd_sha256": fmt.Sprintf("%064x", 7)}})
	if err != nil {
		panic(err)
	}
	fmt.Println(*res.Event.MachineID, res.Event.Signature != nil, res.Event.Sequence)
	// Output: build-box true 1
}

// Poll the gate before delegating; record the calls made.
func ExampleClient_GrantStatus() {
	baseURL, apiKey := exampleAccount()
	c, _ := client.New(baseURL, apiKey)
	ctx := context.Background()
	g, err := c.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new("researcher"), MaxToolCalls: new(int64(2)),
		AllowedTools: []string{"search"}, ExpiresAt: new(client.FormatTimestamp(time.Now().Add(time.Hour)))})
	if err != nil {
		panic(err)
	}
	for _, tool := range []string{"search", "shell"} {
		st, err := c.GrantStatus(ctx, api.GrantStatusQuery{Subagent: "researcher", Tool: &tool})
		if err != nil {
			panic(err)
		}
		fmt.Println(tool, st.Status, st.Authorized)
	}
	used, _ := c.UseGrant(ctx, g.Grant.GrantID, api.UseRequest{Subagent: new("researcher"), N: new(int64(2))})
	fmt.Println("remaining", used.Remaining)
	st, _ := c.GrantStatus(ctx, api.GrantStatusQuery{Subagent: "researcher"})
	fmt.Println(st.Status)
	// Output:
	// search authorized true
	// shell tool_not_allowed false
	// remaining 0
	// budget_exhausted
}

// The service's refusals are *client.Error values with the problem's code
// and members.
func ExampleError() {
	baseURL, apiKey := exampleAccount()
	c, _ := client.New(baseURL, apiKey)
	ctx := context.Background()
	g, _ := c.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(1)),
		ExpiresAt: new(client.FormatTimestamp(time.Now().Add(time.Hour)))})
	_, err := c.UseGrant(ctx, g.Grant.GrantID, api.UseRequest{Subagent: new("worker"), N: new(int64(5))})
	var pe *client.Error
	if errors.As(err, &pe) {
		var remaining int
		pe.Member("remaining", &remaining)
		fmt.Println(pe.Status, pe.Code, remaining)
	}
	// Output: 409 budget_exhausted 1
}

// Governance: a proposal is ratified by another identity (a second key),
// then enacted; the gate then refuses the tool, naming the proposal.
func ExampleClient_Ratify() {
	baseURL, apiKey := exampleAccount()
	ctx := context.Background()
	proposer, _ := client.New(baseURL, apiKey)
	k, err := proposer.CreateKey(ctx, api.CreateKeyRequest{Label: new("reviewer")})
	if err != nil {
		panic(err)
	}
	reviewer, _ := client.New(baseURL, k.APIKey)
	p, _ := proposer.Propose(ctx, api.CreateProposalRequest{Kind: new("deny_scope"),
		Subject: &api.ProposalSubject{Subagent: new("worker"), Tool: new("shell")}, Evidence: &api.ProposalEvidence{BlockedAttempts: new(3)}})
	_, err = proposer.Ratify(ctx, p.ProposalID, nil)
	fmt.Println(client.IsCode(err, "separation_of_powers"))
	r, _ := reviewer.Ratify(ctx, p.ProposalID, new("reviewed"))
	e, _ := reviewer.Enact(ctx, p.ProposalID, nil)
	fmt.Println(r.Status, e.Status)
	_, _ = proposer.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(5)),
		ExpiresAt: new(client.FormatTimestamp(time.Now().Add(time.Hour)))})
	st, _ := proposer.GrantStatus(ctx, api.GrantStatusQuery{Subagent: "worker", Tool: new("shell")})
	fmt.Println(st.Status, st.ProposalID == p.ProposalID)
	// Output:
	// true
	// ratified enacted
	// denied_by_governance true
}

// Offline verification: the export checked with the service's public key
// (pin it; here it is read from the service).
func ExampleClient_VerifyExport() {
	baseURL, apiKey := exampleAccount()
	c, _ := client.New(baseURL, apiKey)
	ctx := context.Background()
	for range 3 {
		if _, err := c.Append(ctx, client.Event{EventType: "note"}); err != nil {
			panic(err)
		}
	}
	pub, err := c.ServicePublicKey(ctx)
	if err != nil {
		panic(err)
	}
	rep, err := c.VerifyExport(ctx, pub)
	fmt.Println(err == nil, rep.LastSequence)
	// Output: true 2
}

// The live stream: every event appended after "ready" is delivered; a
// dropped connection is reconnected and what was missed is delivered first.
func ExampleClient_Stream() {
	baseURL, apiKey := exampleAccount()
	c, _ := client.New(baseURL, apiKey)
	writer, _ := client.New(baseURL, apiKey)
	ctx := context.Background()
	err := c.Stream(ctx, func(m client.StreamMessage) error {
		switch m.Kind {
		case "ready":
			_, err := writer.Append(ctx, client.Event{EventID: "evt-streamed", EventType: "tool_call", Tool: new("search")})
			return err
		case "event":
			fmt.Println(m.Event.EventID, m.Event.Sequence, *m.Event.Tool)
			return client.ErrStopStream
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// evt-streamed 0 search
	// <nil>
}
