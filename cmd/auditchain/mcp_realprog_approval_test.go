package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/internal/realprog"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// Per-call approvals through `auditchain mcp proxy` with the real programs
// (docs/mcp.md "Approvals"): the TypeScript SDK's client as the host and
// server-everything upstream, its echo held by an approval rule. What the
// client received decides: the echo's own answer, or the proxy's refusal.

// approvalProxyWorld is a service (on store) whose sub-agent "everything"
// may call echo 10 times, an approval rule holding echo, and a person's key
// holding only the approvals capability.
type approvalProxyWorld struct {
	s      *httpapitest.Server
	user   string
	token  string
	c      *client.Client
	person *client.Client
}

func newApprovalProxyWorld(t *testing.T, store storetest.Backend) *approvalProxyWorld {
	t.Helper()
	ctx := context.Background()
	s := httpapitest.Start(t, storetest.DSN(t, store), apptest.Options{})
	user, token := s.Account(t, "proxy-approvals@example.com")
	c, err := client.New(s.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new("everything"), MaxToolCalls: new(int64(10)), AllowedTools: []string{"echo"},
		ExpiresAt: new(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateApprovalRule(ctx, api.ApprovalRuleRequest{Subagent: new("everything"), Tool: new("echo")}); err != nil {
		t.Fatal(err)
	}
	person, err := client.New(s.URL, s.Key(t, user, api.CreateKeyRequest{Scopes: []string{"approvals"}}))
	if err != nil {
		t.Fatal(err)
	}
	return &approvalProxyWorld{s: s, user: user, token: token, c: c, person: person}
}

// plan runs the proxy with flags in front of server-everything.
func (w *approvalProxyWorld) plan(everything string, flags ...string) hostPlan {
	argv, _ := json.Marshal(append(append([]string{"mcp", "proxy", "--url", w.s.URL, "--api-key", w.token, "--subagent", "everything"}, flags...),
		"--", everything))
	return hostPlan{Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{childServeEnv: string(argv)}}
}

// uses reads the meter of the sub-agent's grant: each call that ran.
func (w *approvalProxyWorld) uses(t *testing.T) int64 {
	t.Helper()
	st, err := w.c.GrantStatus(context.Background(), api.GrantStatusQuery{Subagent: "everything"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Uses
}

// approvals lists the account's approvals, newest first.
func (w *approvalProxyWorld) approvals(t *testing.T) []api.Approval {
	t.Helper()
	l, err := w.person.Approvals(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return l.Approvals
}

// proveOffline verifies the export with the service's key and answers how
// many approved calls it proves, and its approval events by approval id.
func (w *approvalProxyWorld) proveOffline(t *testing.T) (int64, map[string]api.ApprovalEvent) {
	t.Helper()
	hw := &hookWorld{c: w.c}
	rep := hw.verifyOfflineAbove(t, 0) // no gap: every event is on the chain
	decided := map[string]api.ApprovalEvent{}
	for _, e := range hw.exported(t) {
		if e.EventType == api.EventApprovalGranted || e.EventType == api.EventApprovalDenied {
			var raw api.ApprovalEvent
			if err := json.Unmarshal(e.Raw, &raw); err != nil {
				t.Fatal(err)
			}
			decided[raw.ApprovalID] = raw
		}
	}
	return rep.ApprovedCalls, decided
}

func echoed(t *testing.T, run hostRun, i int, want string) {
	t.Helper()
	r := run.Results[i]
	if r.Error != nil || r.Result.IsError || len(r.Result.Content) == 0 || r.Result.Content[0]["text"] != "Echo: "+want {
		t.Fatalf("call %d: %+v %+v, want the echo of %q", i, r.Result, r.Error, want)
	}
}

func TestRealProxyApprovals(t *testing.T) {
	t.Parallel()
	everything := realprog.Bin(t, "mcp-server-everything")
	for _, store := range []storetest.Backend{storetest.SQLite, storetest.Postgres} {
		// The proxy waits (--approval-wait); a person approves through the
		// API during the wait; the echo runs. Then, with a wait nobody
		// answers in time, the client receives the refusal naming the
		// approval and saying it may try again later; the person approves;
		// the client's retry of the same call runs, once.
		t.Run(string(store)+"/wait", func(t *testing.T) {
			t.Parallel()
			w := newApprovalProxyWorld(t, store)
			approved := approveOnAsk(t, w.c, w.person)
			plan := w.plan(everything, "--approval-wait", "20s")
			plan.Calls = []hostCall{{Name: "echo", Arguments: map[string]any{"message": "approved while waiting"}}}
			echoed(t, runHost(t, plan), 0, "approved while waiting")
			if err := <-approved; err != nil {
				t.Fatalf("approving: %v", err)
			}

			plan = w.plan(everything, "--approval-wait", "2s")
			later := map[string]any{"message": "later"}
			plan.Calls = []hostCall{{Name: "echo", Arguments: later}, {Name: "echo", Arguments: later, Pause: true}}
			var pending string
			run := runHostPausing(t, plan, func(int) {
				aps := w.approvals(t)
				if aps[0].Status != api.ApprovalPending {
					t.Errorf("before the retry the approval is %s, want pending", aps[0].Status)
				}
				pending = aps[0].ApprovalID
				if _, err := w.person.Approve(context.Background(), pending, nil); err != nil {
					t.Error(err)
				}
			})
			if text := refusalText(t, run, 0); !strings.HasPrefix(text, "refused: approval_pending: ") || !strings.Contains(text, pending) ||
				!strings.Contains(text, "try the same call again later") {
				t.Fatalf("the held call: %q, want the approval %s and that it may try again later", text, pending)
			}
			echoed(t, run, 1, "later")
			aps := w.approvals(t)
			if len(aps) != 2 || aps[0].Status != api.ApprovalUsed || aps[1].Status != api.ApprovalUsed {
				t.Fatalf("approvals: %+v, want two, each used", aps)
			}
			if n, _ := w.proveOffline(t); n != 2 || w.uses(t) != 2 {
				t.Fatalf("the export proves %d approved calls and %d uses are metered, want 2 and 2", n, w.uses(t))
			}
		})
		// --approval-elicit: the client, which declares elicitation, is
		// asked; it accepts the first call (which runs once, the chain's
		// approval.granted naming the approver key and the host's user
		// through elicitation) and declines the second (refused, never run).
		t.Run(string(store)+"/elicitation", func(t *testing.T) {
			t.Parallel()
			w := newApprovalProxyWorld(t, store)
			approverKey, err := w.s.App.CreateKey(context.Background(), w.user, api.CreateKeyRequest{Label: new("elicitation"), Scopes: []string{"approvals"}})
			if err != nil {
				t.Fatal(err)
			}
			plan := w.plan(everything, "--approval-wait", "20s", "--approval-elicit")
			plan.Env["AUDITCHAIN_APPROVER_KEY"] = approverKey.APIKey
			plan.Elicit = []map[string]any{{"action": "accept", "content": map[string]any{"note": "fine by me"}}, {"action": "decline"}}
			ship, drop := map[string]any{"message": "ship it"}, map[string]any{"message": "drop it"}
			plan.Calls = []hostCall{{Name: "echo", Arguments: ship}, {Name: "echo", Arguments: drop}}
			run := runHost(t, plan)
			echoed(t, run, 0, "ship it")
			if text := refusalText(t, run, 1); !strings.HasPrefix(text, "refused: approval_denied: ") {
				t.Fatalf("the declined call: %q", text)
			}
			if len(run.Elicitations) != 2 {
				t.Fatalf("%d elicitations, want 2", len(run.Elicitations))
			}
			digest, _ := mcpserver.ArgumentsHash(json.RawMessage(`{"message":"ship it"}`))
			for _, want := range []string{`"everything"`, `"echo"`, `{"message":"ship it"}`, digest} {
				if !strings.Contains(run.Elicitations[0].Message, want) {
					t.Errorf("the question does not name %s: %s", want, run.Elicitations[0].Message)
				}
			}
			aps := w.approvals(t)
			if len(aps) != 2 || aps[0].Status != api.ApprovalDenied || aps[1].Status != api.ApprovalUsed {
				t.Fatalf("approvals: %+v, want one denied and one used", aps)
			}
			if u := w.uses(t); u != 1 {
				t.Fatalf("%d uses metered, want the accepted call's 1", u)
			}
			n, decided := w.proveOffline(t)
			granted, denied := decided[aps[1].ApprovalID], decided[aps[0].ApprovalID]
			wantNote := mcpserver.ElicitationNote + " (auditchain mcp proxy; host auditchain-test-host 1)"
			if n != 1 || granted.Approver.Identity != approverKey.ID || granted.Approver.Kind != "api_key" || granted.Note == nil ||
				*granted.Note != wantNote+": fine by me" || granted.RequestedBy.Identity == approverKey.ID {
				t.Fatalf("approved calls %d; approval.granted %+v (note %v)", n, granted, granted.Note)
			}
			if denied.Approver.Identity != approverKey.ID || denied.Note == nil || *denied.Note != wantNote {
				t.Fatalf("approval.denied %+v (note %v)", denied, denied.Note)
			}
		})
	}
}
