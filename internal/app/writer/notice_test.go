package writer

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// A notice's rows are decided from what is committed, whichever engine
// remembers it: after another writer (a second replica on PostgreSQL,
// another process on SQLite) changed a preference, the next notice follows
// it — on SQLite the store's cache sees the other commit, on PostgreSQL the
// statement refuses the remembered context and the engine reads it again.
// Rows are stamped a microsecond apart above the account's newest, and a
// once-only notice is written once.
func TestNoticeFollowsAnotherWritersChange(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
		clock := func() time.Time { return now }
		st, otherSt := storetest.Open(t, dsn), storetest.Open(t, dsn)
		w, other := New(st, Options{Now: clock}), New(otherSt, Options{Now: clock})
		t.Cleanup(w.Close)
		t.Cleanup(other.Close)
		email := "ops@example.com"
		if err := st.InTx(ctx, func(tx *sql.Tx) error {
			return st.CreateAccountWithKey(ctx, tx, store.Account{UserID: "u1", Email: &email, CreatedAt: now},
				store.APIKey{ID: "k1", UserID: "u1", Hash: []byte("h1"), Prefix: "p", CreatedAt: now})
		}); err != nil {
			t.Fatal(err)
		}
		const typ = domain.NoticeGrantRevoked
		n := 0
		// notice writes one email row as decided for the recipient handed
		// over, and returns the recipient the written row was decided for.
		notice := func(dedupKey string) (domain.Recipient, []store.Notification, int64) {
			t.Helper()
			var seen domain.Recipient
			var rows []store.Notification
			var stored int64
			if err := w.Write(ctx, func(tx *Tx) (err error) {
				rows, stored, err = tx.Notice(ctx, "u1", typ, dedupKey, func(r domain.Recipient) ([]store.Notification, error) {
					seen = r
					n++
					status := domain.DeliveryQueued
					if r.Prefs[domain.ChannelEmail].Digest {
						status = domain.DeliverySuppressedDigest
					}
					var key *string
					if dedupKey != "" {
						key = &dedupKey
					}
					return []store.Notification{{ID: fmt.Sprintf("n%d", n), UserID: "u1", Type: typ, Channel: domain.ChannelEmail,
						Severity: "warning", DeliveryStatus: status, Payload: "{}", DedupKey: key}}, nil
				})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return seen, rows, stored
		}
		at := now.UnixMicro()
		for i := range 2 { // the second from what the first read, on PostgreSQL
			r, rows, stored := notice("")
			if stored != 1 || len(rows) != 1 || rows[0].CreatedAt != at+int64(i) || !r.HasEmail || r.Prefs[domain.ChannelEmail].Digest {
				t.Fatalf("notice %d: stored %d rows %+v for %+v, want one email row at %d for an account with email", i, stored, rows, r, at+int64(i))
			}
		}
		if err := other.Write(ctx, func(tx *Tx) error {
			return otherSt.PutPreference(ctx, tx.SQL(), "u1", store.Preference{Type: typ, Channel: domain.ChannelEmail, Enabled: true, Digest: true})
		}); err != nil {
			t.Fatal(err)
		}
		r, rows, stored := notice("")
		if stored != 1 || len(rows) != 1 || !r.Prefs[domain.ChannelEmail].Digest || rows[0].DeliveryStatus != domain.DeliverySuppressedDigest ||
			rows[0].CreatedAt != at+2 {
			t.Errorf("after another writer's preference: stored %d rows %+v for %+v, want one suppressed_digest row at %d", stored, rows, r, at+2)
		}
		listed, err := st.Notifications(ctx, "u1", nil, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(listed) != 3 || listed[0].DeliveryStatus != domain.DeliverySuppressedDigest {
			t.Errorf("stored rows %+v, want 3, the newest suppressed_digest", listed)
		}

		if _, _, stored := notice("once"); stored != 1 {
			t.Errorf("a once-only notice stored %d rows, want 1", stored)
		}
		before := n
		if _, rows, stored := notice("once"); stored != 0 || rows != nil || n != before {
			t.Errorf("the once-only notice again: stored %d, rows %+v, decided %d times; want nothing", stored, rows, n-before)
		}
	})
}
