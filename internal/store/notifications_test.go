package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// createNoticeAccount creates the account u1 (with email, when given) the
// notification tests write rows for.
func createNoticeAccount(tb testing.TB, s *store.Store, email *string, now time.Time) {
	tb.Helper()
	ctx := context.Background()
	if err := s.InTx(ctx, func(tx *sql.Tx) error {
		return s.CreateAccountWithKey(ctx, tx, store.Account{UserID: "u1", Email: email, CreatedAt: now},
			store.APIKey{ID: "k1", UserID: "u1", Hash: []byte("h1"), Prefix: "p", CreatedAt: now})
	}); err != nil {
		tb.Fatal(err)
	}
}

// InsertNoticeRowsIf writes a notice's rows only while the account matches
// the guess they were decided from, stamped above the account's newest row;
// a guess that no longer holds writes nothing.
func TestInsertNoticeRowsIfChecksItsGuess(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		email := "ops@example.com"
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		tx := func(fn func(tx *sql.Tx) error) {
			t.Helper()
			if err := s.InTx(ctx, fn); err != nil {
				t.Fatal(err)
			}
		}
		createNoticeAccount(t, s, &email, now)
		const typ = "grant.revoked"
		// A row far in the future: new rows must be stamped above it.
		newest := now.Add(time.Hour).UnixMicro()
		tx(func(tx *sql.Tx) error {
			_, err := s.InsertNotifications(ctx, tx, []store.Notification{{ID: "n0", UserID: "u1", Type: typ, Channel: "in_app",
				Severity: "warning", DeliveryStatus: "sent", CreatedAt: newest, Payload: "{}"}})
			return err
		})
		rows := func(ids ...string) []store.Notification {
			out := make([]store.Notification, len(ids))
			for i, id := range ids {
				out[i] = store.Notification{ID: id, UserID: "u1", Type: typ, Channel: "in_app", Severity: "warning",
					DeliveryStatus: "queued", CreatedAt: int64(i), Payload: `{"subject":{}}`}
			}
			sent := int64(0)
			out[0].DeliveryStatus, out[0].SentAt = "sent", &sent
			return out
		}
		insert := func(g store.NoticeGuess, rs []store.Notification) bool {
			t.Helper()
			var ok bool
			tx(func(tx *sql.Tx) error {
				var err error
				ok, err = s.InsertNoticeRowsIf(ctx, tx, "u1", typ, now.UnixMicro(), g, rs)
				return err
			})
			return ok
		}
		count := func() int {
			t.Helper()
			var n int
			if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM notification_rows WHERE user_id = 'u1'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}

		right := store.NoticeGuess{HasEmail: true}
		rs := rows("n1", "n2")
		if !insert(right, rs) {
			t.Fatal("a guess that holds wrote nothing")
		}
		if rs[0].CreatedAt != newest+1 || rs[1].CreatedAt != newest+2 || rs[0].SentAt == nil || *rs[0].SentAt != newest+1 || rs[1].SentAt != nil {
			t.Errorf("stamps %d, %d (sent %v), want %d and %d above the newest row", rs[0].CreatedAt, rs[1].CreatedAt, rs[0].SentAt, newest+1, newest+2)
		}
		stored, err := s.NotificationByID(ctx, nil, "u1", "n1")
		if err != nil || stored.CreatedAt != newest+1 || stored.SentAt == nil || *stored.SentAt != newest+1 || stored.DeliveryStatus != "sent" {
			t.Errorf("stored n1 = %+v, %v", stored, err)
		}

		for name, g := range map[string]store.NoticeGuess{
			"no email":   {HasEmail: false},
			"subscribed": {HasEmail: true, Subscribed: true},
			"prefs":      {HasEmail: true, Prefs: "email:11"},
		} {
			if insert(g, rows("x-"+name)) {
				t.Errorf("guess %q (%+v) wrote rows for an account it does not describe", name, g)
			}
		}
		if n := count(); n != 3 {
			t.Fatalf("%d rows after the wrong guesses, want 3", n)
		}

		// Each change to what decides the rows makes the old guess wrong and
		// the new one right.
		tx(func(tx *sql.Tx) error {
			return s.PutPreference(ctx, tx, "u1", store.Preference{Type: typ, Channel: "email", Enabled: true, Digest: true})
		})
		tx(func(tx *sql.Tx) error {
			return s.PutPreference(ctx, tx, "u1", store.Preference{Type: typ, Channel: "in_app", Enabled: false})
		})
		tx(func(tx *sql.Tx) error {
			return s.CreateWebhook(ctx, tx, store.Webhook{ID: "w1", UserID: "u1", URL: "https://example.com/", Types: []string{typ}, Secret: "s", CreatedAt: now})
		})
		if insert(right, rows("n3")) {
			t.Error("the guess from before the changes still wrote rows")
		}
		prefs := store.PrefsKey(map[string]store.Preference{"email": {Enabled: true, Digest: true}, "in_app": {Enabled: false}})
		if prefs != "email:11,in_app:00" {
			t.Errorf("PrefsKey = %q", prefs)
		}
		if !insert(store.NoticeGuess{HasEmail: true, Subscribed: true, Prefs: prefs}, rows("n4")) {
			t.Error("the guess after the changes wrote nothing")
		}
		if n := count(); n != 4 {
			t.Fatalf("%d rows, want 4", n)
		}
	})
}

