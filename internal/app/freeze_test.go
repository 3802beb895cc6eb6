package app_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/anchor"
	"github.com/auditchain/auditchain/internal/anchor/anchortest"
	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// No client input can freeze an account (CONTRACT.md "Batch": the 2^52 cap
// binds what clients choose, and the space above is the service's): after
// any sequence of client inputs — single appends and batches at any sequence
// a JSON number can carry (0, 1, gaps, 2^52 - 1, 2^52 itself, above it),
// with any prev_hash, refused or stored — every event the service numbers
// itself still goes on at the tip of that account: a gated tool call with
// its results (POST /v1/tool-calls, which the hooks and the MCP proxy use),
// a client event appended at the tip (POST /v1/events/append, the MCP
// record_event tool's and the hooks' results),
// a grant and its revocation, a proposal ratified and enacted, a machine's
// signing key, a heal run's repairs and an anchor. The service's writes are
// also interleaved with the client's. A property test over seeded random
// histories (math/rand/v2, reproducible by round), on both stores.
func TestNoClientInputFreezesAnAccount(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		tsa, err := anchortest.NewTSA()
		if err != nil {
			t.Fatal(err)
		}
		tsaServer := httptest.NewServer(tsa)
		t.Cleanup(tsaServer.Close)
		a := apptest.New(t, storetest.Open(t, dsn), apptest.Options{Config: func(c *config.Config) {
			c.DailyEventQuota, c.BatchRateLimit = 1<<30, 1<<30
			c.AnchorProvider, c.AnchorTSAURL = anchor.RFC3161, tsaServer.URL
		}})
		ctx := context.Background()
		sequences := []int64{0, 1, 2, 3, 7, 100, 1 << 40, domain.MaxClientSequence - 1, domain.MaxClientSequence,
			domain.MaxClientSequence, domain.MaxClientSequence + 1, 1 << 62, math.MaxInt64 - 1, math.MaxInt64, -1}
		rounds := 12
		if testing.Short() {
			rounds = 4
		}
		above := 0 // rounds whose client inputs reached 2^52 before the service's last writes
		for round := range rounds {
			r := rand.New(rand.NewPCG(uint64(round), 52))
			acct, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: fmt.Sprintf("freeze%d@example.com", round)})
			if err != nil {
				t.Fatal(err)
			}
			p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
			other := app.Principal{UserID: acct.UserID, KeyID: "k2", Kind: "api_key"}
			var history []string
			input := func(i int) api.EventInput {
				id, typ := fmt.Sprintf("evt-r%d-%d", round, i), "tool_call"
				seq := sequences[r.IntN(len(sequences))]
				if r.IntN(3) == 0 {
					seq = r.Int64N(200)
				}
				in := api.EventInput{EventID: &id, EventType: &typ, Sequence: &seq, Raw: json.RawMessage(`{}`)}
				switch r.IntN(3) {
				case 0:
					if tip, err := a.ChainTip(ctx, p); err == nil && tip.PayloadHash != nil {
						in.PrevHash = tip.PayloadHash
						if r.IntN(2) == 0 {
							next := tipSequence(tip) + 1
							in.Sequence = &next
						}
					}
				case 1:
					garbage := "sha256:" + fmt.Sprintf("%064x", r.Int64())
					in.PrevHash = &garbage
				}
				return in
			}
			fail := func(what string, err error) {
				t.Helper()
				t.Fatalf("round %d: %s after\n%s\n: %v", round, what, strings.Join(history, "\n"), err)
			}
			// Each service write must succeed; those that always append
			// (grows) must land above the tip they found: the service
			// numbers them, whatever the client stored. A heal run appends
			// only when it finds something to repair, an anchor only when
			// the tree changed.
			calls := 0
			serviceWrites := []struct {
				name  string
				grows bool
				write func() error
			}{
				{"tool call", true, func() error {
					calls++
					id := fmt.Sprintf("evt-r%d-call%d", round, calls)
					res, err := a.GateToolCall(ctx, p, api.ToolCallRequest{Subagent: new("worker"), Tool: new("bash"), EventID: &id,
						Raw:     json.RawMessage(`{"input_sha256":"ab"}`),
						Results: []api.ToolResult{{EventID: new(id + "-result"), Raw: json.RawMessage(`{"ok":true}`)}}}, "hook")
					if err == nil && res.Event.EventID != id {
						err = fmt.Errorf("recorded %s", res.Event.EventID)
					}
					return err
				}},
				{"append at the tip", true, func() error {
					// What the MCP record_event tool and the hooks' results
					// send (POST /v1/events/append): a client event the
					// service numbers.
					calls++
					id, typ := fmt.Sprintf("evt-r%d-next%d", round, calls), "tool_result"
					res, err := a.AppendNext(ctx, p, api.EventInput{EventID: &id, EventType: &typ, Raw: json.RawMessage(`{"ok":true}`)}, "mcp")
					if err == nil && (res.Event.EventID != id || res.Replayed) {
						err = fmt.Errorf("recorded %s (replayed %v)", res.Event.EventID, res.Replayed)
					}
					return err
				}},
				{"grant and revoke", true, func() error {
					created, err := a.CreateGrant(ctx, p, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(5)), ExpiresAt: new(domain.FormatTimestamp(time.Now().Add(time.Hour)))})
					if err != nil {
						return err
					}
					res, err := a.RevokeGrant(ctx, p, created.Grant.GrantID, api.RevokeRequest{Subagent: new("worker")})
					if err == nil && res.Outcome != app.OutcomeRevoked {
						err = fmt.Errorf("revoke: %s", res.Outcome)
					}
					return err
				}},
				{"proposal ratified and enacted", true, func() error {
					prop, err := a.CreateProposal(ctx, p, api.CreateProposalRequest{Kind: new("deny_scope"),
						Subject: &api.ProposalSubject{Subagent: new("other")}, Evidence: &api.ProposalEvidence{BlockedAttempts: new(3)}})
					if err != nil {
						return err
					}
					id := prop.Proposal.ProposalID
					if _, err := a.TransitionProposal(ctx, other, id, domain.ActionRatify, api.TransitionRequest{}); err != nil {
						return err
					}
					_, err = a.TransitionProposal(ctx, p, id, domain.ActionEnact, api.TransitionRequest{})
					return err
				}},
				{"signing key", true, func() error {
					seed := make([]byte, ed25519.SeedSize)
					for i := range seed {
						seed[i] = byte(r.Uint32())
					}
					pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
					_, err := a.RegisterSigningKey(ctx, p, "m1", base64.StdEncoding.EncodeToString(pub))
					return err
				}},
				{"heal run", false, func() error {
					_, err := a.HealRun(ctx, p, false, nil)
					return err
				}},
				{"anchor", false, func() error {
					res, err := a.AnchorSweep(ctx)
					if err == nil && res.AnchorFailed > 0 {
						err = fmt.Errorf("%d anchors failed", res.AnchorFailed)
					}
					return err
				}},
			}
			service := func(k int) {
				t.Helper()
				w := serviceWrites[k]
				before, err := a.ChainTip(ctx, p)
				if err != nil {
					fail("tip", err)
				}
				if err := w.write(); err != nil {
					fail(w.name, err)
				}
				after, err := a.ChainTip(ctx, p)
				if err != nil || (w.grows && tipSequence(after) <= tipSequence(before) && before.PayloadHash != nil) {
					fail(fmt.Sprintf("%s: tip %d, was %d", w.name, tipSequence(after), tipSequence(before)), err)
				}
				history = append(history, w.name)
			}
			for i := range 40 {
				switch r.IntN(5) {
				case 0, 1:
					_, err := a.Append(ctx, p, input(i), "rest")
					history = append(history, fmt.Sprintf("append: %v", err))
				case 2, 3:
					rows := make([]api.EventInput, 1+r.IntN(6))
					for k := range rows {
						rows[k] = input(100*i + k)
					}
					res, err := a.AppendBatch(ctx, p, nil, rows, nil)
					history = append(history, fmt.Sprintf("batch of %d: %d ingested, %v", len(rows), res.Ingested, err))
				default:
					service(r.IntN(len(serviceWrites)))
				}
			}
			if tip, err := a.ChainTip(ctx, p); err == nil && tipSequence(tip) >= domain.MaxClientSequence {
				above++
			}
			for k := range serviceWrites {
				service(k)
			}
			tip, err := a.ChainTip(ctx, p)
			if err != nil || tipSequence(tip) > domain.MaxClientSequence+1_000 {
				fail(fmt.Sprintf("tip at %d", tipSequence(tip)), err)
			}
		}
		if above == 0 {
			t.Fatalf("no round's history reached 2^52: the histories miss the case this test is for")
		}
	})
}

// tipSequence is the tip's sequence, -1 for an empty chain.
func tipSequence(tip api.ChainTip) int64 {
	if tip.Sequence == nil {
		return -1
	}
	return *tip.Sequence
}
