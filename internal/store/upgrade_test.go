package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// Migrations 007, 009 and 013 rebuild tables that hold the record (events,
// chain heads, Merkle hashes). A database holding, at an older version, the
// record the service writes — events, Merkle rows, sealed blocks, machine
// counters — upgrades with nothing lost or altered: the heal scan and the
// chain verification agree before and after, every event reads back byte for
// byte, and the chain takes the next append. Version 6 is before the first
// rebuild, version 12 the last one before migration 013. The record spans
// several accounts and an id the accounts table never had (rows written by a
// tool or a test), since migration 013 numbers each.
func TestUpgradeKeepsTheRecord(t *testing.T) {
	// The record is written once per store kind, by the current service into
	// a scratch database, and copied into an older database for each version
	// (copyRecordToVersion), as a binary of that version stored it: the
	// current store cannot write an older database (its events and Merkle
	// rows name their account in migration 013's column).
	storetest.Each(t, func(t *testing.T, scratchDSN string) {
		rec := writeUpgradeRecord(t, scratchDSN)
		backend := storetest.SQLite
		if strings.HasPrefix(scratchDSN, "postgres") {
			backend = storetest.Postgres
		}
		for _, version := range []int64{6, 12} {
			t.Run(fmt.Sprintf("from version %d", version), func(t *testing.T) {
				testUpgradeKeepsTheRecord(t, rec, storetest.EmptyDSN(t, backend), version)
			})
		}
	})
}

// upgradeRecord is the record written at the current version, and what the
// service read of it before any upgrade.
type upgradeRecord struct {
	scratch                                       *store.Store
	p, other                                      app.Principal
	prev                                          *string
	scanBefore, otherScanBefore                   api.HealScan
	verifyBefore, otherVerifyBefore               api.ChainVerification
	eventsBefore, otherEventsBefore, orphanBefore []store.Event
	orphanHashes                                  []string
}

const (
	upgradeEvents                      = 1203 // more than one sealed block of 1,000
	upgradeOrphan, upgradeOrphanEvents = "orphan-without-account", 25
)

func writeUpgradeRecord(t *testing.T, scratchDSN string) *upgradeRecord {
	ctx := context.Background()
	scratch := storetest.Open(t, scratchDSN)
	a := newUpgradeApp(t, scratch)
	// Written with the "service" surface and named machines, as before
	// version 11 every event's counters were kept: in machine_heads, with no
	// daily quota charged.
	chain := func(email string, n int) (app.Principal, *string) {
		t.Helper()
		acct, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: email})
		if err != nil {
			t.Fatal(err)
		}
		p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
		var prev *string
		for i := range n {
			id, typ, seq := fmt.Sprintf("evt-%d", i), "tool_call", int64(i)
			machine := fmt.Sprintf("m%d", i%3)
			res, err := a.Append(ctx, p, api.EventInput{EventID: &id, EventType: &typ, Sequence: &seq, PrevHash: prev,
				MachineID: &machine, Raw: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}, "service")
			if err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			h := res.Event.PayloadHash
			prev = &h
		}
		return p, prev
	}
	r := &upgradeRecord{scratch: scratch}
	r.p, r.prev = chain("upgrade@example.com", upgradeEvents)
	r.other, _ = chain("other@example.com", 60)
	r.orphanHashes = appendRaw(t, scratch, upgradeOrphan, 0, upgradeOrphanEvents)
	r.scanBefore, r.verifyBefore, r.eventsBefore = recordOf(t, a, scratch, r.p)
	r.otherScanBefore, r.otherVerifyBefore, r.otherEventsBefore = recordOf(t, a, scratch, r.other)
	r.orphanBefore = eventsOf(t, scratch, upgradeOrphan)
	a.Close()
	return r
}