// InsertNotifications skips the rows of a once-only notice written before
// and counts what it stored; a stamp already taken is still an error.
func TestInsertNotificationsSkipsOnceOnlyRowsWrittenBefore(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		createNoticeAccount(t, s, nil, now)
		next := now.UnixMicro()
		row := func(id, channel, dedup string) store.Notification {
			next++
			r := store.Notification{ID: id, UserID: "u1", Type: "grant.expiring_24h", Channel: channel, Severity: "warning",
				DeliveryStatus: "queued", CreatedAt: next, Payload: "{}"}
			if dedup != "" {
				r.DedupKey = &dedup
			}
			return r
		}
		insert := func(rows ...store.Notification) (int64, error) {
			var n int64
			err := s.InTx(ctx, func(tx *sql.Tx) (err error) {
				n, err = s.InsertNotifications(ctx, tx, rows)
				return err
			})
			return n, err
		}
		if n, err := insert(row("a1", "in_app", "g1@t"), row("a2", "email", "g1@t"), row("a3", "in_app", "")); err != nil || n != 3 {
			t.Fatalf("first insert: %d stored, %v; want 3", n, err)
		}
		n, err := insert(row("b1", "in_app", "g1@t"), row("b2", "email", "g1@t"), row("b3", "in_app", "g2@t"), row("b4", "in_app", ""))
		if err != nil || n != 2 {
			t.Fatalf("second insert: %d stored, %v; want 2 (g1@t's rows skipped)", n, err)
		}
		if _, err := s.NotificationByID(ctx, nil, "u1", "b1"); err == nil {
			t.Error("b1, a second row of g1@t in_app, was stored")
		}
		// Once-only is per notice, not per channel: the same key with a
		// channel its first write did not have (a preference changed since)
		// stores nothing either.
		if n, err := insert(row("c0", "webhook", "g1@t")); err != nil || n != 0 {
			t.Errorf("a new channel of g1@t: %d stored, %v; want none", n, err)
		}
		taken := row("c1", "in_app", "")
		taken.CreatedAt = now.UnixMicro() + 1
		if _, err := insert(taken); err == nil {
			t.Error("a row stamped with a taken created_at was stored or skipped without an error")
		}
	})
}

// BenchmarkNoticeRows compares a notice's rows written after reading the
// account's context (two statements) with InsertNoticeRowsIf (one).
func BenchmarkNoticeRows(b *testing.B) {
	for _, backend := range []storetest.Backend{storetest.SQLite, storetest.Postgres} {
		b.Run(string(backend), func(b *testing.B) { benchmarkNoticeRows(b, storetest.Open(b, storetest.DSN(b, backend))) })
	}
}

