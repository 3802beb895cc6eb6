package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

func TestProposalsRoundTrip(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 11, 21, 12, 0, 0, 123456000, time.UTC)
		tool, note, reason := "fs.write", "why", "seen it"
		mk := func(user, id string, seq int64, subagent string, tool *string) store.Proposal {
			return store.Proposal{UserID: user, Seq: seq, Proposal: domain.Proposal{
				ProposalID: id, Status: domain.ProposalProposed, Kind: domain.KindDenyScope, Note: &note,
				Evidence: api.Evidence{BlockedAttempts: 4, Threshold: 3}, Subject: api.Subject{Subagent: subagent, Tool: tool},
				ProposedAt: t0, Proposer: api.Actor{Identity: "k1", Kind: "api_key", Machine: "m"},
			}}
		}
		ps := []store.Proposal{mk("u1", "prop-1", 0, "a", &tool), mk("u1", "prop-2", 1, "b", nil), mk("u1", "prop-3", 2, "a", nil), mk("u2", "prop-4", 0, "a", nil)}
		ps[1].Note = nil
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			for i := range ps {
				if err := s.InsertProposal(ctx, tx, &ps[i]); err != nil {
					return err
				}
			}
			return s.InsertProposal(ctx, tx, &ps[0])
		})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("duplicate insert: %v, want ErrConflict", err)
		}
		// The failed transaction wrote nothing; insert again for real.
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			for i := range ps {
				if err := s.InsertProposal(ctx, tx, &ps[i]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}

		got, err := s.ProposalByID(ctx, nil, "u1", "prop-1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ps[0], got); diff != "" {
			t.Fatalf("read back (-want +got):\n%s", diff)
		}
		if _, err := s.ProposalByID(ctx, nil, "u2", "prop-1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another account's proposal: %v, want ErrNotFound", err)
		}

		// A transition under the row lock: stamps, actors and reasons persist.
		t1 := t0.Add(time.Minute)
		ratifier := api.Actor{Identity: "k2", Kind: "api_key", Machine: "n"}
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			p, err := s.ProposalForUpdate(ctx, tx, "u1", "prop-1")
			if err != nil {
				return err
			}
			p.Status, p.RatifiedAt, p.Ratifier, p.RatifyReason = domain.ProposalRatified, &t1, &ratifier, &reason
			p.EnactedAt, p.Enactor = &t1, &ratifier
			p.Status = domain.ProposalEnacted
			return s.UpdateProposal(ctx, tx, &p)
		}); err != nil {
			t.Fatal(err)
		}
		got, _ = s.ProposalByID(ctx, nil, "u1", "prop-1")
		if got.Status != domain.ProposalEnacted || !got.RatifiedAt.Equal(t1) || *got.Ratifier != ratifier || *got.RatifyReason != reason ||
			got.Rejector != nil || got.RejectedAt != nil || got.RejectReason != nil {
			t.Fatalf("after update: %+v", got)
		}
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			_, err := s.ProposalForUpdate(ctx, tx, "u2", "prop-2")
			return err
		}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("lock of another account's proposal: %v", err)
		}

		// Listing: newest (highest seq) first, filters exact.
		ids := func(f store.ProposalFilter) []string {
			t.Helper()
			ps, err := s.Proposals(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, p := range ps {
				out = append(out, p.ProposalID)
			}
			return out
		}
		str := func(s string) *string { return &s }
		for _, c := range []struct {
			f    store.ProposalFilter
			want []string
		}{
			{store.ProposalFilter{UserID: "u1"}, []string{"prop-3", "prop-2", "prop-1"}},
			{store.ProposalFilter{UserID: "u1", Subagent: str("a")}, []string{"prop-3", "prop-1"}},
			{store.ProposalFilter{UserID: "u1", Status: str("enacted")}, []string{"prop-1"}},
			{store.ProposalFilter{UserID: "u1", Status: str("proposed"), Subagent: str("a")}, []string{"prop-3"}},
			{store.ProposalFilter{UserID: "u2"}, []string{"prop-4"}},
			{store.ProposalFilter{UserID: "u3"}, nil},
		} {
			if got := ids(c.f); !cmp.Equal(got, c.want) {
				t.Errorf("Proposals(%+v) = %v, want %v", c.f, got, c.want)
			}
		}

		// Enacted proposals and the latest enactment.
		en, err := s.EnactedProposals(ctx, nil, "u1")
		if err != nil || len(en) != 1 || en[0].ProposalID != "prop-1" {
			t.Fatalf("enacted: %v %v", en, err)
		}
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			last, err := s.LastEnactedAt(ctx, tx, "u1")
			if err != nil || last == nil || !last.Equal(t1) {
				t.Errorf("LastEnactedAt(u1) = %v %v, want %v", last, err, t1)
			}
			none, err := s.LastEnactedAt(ctx, tx, "u2")
			if err != nil || none != nil {
				t.Errorf("LastEnactedAt(u2) = %v %v, want nil", none, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}
