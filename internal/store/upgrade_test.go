package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

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
		// 6 on either store for events of a named machine; a client event
		// takes InsertEventCharged (migration 010 on PostgreSQL, 011 on
		// SQLite), as does the machine-less counter on SQLite (011). The rows
		// are the same but for surface.
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

// Migration 011 moves SQLite's daily quota and the counter of events without
// a machine into the head row. Usage and counters written before it carry on
// after it, on both stores: today's usage still counts (yesterday's does
// not, and tomorrow starts from 0), the machine-less counter and a named
// machine's continue where they were, and an account with usage but no head
// row keeps its usage.
func TestUpgradeTo11KeepsTheQuotaAndTheMachineCounters(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		old, err := store.OpenAtVersion(ctx, dsn, 10)
		if err != nil {
			t.Fatal(err)
		}
		const today, yesterday = "2026-11-22", "2026-11-21"
		db := old.WriteDB()
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO chain_heads (user_id, last_sequence, last_hash, last_event_id, event_count) VALUES ($1, 6, NULL, 'evt-6', 7)`, []any{"u-head"}},
			{`INSERT INTO daily_usage (user_id, day, used) VALUES ($1, $2, 40), ($1, $3, 7)`, []any{"u-head", yesterday, today}},
			{`INSERT INTO machine_heads (user_id, machine_id, events) VALUES ($1, '', 5), ($1, 'm1', 2)`, []any{"u-head"}},
			{`INSERT INTO daily_usage (user_id, day, used) VALUES ($1, $2, 3)`, []any{"u-nohead", today}},
		} {
			if _, err := db.ExecContext(ctx, q.sql, q.args...); err != nil {
				t.Fatalf("%s: %v", q.sql, err)
			}
		}
		old.Close()

		st := storetest.Open(t, dsn) // every migration
		for _, c := range []struct {
			user, day string
			want      int64
		}{{"u-head", today, 7}, {"u-head", "2026-11-23", 0}, {"u-nohead", today, 3}, {"u-none", today, 0}} {
			if used, err := st.QuotaUsed(ctx, nil, c.user, c.day); err != nil || used != c.want {
				t.Fatalf("QuotaUsed(%s, %s) = %d, %v; want %d", c.user, c.day, used, err, c.want)
			}
		}
		err = st.InTx(ctx, func(tx *sql.Tx) error {
			if _, err := st.LockHead(ctx, tx, "u-head"); err != nil {
				return err
			}
			if used, ok, err := st.ConsumeQuota(ctx, tx, "u-head", today, 3, 10); err != nil || !ok || used != 10 {
				t.Errorf("ConsumeQuota(3 of 10) = %d, %v, %v; want 10, true", used, ok, err)
			}
			if used, ok, err := st.ConsumeQuota(ctx, tx, "u-head", today, 1, 10); err != nil || ok || used != 10 {
				t.Errorf("ConsumeQuota(1 over 10) = %d, %v, %v; want 10, false", used, ok, err)
			}
			counts, err := st.MachineSequences(ctx, tx, "u-head", []string{"", "m1", "m2"})
			if err != nil {
				return err
			}
			if want := map[string]int64{"": 5, "m1": 2}; !reflect.DeepEqual(counts, want) {
				t.Errorf("MachineSequences = %v, want %v", counts, want)
			}
			for _, c := range []struct {
				machine string
				want    int64
			}{{"", 5}, {"", 6}, {"m1", 2}, {"m2", 0}} {
				if n, err := st.NextMachineSequence(ctx, tx, "u-head", c.machine); err != nil || n != c.want {
					t.Errorf("NextMachineSequence(%q) = %d, %v; want %d", c.machine, n, err, c.want)
				}
			}
			if err := st.SetMachineSequences(ctx, tx, "u-head", map[string]int64{"": 9, "m1": 4}); err != nil {
				return err
			}
			counts, err = st.MachineSequences(ctx, tx, "u-head", []string{"", "m1"})
			if want := map[string]int64{"": 9, "m1": 4}; err != nil || !reflect.DeepEqual(counts, want) {
				t.Errorf("after SetMachineSequences: %v, %v; want %v", counts, err, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if used, err := st.QuotaUsed(ctx, nil, "u-head", today); err != nil || used != 10 {
			t.Fatalf("QuotaUsed after the charges = %d, %v; want 10", used, err)
		}
		// Machines lists the named machines only (m2 counted one event above).
		ms, err := st.Machines(ctx, "u-head")
		if err != nil || len(ms) != 2 || ms[0].MachineID != "m1" || ms[0].Events != 4 || ms[1].MachineID != "m2" || ms[1].Events != 1 {
			t.Fatalf("Machines = %+v, %v", ms, err)
		}
	})
}

// A daily_usage row of a later day than today (written while the clock ran
// ahead, then corrected) does not become the account's quota day at the
// upgrade: today's usage is today's row (found by a reviewer).
func TestUpgradeTo11KeepsTodaysUsageBesideAStrayLaterDay(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		old, err := store.OpenAtVersion(ctx, dsn, 10)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		today, later := now.Format(time.DateOnly), now.AddDate(0, 0, 30).Format(time.DateOnly)
		db := old.WriteDB()
		if _, err := db.ExecContext(ctx, `INSERT INTO chain_heads (user_id, last_sequence, last_hash, last_event_id, event_count) VALUES ('u', 9, NULL, 'evt-9', 10)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO daily_usage (user_id, day, used) VALUES ('u', $1, 7), ('u', $2, 3)`, today, later); err != nil {
			t.Fatal(err)
		}
		old.Close()
		st := storetest.Open(t, dsn)
		if used, err := st.QuotaUsed(ctx, nil, "u", today); err != nil || used != 7 {
			t.Fatalf("QuotaUsed(today) = %d, %v; want 7 (today's row)", used, err)
		}
	})
}

// A database migrated by a newer binary is refused rather than used: its
// data may be where this binary does not look.
func TestOpenRefusesANewerSchema(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st, err := store.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.WriteDB().ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (9999, 0)`); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if st, err := store.Open(ctx, dsn); !errors.Is(err, store.ErrNewerSchema) {
			if err == nil {
				st.Close()
			}
			t.Fatalf("open after a newer binary's migration: %v, want ErrNewerSchema", err)
		}
	})
}

// A clock set back across midnight: SQLite's head row keeps one day, and a
// charge dated the day before it counts against it, so the quota does not
// open again; PostgreSQL keeps a row per day (docs/decisions/record.md
// "Quota").
func TestQuotaOfADayJustBeforeTheLastCharged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := storetest.Open(t, dsn)
		err := st.InTx(ctx, func(tx *sql.Tx) error {
			if _, err := st.LockHead(ctx, tx, "u"); err != nil {
				return err
			}
			if _, ok, err := st.ConsumeQuota(ctx, tx, "u", "2026-11-22", 3, 3); err != nil || !ok {
				t.Fatalf("charge 3 of 3 on the 22nd: %v %v", ok, err)
			}
			used, ok, err := st.ConsumeQuota(ctx, tx, "u", "2026-11-21", 1, 3)
			if err != nil {
				return err
			}
			if st.Dialect == store.SQLite && (ok || used != 3) {
				t.Errorf("SQLite: a charge dated the 21st after the 22nd's = %d, %v; want refused against the 22nd's 3", used, ok)
			}
			if st.Dialect == store.Postgres && (!ok || used != 1) {
				t.Errorf("PostgreSQL: a charge dated the 21st = %d, %v; want the 21st's own row", used, ok)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
