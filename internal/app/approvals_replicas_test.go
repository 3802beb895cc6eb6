package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// An approval is used at most once: 50 concurrent resends of one approved
// call — on PostgreSQL through two replicas over one database, on SQLite
// through one — allow exactly one; the others are denied approval_used,
// and the grant is metered once.
func TestApprovalUsedOnceUnderConcurrentResends(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		replicas := []*app.App{apptest.New(t, storetest.Open(t, dsn), apptest.Options{})}
		if strings.HasPrefix(dsn, "postgres") {
			replicas = append(replicas, apptest.New(t, storetest.Open(t, dsn), apptest.Options{}))
		}
		a := replicas[0]
		ctx := context.Background()
		acct, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: "once@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		agent := app.Principal{UserID: acct.UserID, KeyID: "k-agent", Kind: app.KindAPIKey}
		approver := app.Principal{UserID: acct.UserID, KeyID: "k-approver", Kind: app.KindAPIKey}
		if _, err := a.CreateGrant(ctx, agent, api.CreateGrantRequest{Subagent: new("s"), AllowedTools: []string{"bash"},
			MaxToolCalls: new(int64(100)), ExpiresAt: new(domain.FormatTimestamp(a.Now().Add(time.Hour)))}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateApprovalRule(ctx, agent, api.CreateApprovalRuleRequest{Subagent: new("s"), Tool: new("bash")}); err != nil {
			t.Fatal(err)
		}
		digest := strings.Repeat("ab", 32)
		call := func(eventID string, approvalID *string) api.ToolCallRequest {
			raw, _ := json.Marshal(map[string]string{"tool_input_sha256": digest})
			return api.ToolCallRequest{Subagent: new("s"), Tool: new("bash"), EventID: new(eventID), Raw: raw, ApprovalID: approvalID}
		}
		asked, err := a.GateToolCall(ctx, agent, call("evt-once-0", nil), "rest")
		if err != nil || asked.Decision != api.DecisionAsk || asked.Approval == nil {
			t.Fatalf("ask = %+v, %v", asked, err)
		}
		id := asked.Approval.ApprovalID
		if _, err := replicas[len(replicas)-1].DecideApproval(ctx, approver, id, true, nil); err != nil {
			t.Fatal(err)
		}

		const resends = 50
		decisions := make(chan app.ToolCallResult, resends)
		var wg sync.WaitGroup
		for i := range resends {
			r := replicas[i%len(replicas)]
			wg.Go(func() {
				res, err := r.GateToolCall(ctx, agent, call(fmt.Sprintf("evt-once-%d", i+1), &id), "rest")
				if err != nil {
					t.Error(err)
					return
				}
				decisions <- res
			})
		}
		wg.Wait()
		close(decisions)
		allowed, used := 0, 0
		for res := range decisions {
			switch {
			case res.Decision == api.DecisionAllow && res.Metered:
				allowed++
			case res.Decision == api.DecisionDeny && res.Gate.Status == domain.GateApprovalUsed && !res.Metered:
				used++
			default:
				t.Errorf("unexpected answer: %s %s", res.Decision, res.Gate.Status)
			}
		}
		if allowed != 1 || used != resends-1 {
			t.Fatalf("%d allowed, %d approval_used of %d resends; want 1 and %d", allowed, used, resends, resends-1)
		}
		st, err := a.GrantStatus(ctx, agent, api.GrantStatusQuery{Subagent: "s"}, a.Now())
		if err != nil || st.Uses != 1 {
			t.Fatalf("grant uses = %+v, %v; want 1", st, err)
		}
		got, err := a.GetApproval(ctx, approver, id, 0)
		if err != nil || got.Status != api.ApprovalUsed {
			t.Fatalf("approval = %+v, %v", got, err)
		}
	})
}
