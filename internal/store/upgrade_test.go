package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// Migrations 007 and 009 rebuild tables that hold the record (events, chain
// heads, Merkle hashes). A database written at version 6 — events, Merkle rows,
// sealed blocks, machine counters — upgrades with nothing lost or altered: the
// heal scan and the chain verification agree before and after, every event
// reads back byte for byte, and the chain takes the next append.
func TestUpgradeFromVersion6KeepsTheRecord(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		old, err := store.OpenAtVersion(ctx, dsn, 6)
		if err != nil {
			t.Fatal(err)
		}
		a := newUpgradeApp(t, old)
		acct, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: "upgrade@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
		var prev *string
		const n = 1203 // more than one sealed block of 1,000
		// Written with the "service" surface: that takes the general append
		// path (InsertEvent), whose statements need nothing newer than version
		// 6 on either store; a client event on PostgreSQL takes the append
		// statement of migration 010. The rows are the same but for surface.
		for i := range n {
			id, typ, seq := fmt.Sprintf("evt-%d", i), "tool_call", int64(i)
			machine := fmt.Sprintf("m%d", i%3)
			res, err := a.Append(ctx, p, domain.EventInput{EventID: &id, EventType: &typ, Sequence: &seq, PrevHash: prev,
				MachineID: &machine, Raw: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}, "service")
			if err != nil {
				t.Fatalf("append %d at version 6: %v", i, err)
			}
			h := res.Event.PayloadHash
			prev = &h
		}
		scanBefore, verifyBefore, eventsBefore := recordOf(t, a, p)
		a.Close()
		old.Close()

		upgraded := storetest.Open(t, dsn) // every migration
		b := newUpgradeApp(t, upgraded)
		scanAfter, verifyAfter, eventsAfter := recordOf(t, b, p)
		if !scanBefore.Clean || !scanAfter.Clean || scanAfter.TotalEvents != n || scanAfter.MerkleRootStatus != scanBefore.MerkleRootStatus {
			t.Fatalf("heal scan before %+v, after %+v", scanBefore, scanAfter)
		}
		if !verifyBefore.Valid || !verifyAfter.Valid || verifyAfter.TreeSize != verifyBefore.TreeSize || verifyAfter.Blocks != verifyBefore.Blocks {
			t.Fatalf("chain verify before %+v, after %+v", verifyBefore, verifyAfter)
		}
		if len(eventsAfter) != n {
			t.Fatalf("%d events after the upgrade, want %d", len(eventsAfter), n)
		}
		for i := range eventsBefore {
			if !reflect.DeepEqual(eventsBefore[i], eventsAfter[i]) {
				t.Fatalf("event %d changed in the upgrade:\n before %+v\n after  %+v", i, eventsBefore[i], eventsAfter[i])
			}
		}
		id, typ, seq, machine := "evt-after", "tool_call", int64(n), "m0"
		res, err := b.Append(ctx, p, domain.EventInput{EventID: &id, EventType: &typ, Sequence: &seq, PrevHash: prev,
			MachineID: &machine, Raw: json.RawMessage(`{"after":true}`)}, "rest")
		if err != nil {
			t.Fatalf("append after the upgrade: %v", err)
		}
		// m0 wrote events 0, 3, …, 1200: machine sequences 0 to 400.
		if res.Event.MachineSequence != 401 {
			t.Fatalf("machine m0's counter after the upgrade gave %d, want 401", res.Event.MachineSequence)
		}
		if scan, err := b.HealScan(ctx, p, nil); err != nil || !scan.Clean || scan.TotalEvents != n+1 {
			t.Fatalf("heal scan after one more append: %+v %v", scan, err)
		}
	})
}

func newUpgradeApp(t *testing.T, st *store.Store) *app.App {
	t.Helper()
	a := app.New(st, config.Config{DailyEventQuota: 1_000_000, BatchRateLimit: 1_000_000}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.LoadServiceKey(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

func recordOf(t *testing.T, a *app.App, p app.Principal) (app.ScanResult, app.ChainVerification, []store.Event) {
	t.Helper()
	ctx := context.Background()
	scan, err := a.HealScan(ctx, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.VerifyChain(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var events []store.Event
	if err := a.Store.EventsBySequence(ctx, p.UserID, 1<<40, func(e *store.Event) error {
		events = append(events, *e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return scan, v, events
}