func testUpgradeKeepsTheRecord(t *testing.T, r *upgradeRecord, dsn string, version int64) {
	ctx := context.Background()
	const n, orphan, orphanEvents = upgradeEvents, upgradeOrphan, upgradeOrphanEvents
	scratch, p, other, prev := r.scratch, r.p, r.other, r.prev
	scanBefore, verifyBefore, eventsBefore := r.scanBefore, r.verifyBefore, r.eventsBefore
	otherScanBefore, otherVerifyBefore, otherEventsBefore := r.otherScanBefore, r.otherVerifyBefore, r.otherEventsBefore
	orphanBefore, orphanHashes := r.orphanBefore, r.orphanHashes

	old, err := store.OpenAtVersion(ctx, dsn, version)
	if err != nil {
		t.Fatal(err)
	}
	copyRecordToVersion(t, scratch, old, version)
	old.Close()

	upgraded := storetest.Open(t, dsn) // every migration
	b := newUpgradeApp(t, upgraded)
	scanAfter, verifyAfter, eventsAfter := recordOf(t, b, upgraded, p)
	if !scanBefore.Clean || !scanAfter.Clean || scanAfter.TotalEvents != n || scanAfter.MerkleRootStatus != scanBefore.MerkleRootStatus {
		t.Fatalf("heal scan before %+v, after %+v", scanBefore, scanAfter)
	}
	if !verifyBefore.Valid || !verifyAfter.Valid || verifyAfter.TreeSize != verifyBefore.TreeSize || verifyAfter.Blocks != verifyBefore.Blocks {
		t.Fatalf("chain verify before %+v, after %+v", verifyBefore, verifyAfter)
	}
	if len(eventsAfter) != n {
		t.Fatalf("%d events after the upgrade, want %d", len(eventsAfter), n)
	}
	sameEvents(t, eventsBefore, eventsAfter)
	otherScanAfter, otherVerifyAfter, otherEventsAfter := recordOf(t, b, upgraded, other)
	if !otherScanAfter.Clean || otherScanAfter.TotalEvents != otherScanBefore.TotalEvents || !otherVerifyAfter.Valid ||
		otherVerifyAfter.TreeSize != otherVerifyBefore.TreeSize || len(otherEventsAfter) != 60 {
		t.Fatalf("the other account after the upgrade: scan %+v, verify %+v, %d events", otherScanAfter, otherVerifyAfter, len(otherEventsAfter))
	}
	sameEvents(t, otherEventsBefore, otherEventsAfter)
	orphanAfter := eventsOf(t, upgraded, orphan)
	if len(orphanAfter) != orphanEvents {
		t.Fatalf("%d events of an id without an account after the upgrade, want %d", len(orphanAfter), orphanEvents)
	}
	sameEvents(t, orphanBefore, orphanAfter)
	checkStoredHashes(t, upgraded, orphan, refStore(t, orphanHashes), orphanEvents)
	id, typ, seq, machine := "evt-after", "tool_call", int64(n), "m0"
	res, err := b.Append(ctx, p, api.EventInput{EventID: &id, EventType: &typ, Sequence: &seq, PrevHash: prev,
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
}

// copyRecordToVersion copies what the record's tests write (the service key,
// accounts, keys, events, Merkle rows, heads, machine counters, blocks) from
// src, at the current version, into dst, a database of the same kind migrated
// up to version, in the columns that version's tables have. Events and
// Merkle rows name their account by user_id there; before version 12 a
// Merkle row holds one hash, so SQLite's runs are split.
func copyRecordToVersion(t *testing.T, src, dst *store.Store, version int64) {
	t.Helper()
	ctx := context.Background()
	sqlite := src.Dialect == store.SQLite
	err := dst.InTx(ctx, func(tx *sql.Tx) error {
		for _, table := range []string{"service_settings", "accounts", "api_keys", "events", "merkle_hashes", "chain_heads", "machine_heads", "chain_blocks"} {
			columnsQuery := `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`
			if sqlite {
				columnsQuery = `SELECT name FROM pragma_table_info($1) ORDER BY cid`
			}
			columns := queryStrings(t, tx, columnsQuery, table)
			if len(columns) == 0 {
				return fmt.Errorf("version %d has no table %s", version, table)
			}
			// What each column is read as from src: the account of an
			// event or a Merkle row is its user_id at older versions.
			from, read := table, make([]string, len(columns))
			for i, c := range columns {
				read[i] = "r." + c
				if c == "user_id" && (table == "events" || table == "merkle_hashes") {
					read[i] = "r.account"
					if sqlite {
						read[i] = "n.user_id"
					}
				}
			}
			if sqlite && (table == "events" || table == "merkle_hashes") {
				from += " r JOIN account_numbers n ON n.num = r.account"
			} else {
				from += " r"
			}
			rows, err := src.DB().QueryContext(ctx, `SELECT `+strings.Join(read, ", ")+` FROM `+from)
			if err != nil {
				return fmt.Errorf("read %s: %w", table, err)
			}
			var values [][]any
			for rows.Next() {
				row := make([]any, len(columns))
				ptrs := make([]any, len(columns))
				for i := range row {
					ptrs[i] = &row[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					rows.Close()
					return err
				}
				values = append(values, row)
			}
			rows.Close()
			if table == "merkle_hashes" && sqlite && version < 12 {
				values = splitRuns(t, columns, values)
			}
			ph := make([]string, len(columns))
			for i := range ph {
				ph[i] = fmt.Sprintf("$%d", i+1)
			}
			insert := `INSERT INTO ` + table + ` (` + strings.Join(columns, ", ") + `) VALUES (` + strings.Join(ph, ", ") + `)`
			for _, row := range values {
				if _, err := tx.ExecContext(ctx, insert, row...); err != nil {
					return fmt.Errorf("copy into %s at version %d: %w", table, version, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// splitRuns turns rows of merkle_hashes holding runs of hashes into rows of
// one hash each.
func splitRuns(t *testing.T, columns []string, rows [][]any) [][]any {
	t.Helper()
	idxAt, hashAt := slices.Index(columns, "idx"), slices.Index(columns, "hash")
	var out [][]any
	for _, row := range rows {
		run := row[hashAt].([]byte)
		for k := 0; k*32 < len(run); k++ {
			one := slices.Clone(row)
			one[idxAt] = row[idxAt].(int64) + int64(k)
			one[hashAt] = run[k*32 : (k+1)*32]
			out = append(out, one)
		}
	}
	return out
}

func queryStrings(t *testing.T, q store.Querier, query string, args ...any) []string {
	t.Helper()
	rows, err := q.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func newUpgradeApp(t *testing.T, st *store.Store) *app.App {
	t.Helper()
	return apptest.New(t, st, apptest.Options{Config: func(c *config.Config) { c.DailyEventQuota, c.BatchRateLimit = 1_000_000, 1_000_000 }})
}

func recordOf(t *testing.T, a *app.App, st *store.Store, p app.Principal) (api.HealScan, api.ChainVerification, []store.Event) {
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
	return scan, v, eventsOf(t, st, p.UserID)
}

// eventsOf reads every column of the account's events, in chain order.
func eventsOf(t *testing.T, st *store.Store, userID string) []store.Event {
	t.Helper()
	var events []store.Event
	if err := st.EventsFrom(context.Background(), userID, 0, func(e *store.Event) error {
		events = append(events, *e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return events
}

func sameEvents(t *testing.T, before, after []store.Event) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("%d events before the upgrade, %d after", len(before), len(after))
	}
	for i := range before {
		if !reflect.DeepEqual(before[i], after[i]) {
			t.Fatalf("event %d changed in the upgrade:\n before %+v\n after  %+v", i, before[i], after[i])
		}
	}
}

// Migration 011 moves SQLite's daily quota and the counter of events without
// a machine into the head row. Usage and counters written before it carry on
// after it, on both stores: today's usage still counts (yesterday's does
// not, and tomorrow starts from 0), the machine-less counter and a named
// machine's continue where they were, and an account with usage but no head
// row keeps its usage.
func TestUpgradeTo11KeepsTheQuotaAndTheMachineCounters(t *testing.T) {
	storetest.EachEmpty(t, func(t *testing.T, dsn string) {
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
			// Appends number their events from the counters (the rows carry no
			// Merkle tree here: each append brings its rows, none).
			for i, c := range []struct {
				machine string
				want    int64
			}{{"", 5}, {"", 6}, {"m1", 2}, {"m2", 0}} {
				head, err := st.LockHead(ctx, tx, "u-head")
				if err != nil {
					return err
				}
				e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: "u-head", Sequence: head.LastSequence + 1,
					EventID: fmt.Sprintf("evt-up-%d", i), EventType: "t", PrevHash: head.LastHash, PayloadHash: fmt.Sprintf("sha256:%064x", 900+i),
					TS: "2026-11-22T00:00:00Z", Surface: "rest"}}}
				if c.machine != "" {
					e.MachineID = &c.machine
				}
				out, err := st.AppendEvent(ctx, tx, store.Append{Event: &e, Expect: head, Hashes: []merkle.StoredHash{}})
				if err != nil || !out.Stored() || e.MachineSequence != c.want {
					t.Errorf("append of machine %q: %+v, %v, machine_sequence %d; want %d", c.machine, out, err, e.MachineSequence, c.want)
				}
			}
			counts, err = st.MachineSequences(ctx, tx, "u-head", []string{"", "m1", "m2"})
			if want := map[string]int64{"": 7, "m1": 3, "m2": 1}; err != nil || !reflect.DeepEqual(counts, want) {
				t.Errorf("after the appends: %v, %v; want %v", counts, err, want)
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
	storetest.EachEmpty(t, func(t *testing.T, dsn string) {
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

// Migration 021 moves the once-only mark of a notice from its rows (their
// dedup_key, unique per channel) to notice_once. A notice written before the
// upgrade stays written: the same key afterwards stores nothing, on every
// channel, and the rows written before keep everything the API shows.
func TestUpgradeTo21KeepsOnceOnlyNoticesWritten(t *testing.T) {
	storetest.EachEmpty(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		old, err := store.OpenAtVersion(ctx, dsn, 20)
		if err != nil {
			t.Fatal(err)
		}
		const typ, key = "grant.expiring_24h", "g-1@2026-11-27T12:00:00.000000Z"
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC).UnixMicro()
		if _, err := old.WriteDB().ExecContext(ctx, `INSERT INTO accounts (user_id, created_at) VALUES ('u1', $1)`, now); err != nil {
			t.Fatal(err)
		}
		for i, ch := range []string{"in_app", "email", "webhook"} {
			if _, err := old.WriteDB().ExecContext(ctx, `INSERT INTO notifications (id, user_id, type, channel, severity, delivery_status,
				digest, created_at, sent_at, dedup_key, payload, attempts) VALUES ($1, 'u1', $2, $3, 'warning', 'sent', FALSE, $4, $4, $5, '{}', 0)`,
				fmt.Sprintf("n%d", i), typ, ch, now+int64(i), key); err != nil {
				t.Fatal(err)
			}
		}
		old.Close()

		st := storetest.Open(t, dsn) // every migration
		done, err := st.DedupKeysWritten(ctx, nil, "u1", typ, []string{key, "g-2@2026-11-27T12:00:00.000000Z"})
		if err != nil || len(done) != 1 || !done[key] {
			t.Fatalf("DedupKeysWritten after the upgrade = %v, %v; want only %s", done, err, key)
		}
		k := key
		err = st.InTx(ctx, func(tx *sql.Tx) error {
			n, err := st.InsertNotifications(ctx, tx, []store.Notification{{ID: "again", UserID: "u1", Type: typ, Channel: "in_app",
				Severity: "warning", DeliveryStatus: "sent", CreatedAt: now + 10, DedupKey: &k, Payload: "{}"}})
			if n != 0 {
				t.Errorf("the notice written before the upgrade was stored again (%d rows)", n)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := st.Notifications(ctx, "u1", nil, nil, 10)
		if err != nil || len(rows) != 3 || rows[0].ID != "n2" || rows[0].Channel != "webhook" || rows[0].CreatedAt != now+2 ||
			rows[0].SentAt == nil || *rows[0].SentAt != now+2 || rows[2].ID != "n0" {
			t.Fatalf("rows after the upgrade: %+v, %v", rows, err)
		}
	})
}

// headsAfterUpgrade seeds, at version from, the heads of accounts u1 and u2
// and then the rows of seed, upgrades the store to the latest version and
// returns each account's head and approval rules generation as the head's
// lock reads them (LockHeadRules).
func headsAfterUpgrade(t *testing.T, dsn string, from int64, seed ...string) (st *store.Store, heads map[string]store.Head, rulesGen map[string]int64) {
	t.Helper()
	ctx := context.Background()
	old, err := store.OpenAtVersion(ctx, dsn, from)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append([]string{
		`INSERT INTO chain_heads (user_id, last_sequence, last_hash, last_event_id, event_count) VALUES ('u1', -1, NULL, NULL, 0)`,
		`INSERT INTO chain_heads (user_id, last_sequence, last_hash, last_event_id, event_count) VALUES ('u2', -1, NULL, NULL, 0)`,
	}, seed...) {
		if _, err := old.WriteDB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	st = storetest.Open(t, dsn) // every migration
	heads, rulesGen = map[string]store.Head{}, map[string]int64{}
	for _, user := range []string{"u1", "u2"} {
		if err := st.InTx(ctx, func(tx *sql.Tx) error {
			h, gen, err := st.LockHeadRules(ctx, tx, user)
			heads[user], rulesGen[user] = h, gen
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	return st, heads, rulesGen
}

// Migration 032 gives an account that had approval rules before it a rules
// generation other than 0 (0 means no rule was ever made: a tool call then
// reads none), and one without rules 0.
func TestUpgradeTo32MarksAccountsWithApprovalRules(t *testing.T) {
	storetest.EachEmpty(t, func(t *testing.T, dsn string) {
		_, _, rulesGen := headsAfterUpgrade(t, dsn, 31,
			`INSERT INTO approval_rules (user_id, rule_id, subagent, tool, ttl_seconds, created_at) VALUES ('u1', 'ar-1', '*', 'bash', 600, 1)`)
		for user, want := range map[string]bool{"u1": true, "u2": false} {
			if gen := rulesGen[user]; (gen != 0) != want {
				t.Errorf("%s: rules generation %d after the upgrade, rules: %v", user, gen, want)
			}
		}
	})
}

// Migration 038 gives an account that had signing keys before it a signing
// keys generation past the first, and one without keys the first (1): the
// first generation means "no key", which an append then takes from memory
// (app/signing_keys.go).
func TestUpgradeTo38MarksAccountsWithSigningKeys(t *testing.T) {
	storetest.EachEmpty(t, func(t *testing.T, dsn string) {
		st, heads, _ := headsAfterUpgrade(t, dsn, 37,
			`INSERT INTO signing_keys (user_id, machine_id, from_leaf, public_key, fingerprint, registered_at) VALUES ('u1', 'm1', 0, 'pk', 'fp', 1)`)
		for user, wantGen := range map[string]int64{"u1": 2, "u2": 1} {
			if gen := heads[user].SigningKeysGen; gen != wantGen {
				t.Errorf("%s: signing keys generation %d after the upgrade, want %d", user, gen, wantGen)
			}
			k, found, gen, err := st.SigningKeyAtGen(context.Background(), user, "m1")
			if err != nil || gen != wantGen || found != (user == "u1") || (found && k.Fingerprint != "fp") {
				t.Errorf("%s: SigningKeyAtGen = %+v, %v, %d, %v", user, k, found, gen, err)
			}
		}
	})
}

// Migration 036 fills the subagent column of the rows stored before it with
// what the service now writes there (store.RawSubagent), indexed rows and
// (SQLite) rows not yet indexed alike, and the sub-agent filter finds them
// as before.
func TestUpgradeTo36FillsTheSubagentColumn(t *testing.T) {
	storetest.EachEmpty(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		old, err := store.OpenAtVersion(ctx, dsn, 35)
		if err != nil {
			t.Fatal(err)
		}
		const user = "u-before-36"
		raws := []string{
			`{"subagent":"w1","tool_input":{}}`,
			`{"sub\u0061gent":"w1"}`,
			`{"subagent":"\u0077\u0031"}`,
			`{"subagent":"w1","subagent":"w2"}`,
			`{"subagent":"w2","cmd":"a\\b"}`,
			`{"x":{"subagent":"w1"}}`,
			`{"cmd":"grep \"subagent\" log"}`,
			`{"note":"caf\u00e9"}`,
			`{"subagent":{"a":"\u0041"}}`,
			`{"subagent":5}`,
			`{"subagent":true}`,
			`{"subagent":null}`,
			`{"subagent":"w\u0000"}`,
			`[1,"subagent"]`,
			`{"tool_input":{}}`,
		}
		account := any(user)
		if old.Dialect == store.SQLite {
			account = int64(7)
			if _, err := old.WriteDB().ExecContext(ctx, `INSERT INTO account_numbers (num, user_id) VALUES (7, $1)`, user); err != nil {
				t.Fatal(err)
			}
		}
		// Twice over: a row appended and not yet indexed (SQLite's tail,
		// unindexed = 1) and an indexed one.
		for i, raw := range append(slices.Clone(raws), raws...) {
			var unindexed any
			if old.Dialect == store.SQLite && i < len(raws) {
				unindexed = int64(1)
			}
			_, err := old.WriteDB().ExecContext(ctx, `INSERT INTO events (account, sequence, leaf_index, event_id, event_type,
				payload_hash, raw, ts, surface, machine_sequence, created_at, unindexed)
				VALUES ($1, $2, $2, $3, 'tool_call', $4, $5, '2026-11-28T00:00:00Z', 'hook', $2, 1, $6)`,
				account, int64(i), fmt.Sprintf("evt-%d", i), fmt.Sprintf("sha256:%064x", i+1), raw, unindexed)
			if err != nil {
				t.Fatal(err)
			}
		}
		old.Close()

		st := storetest.Open(t, dsn) // every migration
		rows, err := st.DB().QueryContext(ctx, `SELECT raw, subagent FROM events WHERE account = $1 ORDER BY sequence`, account)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var raw string
			var got *string
			if err := rows.Scan(&raw, &got); err != nil {
				t.Fatal(err)
			}
			if want := store.RawSubagent([]byte(raw)); !reflect.DeepEqual(got, want) {
				t.Errorf("raw %s: subagent %s after the upgrade, the service writes %s", raw, show(got), show(want))
			}
			n++
		}
		if err := rows.Err(); err != nil || n != 2*len(raws) {
			t.Fatalf("%d rows read: %v", n, err)
		}
		for _, when := range []string{"after the upgrade", "once indexed"} {
			for v, want := range map[string][]int64{"w1": {18, 17, 16, 15, 3, 2, 1, 0}, "w2": {19, 4}, `{"a":"\u0041"}`: {23, 8}, "5": nil} {
				page, err := st.SearchWindowed(ctx, store.SearchFilter{UserID: user, Subagent: &v, Limit: 50, Window: 5000})
				if err != nil {
					t.Fatal(err)
				}
				var got []int64
				for _, r := range page.Rows {
					got = append(got, r.Sequence)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: subagent=%s found %v, want %v", when, v, got, want)
				}
			}
			for st.EventsBehind() > 0 {
				if _, err := st.IndexBehind(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func show(p *string) string {
	if p == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", *p)
}

// Migration 037 rebuilds SQLite's events without its primary key, and 039
// moves its keys into tables of their own: every row comes through
// unchanged, a row of the tail (marked unindexed before 039) is in
// events_tail and an indexed one in events_seq and search's keys, the dedup
// key still refuses a second event_id, and the tail is indexed afterwards as
// before. (PostgreSQL has neither migration: the same checks hold of its
// unchanged table.)
func TestUpgradeTo37And39KeepEveryRowAndItsPlace(t *testing.T) {
	storetest.EachEmpty(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		old, err := store.OpenAtVersion(ctx, dsn, 36)
		if err != nil {
			t.Fatal(err)
		}
		const user = "u-before-37"
		// Stored at version 36; the first 25 indexed, the last 15 not yet
		// (SQLite's tail, marked below as that version's appends marked it).
		const rows, tail = 40, 15
		for i := range int64(rows) {
			sub := "w1"
			e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: i, EventID: fmt.Sprintf("evt-%d", i),
				EventType: "tool_call", PayloadHash: fmt.Sprintf("sha256:%064x", i+1), TS: "2026-11-28T00:00:00Z", Surface: "hook"},
				Raw: json.RawMessage(fmt.Sprintf(`{"i":%d,"subagent":"w1"}`, i))}, LeafIndex: i, Subagent: &sub, SubagentRead: true}
			if err := old.InTx(ctx, func(tx *sql.Tx) error { return insertEvent(ctx, old, tx, &e) }); err != nil {
				t.Fatal(err)
			}
		}
		var account any = user
		if old.Dialect == store.SQLite {
			if err := old.DB().QueryRowContext(ctx, `SELECT num FROM account_numbers WHERE user_id = $1`, user).Scan(&account); err != nil {
				t.Fatal(err)
			}
			if _, err := old.WriteDB().ExecContext(ctx, `UPDATE events SET unindexed = 1 WHERE account = $1 AND sequence >= $2`,
				account, rows-tail); err != nil {
				t.Fatal(err)
			}
		}
		const dump = `SELECT sequence, leaf_index, event_id, event_type, payload_hash, raw, ts, surface,
			machine_sequence, created_at, subagent FROM events WHERE account = $1 ORDER BY sequence`
		read := func(s *store.Store) []string {
			t.Helper()
			r, err := s.DB().QueryContext(ctx, dump, account)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var out []string
			for r.Next() {
				var seq, leaf, ms, created int64
				var id, typ, hash, raw, ts, surface, sub string
				if err := r.Scan(&seq, &leaf, &id, &typ, &hash, &raw, &ts, &surface, &ms, &created, &sub); err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprint(seq, leaf, id, typ, hash, raw, ts, surface, ms, created, sub))
			}
			return out
		}
		before := read(old)
		old.Close()

		st := storetest.Open(t, dsn) // every migration
		if after := read(st); !slices.Equal(after, before) || len(after) != rows {
			t.Fatalf("rows after the upgrade:\n%s\nbefore:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
		}
		if st.Dialect == store.SQLite {
			if n := st.EventsBehind(); n != tail {
				t.Errorf("EventsBehind after the upgrade = %d, want %d", n, tail)
			}
			// Each row in its place, found by its rowid.
			for table, want := range map[string]string{
				"events_tail":        fmt.Sprintf("%d %d-%d", tail, rows-tail, rows-1),
				"events_seq":         fmt.Sprintf("%d 0-%d", rows-tail, rows-tail-1),
				"events_by_type":     fmt.Sprintf("%d 0-%d", rows-tail, rows-tail-1),
				"events_by_subagent": fmt.Sprintf("%d 0-%d", rows-tail, rows-tail-1),
				"events_by_tool":     "0 -", // the rows have no tool
			} {
				var n int
				var span string
				err := st.DB().QueryRowContext(ctx, `SELECT count(*), coalesce(min(k.sequence) || '-' || max(k.sequence), '-')
					FROM `+table+` k JOIN events e ON e.rowid = k.rid AND e.account = k.account AND e.sequence = k.sequence
					WHERE k.account = $1`, account).Scan(&n, &span)
				if got := fmt.Sprintf("%d %s", n, span); err != nil || got != want {
					t.Errorf("%s after the upgrade: %s (%v), want %s", table, got, err, want)
				}
			}
		}
		_, err = st.WriteDB().ExecContext(ctx, `INSERT INTO events (account, sequence, leaf_index, event_id, event_type,
			payload_hash, ts, surface, machine_sequence, created_at) VALUES ($1, 1000, 1000, 'evt-3', 'tool_call', 'sha256:00', 'x', 'hook', 0, 1)`, account)
		if !store.IsUniqueViolation(err) {
			t.Errorf("a second event_id evt-3 after the upgrade: %v, want a unique violation", err)
		}
		for st.EventsBehind() > 0 {
			if _, err := st.IndexBehind(ctx); err != nil {
				t.Fatal(err)
			}
		}
		w1 := "w1"
		page, err := st.SearchWindowed(ctx, store.SearchFilter{UserID: user, Subagent: &w1, Limit: 100, Window: 5000})
		if err != nil || len(page.Rows) != rows {
			t.Fatalf("search by sub-agent once indexed: %d rows, %v; want %d", len(page.Rows), err, rows)
		}
		var got []int64
		if err := st.EventsBySequence(ctx, user, 1<<62, func(e *store.Event) error {
			got = append(got, e.Sequence)
			return nil
		}); err != nil || len(got) != rows || got[0] != 0 || got[rows-1] != rows-1 {
			t.Fatalf("EventsBySequence once indexed: %v, %v", got, err)
		}
	})
}
