package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// No client input can freeze an account (CONTRACT.md "Batch"): after any
// sequence of client inputs — single appends and batches at any sequence a
// JSON number can carry, with any prev_hash, refused or stored — the service
// can still write its own events at the tip of that account: a grant and its
// revocation, a proposal, a heal run's repairs. A property test over random
// histories, on both stores.
func TestNoClientInputFreezesAnAccount(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		a := apptest.New(t, storetest.Open(t, dsn), apptest.Options{Config: func(c *config.Config) {
			c.DailyEventQuota, c.BatchRateLimit = 1<<30, 1<<30
		}})
		ctx := context.Background()
		sequences := []int64{0, 1, 2, 3, 7, 100, 1 << 40, domain.MaxClientSequence - 1, domain.MaxClientSequence,
			domain.MaxClientSequence + 1, 1 << 62, math.MaxInt64 - 1, math.MaxInt64, -1}
		rounds := 12
		if testing.Short() {
			rounds = 4
		}
		for round := range rounds {
			r := rand.New(rand.NewPCG(uint64(round), 52))
			acct, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: fmt.Sprintf("freeze%d@example.com", round)})
			if err != nil {
				t.Fatal(err)
			}
			p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
			var history []string
			input := func(i int) domain.EventInput {
				id, typ := fmt.Sprintf("evt-r%d-%d", round, i), "tool_call"
				seq := sequences[r.IntN(len(sequences))]
				if r.IntN(3) == 0 {
					seq = r.Int64N(200)
				}
				in := domain.EventInput{EventID: &id, EventType: &typ, Sequence: &seq, Raw: json.RawMessage(`{}`)}
				switch r.IntN(3) {
				case 0:
					if tip, err := a.ChainTip(ctx, p); err == nil && tip.LastHash != nil {
						in.PrevHash = tip.LastHash
						if r.IntN(2) == 0 {
							next := tip.LastSequence + 1
							in.Sequence = &next
						}
					}
				case 1:
					garbage := "sha256:" + fmt.Sprintf("%064x", r.Int64())
					in.PrevHash = &garbage
				}
				return in
			}
			for i := range 40 {
				if r.IntN(2) == 0 {
					_, err := a.Append(ctx, p, input(i), "rest")
					history = append(history, fmt.Sprintf("append: %v", err))
					continue
				}
				rows := make([]domain.EventInput, 1+r.IntN(6))
				for k := range rows {
					rows[k] = input(100*i + k)
				}
				res, err := a.AppendBatch(ctx, p, nil, rows, nil)
				history = append(history, fmt.Sprintf("batch of %d: %d ingested, %v", len(rows), res.Ingested, err))
			}
			fail := func(what string, err error) {
				t.Helper()
				t.Fatalf("round %d: %s after\n%v\n: %v", round, what, history, err)
			}
			created, err := a.CreateGrant(ctx, p, app.GrantRequest{Subagent: "worker", MaxToolCalls: 5, ExpiresAt: time.Now().Add(time.Hour)})
			if err != nil {
				fail("grant", err)
			}
			if res, err := a.RevokeGrant(ctx, p, created.Grant.GrantID, "worker"); err != nil || res.Outcome != app.OutcomeRevoked {
				fail("revoke", err)
			}
			if _, err := a.CreateProposal(ctx, p, app.NewProposal{Kind: "deny_scope", BlockedAttempts: 3, Subagent: "worker"}); err != nil {
				fail("proposal", err)
			}
			if _, err := a.HealRun(ctx, p, false, nil); err != nil {
				fail("heal run", err)
			}
			tip, err := a.ChainTip(ctx, p)
			if err != nil || tip.LastSequence > domain.MaxClientSequence+1_000 {
				fail(fmt.Sprintf("tip at %d", tip.LastSequence), err)
			}
		}
	})
}
