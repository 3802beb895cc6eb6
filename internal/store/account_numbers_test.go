package store_test

import (
	"context"
	"testing"

	"github.com/auditchain/auditchain/internal/store/storetest"
)

// On SQLite, events and Merkle rows hold their account's number, an integer
// (migration 013): the columns are not STRICT, so a statement that bound the
// user_id there instead would store text, or match nothing, without an
// error. Single appends and batches both write the number, the same for an
// account whatever wrote it, and a different one for each account.
func TestSQLiteKeysTheRecordByAccountNumber(t *testing.T) {
	ctx := context.Background()
	s := storetest.Open(t, storetest.DSN(t, storetest.SQLite))
	appendRaw(t, s, "u1", 0, 5)
	appendBatchRaw(t, s, "u1", 5, 9)
	appendBatchRaw(t, s, "u2", 0, 7)
	keys := map[string]any{}
	for _, user := range []string{"u1", "u2"} {
		k, err := s.AccountKey(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := k.(int64); !ok || k == any(int64(0)) {
			t.Fatalf("AccountKey(%s) = %#v, want the account's number", user, k)
		}
		keys[user] = k
	}
	if keys["u1"] == keys["u2"] {
		t.Fatalf("u1 and u2 share the number %v", keys["u1"])
	}
	for _, table := range []string{"events", "merkle_hashes"} {
		var rows, notInteger int
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE typeof(account) <> 'integer') FROM `+table).
			Scan(&rows, &notInteger); err != nil {
			t.Fatal(err)
		}
		if rows == 0 || notInteger != 0 {
			t.Fatalf("%s: %d rows, %d of them with an account that is not an integer", table, rows, notInteger)
		}
	}
	for user, want := range map[string]int{"u1": 9, "u2": 7} {
		var events, merkleRows int
		if err := s.DB().QueryRowContext(ctx, `SELECT (SELECT count(*) FROM events WHERE account = $1),
			(SELECT count(*) FROM merkle_hashes WHERE account = $1)`, keys[user]).Scan(&events, &merkleRows); err != nil {
			t.Fatal(err)
		}
		if events != want || merkleRows == 0 {
			t.Errorf("under %s's number: %d events (want %d), %d Merkle rows", user, events, want, merkleRows)
		}
	}
}