func benchmarkNoticeRows(b *testing.B, s *store.Store) {
	ctx := context.Background()
	email := "ops@example.com"
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	createNoticeAccount(b, s, &email, now)
	// inTxs runs op b.N times, 50 to a transaction (the writer's group
	// commit runs many revokes in one; PostgreSQL's autovacuum sees rows
	// only once committed).
	inTxs := func(b *testing.B, op func(tx *sql.Tx) error) {
		b.Helper()
		for done := 0; done < b.N; {
			n := min(50, b.N-done)
			if err := s.InTx(ctx, func(tx *sql.Tx) error {
				for range n {
					if err := op(tx); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			done += n
		}
	}
	next := 0
	rows := func() []store.Notification {
		next++
		i := next
		out := make([]store.Notification, 3)
		for j, ch := range []string{"in_app", "email", "webhook"} {
			out[j] = store.Notification{ID: fmt.Sprintf("n-%d-%d", i, j), UserID: "u1", Type: "grant.revoked", Channel: ch,
				Severity: "warning", DeliveryStatus: "queued", CreatedAt: int64(j), Payload: `{"subject":{"grant_id":"g"}}`}
		}
		return out
	}
	b.Run("context+insert", func(b *testing.B) {
		inTxs(b, func(tx *sql.Tx) error {
			nc, err := s.NoticeContext(ctx, tx, "u1", "grant.revoked", "")
			if err != nil {
				return err
			}
			rs := rows()
			store.StampNotices(rs, nc.Stamp(now.UnixMicro()))
			_, err = s.InsertNotifications(ctx, tx, rs)
			return err
		})
	})
	b.Run("insert-if", func(b *testing.B) {
		inTxs(b, func(tx *sql.Tx) error {
			ok, err := s.InsertNoticeRowsIf(ctx, tx, "u1", "grant.revoked", now.UnixMicro(), store.NoticeGuess{HasEmail: true}, rows())
			if err == nil && !ok {
				err = fmt.Errorf("not written")
			}
			return err
		})
	})
}

// A job's write of thousands of once-only notices, a few of them written
// before (by a run between its read and its write), stores each of the
// others once and none of those: marks go a thousand to a statement, and a
// statement meeting a mark undoes itself and marks only the new keys.
func TestInsertNotificationsMarksThousandsOnce(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		createNoticeAccount(t, s, nil, now)
		stamp := now.UnixMicro()
		notices := func(prefix string, keys ...int) []store.Notification {
			var rows []store.Notification
			for _, k := range keys {
				key := fmt.Sprintf("g-%05d@t", k)
				for _, ch := range []string{"in_app", "email"} {
					stamp++
					rows = append(rows, store.Notification{ID: fmt.Sprintf("%s-%d-%s", prefix, k, ch), UserID: "u1", Type: "grant.expiring_24h",
						Channel: ch, Severity: "warning", DeliveryStatus: "sent", CreatedAt: stamp, DedupKey: &key, Payload: "{}"})
				}
			}
			return rows
		}
		insert := func(rows []store.Notification) int64 {
			t.Helper()
			var n int64
			if err := s.InTx(ctx, func(tx *sql.Tx) (err error) {
				n, err = s.InsertNotifications(ctx, tx, rows)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := []int{7, 1500, 2499} // in the first, second and third thousand
		if n := insert(notices("a", before...)); n != 6 {
			t.Fatalf("first write: %d rows, want 6", n)
		}
		all := make([]int, 2500)
		for i := range all {
			all[i] = 2499 - i // not in key order
		}
		if n := insert(notices("b", all...)); n != 2*(2500-3) {
			t.Fatalf("second write: %d rows, want %d (the three written before skipped)", n, 2*(2500-3))
		}
		for _, k := range []int{7, 1500, 2499} {
			if _, err := s.NotificationByID(ctx, nil, "u1", fmt.Sprintf("b-%d-in_app", k)); err == nil {
				t.Errorf("key %d, written before, was written again", k)
			}
		}
		if _, err := s.NotificationByID(ctx, nil, "u1", "b-8-email"); err != nil {
			t.Errorf("a new key's row: %v", err)
		}
		if n := insert(notices("c", all...)); n != 0 {
			t.Fatalf("third write: %d rows, want none", n)
		}
	})
}

// InsertNotifications writes each column's every form back exactly: the
// values it writes into the statement's text (a channel or status word,
// digest, attempts, an empty payload, a null sent_at) and those it binds
// (a sent_at apart from created_at, a payload, a status that is no plain
// word, which must not reach the text).
func TestInsertNotificationsStoresEveryColumnForm(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 27, 5, 0, 0, 0, time.UTC)
		createNoticeAccount(t, s, nil, now)
		at := func(us int64) *int64 { return &us }
		base := now.UnixMicro()
		want := []store.Notification{
			{ID: "n1", Channel: "in_app", DeliveryStatus: "sent", CreatedAt: base, SentAt: at(base)},
			{ID: "n2", Channel: "email", DeliveryStatus: "suppressed_digest", Digest: true, CreatedAt: base + 1, Payload: `{"a":1}`},
			{ID: "n3", Channel: "webhook", DeliveryStatus: "failed", CreatedAt: base + 2, SentAt: at(base + 50), Payload: `{"b":"it's"}`, Attempts: 3},
			{ID: "n4", Channel: "webhook", DeliveryStatus: "x'); DROP TABLE notifications; --", CreatedAt: base + 3},
		}
		for i := range want {
			want[i].UserID, want[i].Type, want[i].Severity = "u1", "grant.revoked", "warning"
		}
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			n, err := s.InsertNotifications(ctx, tx, want)
			if err == nil && n != int64(len(want)) {
				err = fmt.Errorf("stored %d rows, want %d", n, len(want))
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			var got store.Notification
			var sent sql.NullInt64
			if err := s.DB().QueryRowContext(ctx, `SELECT user_id, type, severity, channel, delivery_status, digest, created_at, sent_at, payload, attempts
				FROM notifications WHERE id = $1`, w.ID).Scan(&got.UserID, &got.Type, &got.Severity, &got.Channel, &got.DeliveryStatus,
				&got.Digest, &got.CreatedAt, &sent, &got.Payload, &got.Attempts); err != nil {
				t.Fatalf("%s: %v", w.ID, err)
			}
			got.ID = w.ID
			if sent.Valid {
				got.SentAt = &sent.Int64
			}
			if (got.SentAt == nil) != (w.SentAt == nil) || (got.SentAt != nil && *got.SentAt != *w.SentAt) {
				t.Errorf("%s: sent_at %v, want %v", w.ID, got.SentAt, w.SentAt)
			}
			got.SentAt, w.SentAt = nil, nil
			if got != w {
				t.Errorf("%s: stored %+v, want %+v", w.ID, got, w)
			}
		}
	})
}
