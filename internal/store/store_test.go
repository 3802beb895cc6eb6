package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

func TestMigrationsAreIdempotentAndConcurrent(t *testing.T) {
	storetest.EachEmpty(t, func(t *testing.T, dsn string) {
		// Replicas starting together must not race on migrations.
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := store.Open(context.Background(), dsn)
				if err == nil {
					s.Close()
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("concurrent open: %v", err)
			}
		}
		s := storetest.Open(t, dsn)
		var n int
		if err := s.DB().QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n == 0 {
			t.Fatalf("schema_migrations: n=%d err=%v", n, err)
		}
	})
}

func TestAccountsAndKeys(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
		email := "a@example.com"
		acct := store.Account{UserID: "11111111-1111-1111-1111-111111111111", Email: &email, CreatedAt: now}
		k1 := store.APIKey{ID: "k1", UserID: acct.UserID, Hash: []byte("hash-1"), Prefix: "ac_1", Scopes: []string{"grants", "events:read"}, CreatedAt: now}
		if err := s.InTx(ctx, func(tx *sql.Tx) error { return s.CreateAccountWithKey(ctx, tx, acct, k1) }); err != nil {
			t.Fatal(err)
		}
		// Same email again is a conflict and writes nothing (the key is not stored).
		dup := store.Account{UserID: "22222222-2222-2222-2222-222222222222", Email: &email, CreatedAt: now}
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			return s.CreateAccountWithKey(ctx, tx, dup, store.APIKey{ID: "k9", UserID: dup.UserID, Hash: []byte("h9"), CreatedAt: now})
		}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("duplicate email: got %v, want ErrConflict", err)
		}
		if _, _, err := s.KeyByHash(ctx, []byte("h9")); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("key of refused account was stored: %v", err)
		}
		// Accounts without email may coexist.
		for _, id := range []string{"33333333-3333-3333-3333-333333333333", "44444444-4444-4444-4444-444444444444"} {
			if err := s.InTx(ctx, func(tx *sql.Tx) error {
				return s.CreateAccountWithKey(ctx, tx, store.Account{UserID: id, CreatedAt: now}, store.APIKey{ID: "k-" + id, UserID: id, Hash: []byte(id), CreatedAt: now})
			}); err != nil {
				t.Fatalf("no-email account: %v", err)
			}
		}
		exp := now.Add(time.Hour)
		k2 := store.APIKey{ID: "k2", UserID: acct.UserID, Hash: []byte("hash-2"), Prefix: "ac_2", Machine: "m", Label: "l", CreatedAt: now.Add(time.Second), ExpiresAt: &exp}
		if err := s.InTx(ctx, func(tx *sql.Tx) error { return s.CreateKey(ctx, tx, k2) }); err != nil {
			t.Fatal(err)
		}
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			return s.CreateKey(ctx, tx, store.APIKey{ID: "k3", UserID: "missing", Hash: []byte("h3"), CreatedAt: now})
		}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("key for missing account: %v", err)
		}
		got, admin, err := s.KeyByHash(ctx, []byte("hash-1"))
		if err != nil || got.ID != "k1" || admin || len(got.Scopes) != 2 {
			t.Fatalf("KeyByHash = %+v admin=%v err=%v", got, admin, err)
		}
		keys, err := s.Keys(ctx, acct.UserID)
		if err != nil || len(keys) != 2 || keys[0].ID != "k2" || keys[0].ExpiresAt == nil || !keys[0].ExpiresAt.Equal(exp) {
			t.Fatalf("Keys = %+v err=%v", keys, err)
		}
		r1, err := revokeKey(t, s, acct.UserID, "k1", now.Add(time.Minute))
		if err != nil || r1.RevokedAt == nil {
			t.Fatalf("revoke: %+v %v", r1, err)
		}
		r2, err := revokeKey(t, s, acct.UserID, "k1", now.Add(time.Hour))
		if err != nil || !r2.RevokedAt.Equal(*r1.RevokedAt) {
			t.Fatalf("second revoke moved revoked_at: %v -> %v (%v)", r1.RevokedAt, r2.RevokedAt, err)
		}
		// Another account's key id answers exactly like a missing one.
		if _, err := revokeKey(t, s, "33333333-3333-3333-3333-333333333333", "k2", now); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("cross-account revoke: %v", err)
		}
	})
}

func TestSettingOnceKeepsTheFirstValue(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		v1, err := s.SettingOnce(ctx, "service_key", []byte("first"))
		if err != nil || string(v1) != "first" {
			t.Fatalf("first: %q %v", v1, err)
		}
		v2, err := s.SettingOnce(ctx, "service_key", []byte("second"))
		if err != nil || string(v2) != "first" {
			t.Fatalf("second: %q %v", v2, err)
		}
	})
}

func TestOpenRejectsUnknownStores(t *testing.T) {
	for _, dsn := range []string{"", "mysql://x", "sqlite:"} {
		if s, err := store.Open(context.Background(), dsn); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", dsn)
		}
	}
}

// revokeKey is Store.RevokeKey in a transaction of its own.
func revokeKey(t *testing.T, s *store.Store, userID, keyID string, now time.Time) (store.APIKey, error) {
	t.Helper()
	var k store.APIKey
	err := s.InTx(context.Background(), func(tx *sql.Tx) error {
		var err error
		k, err = s.RevokeKey(context.Background(), tx, userID, keyID, now)
		return err
	})
	return k, err
}

// A path holding URI delimiters opens the file it names, not a prefix of it.
func TestSQLitePathWithURIDelimiters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a#b?c%41.db")
	st, err := store.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database is not at %s: %v", path, err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == "a" {
			t.Fatalf("opened %s instead", filepath.Join(dir, e.Name()))
		}
	}
}

// PostgreSQL sessions ask the server to notice a vanished replica in about
// 90 s (its claims' row locks are released then), unless the URL says otherwise.
func TestPostgresSessionsProbeForDeadPeers(t *testing.T) {
	st := storetest.Open(t, storetest.DSN(t, storetest.Postgres))
	var idle string
	if err := st.DB().QueryRow(`SHOW tcp_keepalives_idle`).Scan(&idle); err != nil {
		t.Fatal(err)
	}
	if idle != "60" && idle != "1min" {
		t.Fatalf("tcp_keepalives_idle = %q, want 60 seconds", idle)
	}
}
