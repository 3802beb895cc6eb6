package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// An account whose Merkle rows are missing (written before migration 005, or
// rows lost) gets its tree built by the next append, whatever leaf that append
// lands on and whether it is a single append or a batch: the chain verifies at
// once, never only after some later append. Four events, then the rows go,
// then an even leaf (4) is appended — by itself, or as the first of a batch
// whose later leaves need the older subtrees.
func TestAppendOnAnAccountWithoutMerkleRowsBuildsTheTree(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, dsn string) {
				ctx := context.Background()
				st := storetest.Open(t, dsn)
				a := newUpgradeApp(t, st)
				t.Cleanup(a.Close)
				acct, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: "tree@example.com"})
				if err != nil {
					t.Fatal(err)
				}
				p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
				var prev *string
				for i := range 4 {
					id, typ, seq := fmt.Sprintf("evt-%d", i), "tool_call", int64(i)
					res, err := a.Append(ctx, p, api.EventInput{EventID: &id, EventType: &typ, Sequence: &seq, PrevHash: prev,
						Raw: json.RawMessage(`{}`)}, "rest")
					if err != nil {
						t.Fatal(err)
					}
					h := res.Event.PayloadHash
					prev = &h
				}
				if _, err := st.WriteDB().ExecContext(ctx, `DELETE FROM merkle_hashes WHERE account = $1`, st.KeyOfAccount(t, p.UserID)); err != nil {
					t.Fatal(err)
				}
				want := int64(5)
				if batch {
					var rows []api.EventInput
					for i := 4; i < 8; i++ {
						id, typ, seq := fmt.Sprintf("evt-%d", i), "tool_call", int64(i)
						rows = append(rows, api.EventInput{EventID: &id, EventType: &typ, Sequence: &seq, Raw: json.RawMessage(`{}`)})
					}
					res, err := a.AppendBatch(ctx, p, nil, rows, nil)
					if err != nil || res.Ingested != 4 {
						t.Fatalf("batch on an account without Merkle rows: %+v %v", res, err)
					}
					want = 8
				} else {
					id, typ, seq := "evt-4", "tool_call", int64(4)
					if _, err := a.Append(ctx, p, api.EventInput{EventID: &id, EventType: &typ, Sequence: &seq, PrevHash: prev,
						Raw: json.RawMessage(`{}`)}, "rest"); err != nil {
						t.Fatalf("append at leaf 4 without Merkle rows: %v", err)
					}
				}
				v, err := a.VerifyChain(ctx, p)
				if err != nil || !v.Valid || v.TreeSize != want {
					t.Fatalf("chain verify right after: %+v %v", v, err)
				}
			})
		})
	}
}
