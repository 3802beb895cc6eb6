package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// What decides a notice's rows, read inside the writer's transactions, is
// always what is committed: after this process's own changes (a preference,
// an endpoint registered or deleted, notice rows written), after another
// process's commit on the same database (an admin command while the server
// runs), and after a transaction that read or changed it was rolled back.
// On SQLite it comes from a cache (noticecache.go); this holds it to the
// reads PostgreSQL makes every time.
func TestNoticeContextFollowsEveryChange(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := storetest.Open(t, dsn)
		other := storetest.Open(t, dsn) // another process on the same database
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		createNoticeAccount(t, s, nil, now)
		const typ = "grant.revoked"
		read := func(st *store.Store) store.NoticeContext {
			t.Helper()
			var nc store.NoticeContext
			if err := st.InTx(ctx, func(tx *sql.Tx) (err error) {
				nc, err = st.NoticeContext(ctx, tx, "u1", typ, "")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return nc
		}
		want := func(step string, newest int64, subscribed bool, prefs string) {
			t.Helper()
			nc := read(s)
			if nc.LastCreatedAt != newest || nc.Subscribed != subscribed || store.PrefsKey(nc.Prefs) != prefs || nc.Email != nil {
				t.Errorf("%s: context %+v (prefs %q), want newest %d, subscribed %v, prefs %q", step, nc, store.PrefsKey(nc.Prefs), newest, subscribed, prefs)
			}
		}
		write := func(st *store.Store, fn func(tx *sql.Tx) error) {
			t.Helper()
			if err := st.InTx(ctx, fn); err != nil {
				t.Fatal(err)
			}
		}
		at := now.UnixMicro()
		notice := func(st *store.Store, at int64) {
			t.Helper()
			write(st, func(tx *sql.Tx) error {
				_, err := st.InsertNotifications(ctx, tx, finalNotice(at, at, "sent", "failed", "pending"))
				return err
			})
		}
		want("empty", 0, false, "")
		want("read twice", 0, false, "")
		notice(s, at)
		want("own notice", at+2, false, "")
		write(s, func(tx *sql.Tx) error {
			return s.PutPreference(ctx, tx, "u1", store.Preference{Type: typ, Channel: "email", Enabled: true, Digest: true})
		})
		want("own preference", at+2, false, "email:11")
		write(s, func(tx *sql.Tx) error {
			return s.CreateWebhook(ctx, tx, store.Webhook{ID: "w1", UserID: "u1", URL: "https://example.com/", Types: []string{typ}, Secret: "s", CreatedAt: now})
		})
		want("own endpoint", at+2, true, "email:11")
		write(s, func(tx *sql.Tx) error { return s.DeleteWebhook(ctx, tx, "u1", "w1") })
		want("endpoint deleted", at+2, false, "email:11")

		notice(other, at+10)
		want("another process's notice", at+12, false, "email:11")
		write(other, func(tx *sql.Tx) error {
			return other.PutPreference(ctx, tx, "u1", store.Preference{Type: typ, Channel: "in_app", Enabled: false})
		})
		want("another process's preference", at+12, false, "email:11,in_app:00")

		// Read, and written, in a transaction that then rolls back.
		errUndo := errors.New("undo")
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			if err := s.PutPreference(ctx, tx, "u1", store.Preference{Type: typ, Channel: "webhook", Enabled: false}); err != nil {
				return err
			}
			if _, err := s.NoticeContext(ctx, tx, "u1", typ, ""); err != nil {
				return err
			}
			if _, err := s.InsertNotifications(ctx, tx, finalNotice(at+20, 9, "sent", "", "")); err != nil {
				return err
			}
			if _, err := s.NoticeContext(ctx, tx, "u1", typ, ""); err != nil {
				return err
			}
			return errUndo
		}); !errors.Is(err, errUndo) {
			t.Fatal(err)
		}
		want("rolled back", at+12, false, "email:11,in_app:00")

		// A savepoint rolled back (a group commit's job that failed).
		write(s, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `SAVEPOINT job`); err != nil {
				return err
			}
			if err := s.PutPreference(ctx, tx, "u1", store.Preference{Type: typ, Channel: "webhook", Enabled: false}); err != nil {
				return err
			}
			if _, err := s.NoticeContext(ctx, tx, "u1", typ, ""); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO job`); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `RELEASE job`)
			return err
		})
		want("savepoint rolled back", at+12, false, "email:11,in_app:00")
	})
}
