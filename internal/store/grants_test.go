package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

func insertGrant(t *testing.T, s *store.Store, g store.Grant) store.Grant {
	t.Helper()
	ctx := context.Background()
	if g.Epoch == nil {
		g.Epoch = json.RawMessage(`{}`)
	}
	if g.Token == nil {
		g.Token = json.RawMessage(`{}`)
	}
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		if g.Generation, err = s.NextGrantGeneration(ctx, tx, g.UserID, g.GrantID); err != nil {
			return err
		}
		return s.InsertGrant(ctx, tx, &g)
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGrantRowsAndGateCandidates(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
		parent := "p"
		g := func(id, sub string, created, expires time.Duration) store.Grant {
			return insertGrant(t, s, store.Grant{UserID: "u1", GrantID: id, Subagent: sub, ParentAgent: &parent,
				AllowedTools: []string{"a"}, MaxToolCalls: 5, CreatedAt: now.Add(created), ExpiresAt: now.Add(expires)})
		}
		g("g-01", "s", -3*time.Hour, -2*time.Hour) // expired
		live := g("g-02", "s", -2*time.Hour, time.Hour)
		g("g-03", "s", -1*time.Hour, -time.Minute) // expired, the newest
		g("g-04", "other", 0, time.Hour)
		insertGrant(t, s, store.Grant{UserID: "u2", GrantID: "g-02", Subagent: "s", MaxToolCalls: 1, CreatedAt: now, ExpiresAt: now.Add(time.Hour)})

		got, err := s.GateCandidates(ctx, nil, "u1", "s", nil, now)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, c := range got {
			ids[c.GrantID] = true
		}
		if len(got) != 2 || !ids["g-02"] || !ids["g-03"] {
			t.Fatalf("candidates = %+v, want the live g-02 and the newest g-03", got)
		}
		id := "g-02"
		got, err = s.GateCandidates(ctx, nil, "u1", "s", &id, now)
		if err != nil || len(got) != 1 || got[0].GrantID != "g-02" || *got[0].ParentAgent != "p" || got[0].AllowedTools[0] != "a" {
			t.Fatalf("restricted candidates = %+v, %v", got, err)
		}
		if !got[0].CreatedAt.Equal(live.CreatedAt) || !got[0].ExpiresAt.Equal(live.ExpiresAt) {
			t.Fatalf("times round-trip: %+v vs %+v", got[0], live)
		}

		// A reused id takes the next generation.
		again := g("g-01", "s", 0, time.Hour)
		if again.Generation != 1 {
			t.Fatalf("generation = %d", again.Generation)
		}
		list, err := s.Grants(ctx, "u1", nil)
		if err != nil || len(list) != 5 || list[0].GrantID != "g-04" && list[0].GrantID != "g-01" {
			t.Fatalf("list = %+v, %v", list, err)
		}
		if n, _ := s.CountGrants(ctx, "u1"); n != 5 {
			t.Fatalf("count = %d", n)
		}
	})
}

func TestConsumeGrantUsesIsConditional(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
		g := insertGrant(t, s, store.Grant{UserID: "u", GrantID: "g-1", Subagent: "s", MaxToolCalls: 10, CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		consume := func(n int64, at time.Time) (int64, bool) {
			var uses int64
			var ok bool
			err := s.InTx(ctx, func(tx *sql.Tx) error {
				var err error
				uses, ok, err = s.ConsumeGrantUses(ctx, tx, "u", g.GrantID, g.Generation, n, at)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return uses, ok
		}
		if uses, ok := consume(4, now); !ok || uses != 4 {
			t.Fatalf("consume 4: %d %v", uses, ok)
		}
		if _, ok := consume(7, now); ok {
			t.Fatal("7 more than the budget was accepted")
		}
		if _, ok := consume(1, now.Add(time.Hour)); ok {
			t.Fatal("a use at expiry was accepted")
		}
		if uses, ok := consume(6, now); !ok || uses != 10 {
			t.Fatalf("consume to the budget: %d %v", uses, ok)
		}

		// Concurrent writers never overspend.
		h := insertGrant(t, s, store.Grant{UserID: "u", GrantID: "g-2", Subagent: "s", MaxToolCalls: 50, CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var total int64
		for range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var ok bool
				err := s.InTx(ctx, func(tx *sql.Tx) error {
					var err error
					_, ok, err = s.ConsumeGrantUses(ctx, tx, "u", h.GrantID, h.Generation, 3, now)
					return err
				})
				if err == nil && ok {
					mu.Lock()
					total += 3
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		row, err := s.GrantRow(ctx, nil, "u", h.GrantID, h.Generation)
		if err != nil || total != 48 || row.Uses != 48 {
			t.Fatalf("accepted %d, stored %d (%v); want 48 of 50", total, row.Uses, err)
		}

		// Revocation stops uses and keeps its first time.
		err = s.InTx(ctx, func(tx *sql.Tx) error {
			ok, err := s.RevokeGrant(ctx, tx, "u", h.GrantID, h.Generation, now)
			if err != nil || !ok {
				return errors.Join(err, errors.New("first revoke did not revoke"))
			}
			ok, err = s.RevokeGrant(ctx, tx, "u", h.GrantID, h.Generation, now.Add(time.Minute))
			if err != nil || ok {
				return errors.Join(err, errors.New("second revoke revoked again"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := consume(1, now); ok {
			t.Fatal("a use of an exhausted grant was accepted")
		}
		err = s.InTx(ctx, func(tx *sql.Tx) error {
			_, ok, err := s.ConsumeGrantUses(ctx, tx, "u", h.GrantID, h.Generation, 1, now)
			if ok {
				return errors.New("a use of a revoked grant was accepted")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.GrantRow(ctx, nil, "u", "g-9", 0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("missing grant: %v", err)
		}
	})
}
