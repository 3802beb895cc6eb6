package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// recorder passes requests to the real server and keeps the body of the
// last JSON answer of each route ("GET /v1/keys").
type recorder struct {
	mu     sync.Mutex
	bodies map[string][]byte
}

func (rec *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	rec.mu.Lock()
	rec.bodies[r.Method+" "+r.URL.Path] = b
	rec.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// exact holds the pkg/api shape T to the service's answer of route: every
// member the service sent is a field of T (strict decoding), and T encodes
// back to the same JSON (no field of T the service does not send).
func exact[T any](t *testing.T, rec *recorder, route string) {
	t.Helper()
	rec.mu.Lock()
	body, ok := rec.bodies[route]
	rec.mu.Unlock()
	if !ok {
		t.Fatalf("%s: no answer recorded", route)
	}
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: the answer does not fit %T: %v\n%s", route, v, err, body)
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%s: %T encodes differently from the answer:\nanswer %s\ntype   %s", route, v, body, again)
	}
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// Every built route has a client method, and the pkg/api shapes are the
// service's answers exactly.
func TestEveryRouteThroughTheClient(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := httpapitest.Start(t, dsn, apptest.Options{Config: func(c *config.Config) {
			c.Teams, c.WebhookAllowPrivate = true, true
		}})
		userID, token := s.Account(t, "routes@example.com")
		rec := &recorder{bodies: map[string][]byte{}}
		hc := &http.Client{Transport: rec}
		c := newClient(t, s, token, client.WithHTTPClient(hc))
		ctx := context.Background()

		h := must[*api.Health](t)(c.Health(ctx))
		if h.Status != "ok" {
			t.Fatalf("health %+v", h)
		}
		exact[api.Health](t, rec, "GET /v1/health")

		// Keys.
		k := must[*api.KeyCreated](t)(c.CreateKey(ctx, api.CreateKeyRequest{Scopes: []string{"governance"}, Label: str("second")}))
		exact[api.KeyCreated](t, rec, "POST /v1/keys")
		if keys := must[*api.KeyList](t)(c.Keys(ctx)); keys.Count != 2 {
			t.Fatalf("%d keys", keys.Count)
		}
		exact[api.KeyList](t, rec, "GET /v1/keys")

		// The record: appends, a signing key, machines, the probe.
		for i := range 3 {
			must[*api.AppendResponse](t)(c.Append(ctx, client.Event{EventType: "tool_call", Tool: str("search"), Decision: str("allow"),
				Raw: map[string]any{"input_sha256": strings.Repeat("cd", 32), "i": i}}))
		}
		exact[api.AppendResponse](t, rec, "POST /v1/events")
		must[*api.AppendResponse](t)(c.AppendNext(ctx, client.Event{EventType: "tool_result", Tool: str("search"),
			Raw: map[string]any{"result_sha256": strings.Repeat("ef", 32)}}))
		exact[api.AppendResponse](t, rec, "POST /v1/events/append")
		last := must[*api.SearchResponse](t)(c.Search(ctx, api.SearchRequest{}))
		exact[api.SearchResponse](t, rec, "POST /v1/events/search")
		must[*api.EventRead](t)(c.Event(ctx, last.Results[0].EventID))
		exact[api.EventRead](t, rec, "GET /v1/events/"+last.Results[0].EventID)
		must[*api.ChainTip](t)(c.Tip(ctx))
		exact[api.ChainTip](t, rec, "GET /v1/chain/tip")
		b := must[*api.BatchResponse](t)(c.AppendBatch(ctx, api.BatchRequest{Events: []api.EventInput{{EventID: new("evt-00ff"), EventType: new("note"), Sequence: new(int64(4)),
			PrevHash: &last.Results[0].PayloadHash}}}))
		if b.Ingested != 1 {
			t.Fatalf("batch %+v", b)
		}
		exact[api.BatchResponse](t, rec, "POST /v1/events/batch")
		c.ForgetTip() // the batch row moved the tip past the client's view
		pub, _ := newKey(t)
		must[*api.SigningKeyRegistered](t)(c.RegisterSigningKey(ctx, "laptop", pub))
		exact[api.SigningKeyRegistered](t, rec, "PUT /v1/machines/laptop/signing-key")
		if ms := must[*api.MachineList](t)(c.Machines(ctx)); ms.Count != 1 || ms.Machines[0].CurrentFingerprint == nil {
			t.Fatalf("machines %+v", ms)
		}
		exact[api.MachineList](t, rec, "GET /v1/machines")
		d := must[*api.PolicyDecision](t)(c.PolicyTest(ctx, api.PolicyTestRequest{Tool: "search", ToolInput: json.RawMessage(`{"q":"x"}`)}))
		if d.SemanticKey == "" {
			t.Fatalf("policy %+v", d)
		}
		exact[api.PolicyDecision](t, rec, "POST /v1/policy/test")

		// Integrity, checked offline too.
		if _, _, err := s.App.Seal(ctx, userID); err != nil {
			t.Fatal(err)
		}
		must[*api.BlockPage](t)(c.Blocks(ctx, nil, 0))
		exact[api.BlockPage](t, rec, "GET /v1/chain/blocks")
		if v := must[*api.ChainVerification](t)(c.VerifyChain(ctx)); !v.Valid {
			t.Fatalf("verify %+v", v)
		}
		exact[api.ChainVerification](t, rec, "GET /v1/chain/verify")
		servicePub := must[[]byte](t)(toBytes(c.ServicePublicKey(ctx)))
		must[*api.InclusionProof](t)(c.VerifyInclusion(ctx, last.Results[1].EventID, servicePub))
		exact[api.InclusionProof](t, rec, "GET /v1/chain/proof/inclusion")
		must[*api.ConsistencyProof](t)(c.ConsistencyProof(ctx, 1, nil))
		exact[api.ConsistencyProof](t, rec, "GET /v1/chain/proof/consistency")
		if _, err := c.VerifyExport(ctx, servicePub); err != nil {
			t.Fatalf("offline verification of the export: %v", err)
		}

		// Heal.
		must[*api.HealScan](t)(c.HealScan(ctx, api.HealScanRequest{}))
		exact[api.HealScan](t, rec, "POST /v1/heal/scan")
		must[*api.HealRun](t)(c.HealRun(ctx, api.HealRunRequest{}))
		exact[api.HealRun](t, rec, "POST /v1/heal/run")
		must[*api.HealStatus](t)(c.HealStatus(ctx))
		exact[api.HealStatus](t, rec, "GET /v1/heal/status")
		must[*api.HealAutoTask](t)(c.HealAutoStart(ctx, api.HealAutoStartRequest{}))
		exact[api.HealAutoTask](t, rec, "POST /v1/heal/auto/start")
		if st := must[*api.HealAutoStop](t)(c.HealAutoStop(ctx)); !st.Stopped {
			t.Fatalf("auto stop %+v", st)
		}
		exact[api.HealAutoStop](t, rec, "POST /v1/heal/auto/stop")

		// Grants and governance.
		g := must[*api.GrantCreated](t)(c.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(5)),
			AllowedTools: []string{"search"}, ExpiresAt: new(client.FormatTimestamp(time.Now().Add(time.Hour)))}))
		exact[api.GrantCreated](t, rec, "POST /v1/grants")
		must[*api.GrantStatus](t)(c.GrantStatus(ctx, api.GrantStatusQuery{Subagent: "worker"}))
		exact[api.GrantStatus](t, rec, "GET /v1/grants/status")
		must[*api.UseResult](t)(c.UseGrant(ctx, g.Grant.GrantID, api.UseRequest{Subagent: new("worker"), N: new(int64(1))}))
		exact[api.UseResult](t, rec, "POST /v1/grants/"+g.Grant.GrantID+"/use")
		tc := must[*api.ToolCallResponse](t)(c.GateToolCall(ctx, api.ToolCallRequest{Subagent: new("worker"), Tool: new("search"),
			Raw: json.RawMessage(`{"input_sha256":"ab"}`)}))
		exact[api.ToolCallResponse](t, rec, "POST /v1/tool-calls")
		if tc.Decision != "allow" || !tc.Metered || tc.Uses == nil || *tc.Uses != 2 {
			t.Fatalf("tool call = %+v", tc)
		}
		// The recorded call is the client's tip: the next append extends it.
		if next := must[*api.AppendResponse](t)(c.Append(ctx, client.Event{EventType: "tool_result",
			Raw: map[string]any{"result_sha256": "cd"}, ParentID: &tc.Event.EventID})); next.Event.PrevHash == nil || *next.Event.PrevHash != tc.Event.PayloadHash {
			t.Fatalf("append after the tool call: %+v", next.Event)
		}
		must[*api.GrantList](t)(c.Grants(ctx, ""))
		exact[api.GrantList](t, rec, "GET /v1/grants")
		must[*api.RevokeResult](t)(c.RevokeGrant(ctx, g.Grant.GrantID, api.RevokeRequest{Subagent: new("worker")}))
		exact[api.RevokeResult](t, rec, "POST /v1/grants/"+g.Grant.GrantID+"/revoke")
		must[*api.DelegationPublicKey](t)(c.DelegationPublicKey(ctx))
		exact[api.DelegationPublicKey](t, rec, "GET /v1/delegation/public-key")
		if _, err := client.VerifyDelegation(g.Delegation, servicePub); err != nil {
			t.Fatalf("delegation token: %v", err)
		}
		p := must[*api.Proposal](t)(c.Propose(ctx, api.CreateProposalRequest{Kind: new("deny_scope"),
			Subject: &api.ProposalSubject{Subagent: new("worker"), Tool: str("shell")}, Evidence: &api.ProposalEvidence{BlockedAttempts: new(3)}}))
		exact[api.ProposalResponse](t, rec, "POST /v1/governance/proposals")
		ratifier := newClient(t, s, k.APIKey, client.WithHTTPClient(hc))
		must[*api.Proposal](t)(ratifier.Ratify(ctx, p.ProposalID, str("reviewed")))
		exact[api.ProposalResponse](t, rec, "POST /v1/governance/proposals/"+p.ProposalID+"/ratify")
		if e := must[*api.Proposal](t)(c.Enact(ctx, p.ProposalID, nil)); e.Status != "enacted" {
			t.Fatalf("enact %+v", e)
		}
		must[*api.Proposal](t)(c.Proposal(ctx, p.ProposalID))
		exact[api.ProposalResponse](t, rec, "GET /v1/governance/proposals/"+p.ProposalID)
		must[*api.ProposalList](t)(c.Proposals(ctx, api.ProposalQuery{Status: "enacted"}))
		exact[api.ProposalList](t, rec, "GET /v1/governance/proposals")
		if _, err := c.Reject(ctx, p.ProposalID, nil); !client.IsCode(err, "invalid_transition") {
			t.Fatalf("reject an enacted proposal: %v", err)
		}

		// Notifications, webhooks, usage.
		must[*api.TestNotificationResult](t)(c.TestNotification(ctx, api.TestNotificationRequest{Type: new("grant.revoked")}))
		exact[api.TestNotificationResult](t, rec, "POST /v1/notifications/test")
		np := must[*api.NotificationPage](t)(c.Notifications(ctx, api.NotificationQuery{Limit: 2}))
		if len(np.Notifications) == 0 {
			t.Fatal("no notification rows after a revoke")
		}
		exact[api.NotificationPage](t, rec, "GET /v1/notifications")
		must[*api.Preferences](t)(c.Preferences(ctx))
		exact[api.Preferences](t, rec, "GET /v1/notifications/preferences")
		pr := must[*api.PreferencesResult](t)(c.SetPreferences(ctx, api.PreferencesRequest{Preferences: []api.PreferenceInput{
			{Type: new("grant.revoked"), Channel: new("email"), Enabled: new(false)}, {Type: new("no.such"), Channel: new("email")}}}))
		if pr.Accepted != 1 || len(pr.Rejected) != 1 {
			t.Fatalf("preferences %+v", pr)
		}
		exact[api.PreferencesResult](t, rec, "PUT /v1/notifications/preferences")
		wh := must[*api.WebhookCreated](t)(c.CreateWebhook(ctx, api.CreateWebhookRequest{URL: new("http://127.0.0.1:9/hook")}))
		exact[api.WebhookCreated](t, rec, "POST /v1/webhooks")
		must[*api.WebhookList](t)(c.Webhooks(ctx))
		exact[api.WebhookList](t, rec, "GET /v1/webhooks")
		must[*api.WebhookDeliveries](t)(c.WebhookDeliveries(ctx, wh.ID))
		exact[api.WebhookDeliveries](t, rec, "GET /v1/webhooks/"+wh.ID+"/deliveries")
		if err := c.DeleteWebhook(ctx, wh.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Redeliver(ctx, np.Notifications[0].ID); !client.IsCode(err, "notification_not_failed") {
			t.Fatalf("redeliver a row that did not fail: %v", err)
		}
		must[*api.Usage](t)(c.Usage(ctx))
		exact[api.Usage](t, rec, "GET /v1/dashboard/usage")

		// Legal.
		docs := must[*api.LegalDocuments](t)(c.LegalDocuments(ctx))
		exact[api.LegalDocuments](t, rec, "GET /v1/legal/documents")
		doc := docs.Documents[0]
		text := must[*api.LegalText](t)(c.LegalText(ctx, doc.DocumentID))
		if text.ContentHash != doc.ContentHash || text.Version != doc.Version || text.Text == "" {
			t.Fatalf("legal text %+v against %+v", text, doc)
		}
		// Accepting is a signed-in person's act: an API key is refused
		// (the session's acceptance is in auth_test.go).
		if _, err := c.AcceptLegal(ctx, api.AcceptRequest{Accepted: new(true), DocumentID: new(doc.DocumentID),
			Version: new(doc.Version), ContentHash: new(doc.ContentHash)}); !client.IsCode(err, "session_required") {
			t.Fatalf("accept with a key: %v", err)
		}
		must[*api.Acceptances](t)(c.Acceptances(ctx))
		exact[api.Acceptances](t, rec, "GET /v1/legal/acceptances")

		// Teams.
		team := must[*api.Team](t)(c.CreateTeam(ctx, "platform"))
		exact[api.TeamCreated](t, rec, "POST /v1/orgs")
		must[*api.TeamList](t)(c.Teams(ctx))
		exact[api.TeamList](t, rec, "GET /v1/orgs")
		must[*api.TeamDetail](t)(c.Team(ctx, team.OrgID))
		exact[api.TeamDetail](t, rec, "GET /v1/orgs/"+team.OrgID)
		must[*api.TeamMember](t)(c.Invite(ctx, team.OrgID, "friend@example.com", "viewer"))
		exact[api.TeamMemberResponse](t, rec, "POST /v1/orgs/"+team.OrgID+"/invite")
		must[*api.TeamMembers](t)(c.TeamMembers(ctx, team.OrgID))
		exact[api.TeamMembers](t, rec, "GET /v1/orgs/"+team.OrgID+"/members")
		must[*api.TeamKeys](t)(c.TeamKeys(ctx, team.OrgID))
		exact[api.TeamKeys](t, rec, "GET /v1/orgs/"+team.OrgID+"/keys")
		if err := c.RemoveTeamMember(ctx, team.OrgID, "friend@example.com"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AcceptInvitation(ctx, team.OrgID); err == nil {
			t.Fatal("accepted an invitation that was withdrawn")
		}

		// Keys last: a revoked key stops working.
		must[*api.Key](t)(c.RevokeKey(ctx, k.ID))
		exact[api.KeyRevoked](t, rec, "POST /v1/keys/"+k.ID+"/revoke")
		if _, err := ratifier.Proposals(ctx, api.ProposalQuery{}); !client.IsCode(err, "invalid_or_expired_api_key") {
			t.Fatalf("a revoked key: %v", err)
		}
	})
}

func newKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func toBytes[T ~[]byte](v T, err error) ([]byte, error) { return []byte(v), err }
