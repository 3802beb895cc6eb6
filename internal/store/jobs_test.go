package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// GrantsExpiringByAccount hands over each account's live grants expiring in
// the window, account by account in user order, each account's by expiry
// and then grant id, whatever order they were written in; revoked, used-up
// and out-of-window grants are left out, and fn's error stops the read.
func TestGrantsExpiringByAccountGroupsAndOrders(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
		grant := func(user, id string, in time.Duration, max int64) store.Grant {
			return insertGrant(t, s, store.Grant{UserID: user, GrantID: id, Subagent: "sub-" + id, MaxToolCalls: max,
				CreatedAt: now, ExpiresAt: now.Add(in)})
		}
		grant("u3", "g-b", 2*time.Hour, 5)
		grant("u1", "g-z", 3*time.Hour, 5)
		grant("u3", "g-a", 2*time.Hour, 5) // same expiry as g-b: by grant id
		grant("u1", "g-y", time.Hour, 5)
		grant("u2", "g-late", 25*time.Hour, 5) // outside the window
		grant("u2", "g-gone", -time.Minute, 5) // expired
		used := grant("u2", "g-used", time.Hour, 1)
		revoked := grant("u1", "g-revoked", time.Hour, 5)
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			if _, ok, err := s.ConsumeGrantUses(ctx, tx, "u2", "g-used", used.Generation, 1, now); err != nil || !ok {
				return fmt.Errorf("use: %v %v", ok, err)
			}
			_, err := s.RevokeGrant(ctx, tx, "u1", "g-revoked", revoked.Generation, now)
			return err
		}); err != nil {
			t.Fatal(err)
		}

		var got []string
		err := s.GrantsExpiringByAccount(ctx, now, now.Add(24*time.Hour), func(user string, gs []store.ExpiringGrant) error {
			var ids []string
			for _, g := range gs {
				if g.UserID != user || g.Subagent != "sub-"+g.GrantID {
					t.Errorf("%s: grant %+v", user, g)
				}
				ids = append(ids, g.GrantID)
			}
			got = append(got, fmt.Sprint(user, ids))
			return nil
		})
		if want := []string{"u1[g-y g-z]", "u3[g-a g-b]"}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("accounts %q, %v; want %q", got, err, want)
		}

		stop := errors.New("stop")
		calls := 0
		err = s.GrantsExpiringByAccount(ctx, now, now.Add(24*time.Hour), func(string, []store.ExpiringGrant) error {
			calls++
			return stop
		})
		if !errors.Is(err, stop) || calls != 1 {
			t.Fatalf("fn failing: %d calls, %v; want 1 call and its error", calls, err)
		}
	})
}
