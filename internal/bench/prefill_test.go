package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// A directly prefilled account must be exactly what the append path would
// have built: heal finds nothing, the signed blocks verify against the stored
// Merkle tree and the events, and the next append through the API links to it.
func TestDirectPrefillIsAValidChain(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	accts, err := provision(ctx, dsn, 3, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	n := directChunk + 7 // crosses a transaction boundary
	if err := directPrefill(ctx, dsn, accts[:1], n, nil); err != nil {
		t.Fatal(err)
	}
	if err := directPrefill(ctx, dsn, accts[1:], 3, nil); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := apptest.New(t, st, apptest.Options{Config: func(c *config.Config) { c.DailyEventQuota = 1 << 40 }})
	for i, want := range []int64{int64(n), 3, 3} {
		p := app.Principal{UserID: accts[i].userID, KeyID: accts[i].keyID, Kind: "api_key"}
		scan, err := a.HealScan(ctx, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !scan.Clean || scan.TotalEvents != want || scan.MerkleRootStatus != "ok" {
			t.Fatalf("account %d: heal scan %+v, want clean over %d events", i, scan, want)
		}
		v, err := a.VerifyChain(ctx, p)
		if err != nil || !v.Valid || v.TreeSize != want {
			t.Fatalf("account %d: chain verify %+v (%v), want valid at size %d", i, v, err, want)
		}
		tip, err := a.ChainTip(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		id, typ, seq := "evt-after-prefill", domain.EventTypeToolCall, want
		res, err := a.Append(ctx, p, api.EventInput{EventID: &id, EventType: &typ, Sequence: &seq, PrevHash: tip.PayloadHash}, "rest")
		if err != nil {
			t.Fatalf("account %d: append after the prefill: %v", i, err)
		}
		stored, err := st.EventByID(ctx, nil, p.UserID, id)
		if err != nil {
			t.Fatal(err)
		}
		if stored.LeafIndex != want || res.Event.MachineSequence != want {
			t.Fatalf("account %d: next event at leaf %d, machine sequence %d; want %d", i, stored.LeafIndex, res.Event.MachineSequence, want)
		}
	}
}
