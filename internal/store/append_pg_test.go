package store_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// appendState is every row an append moves, to check that a refused
// optimistic append moved none of them.
type appendState struct {
	headCount, headSequence int64
	headHash                string
	used, machineEvents     int64
	events, merkleRows      int64
}

func readAppendState(t *testing.T, s *store.Store, user, day string) appendState {
	t.Helper()
	ctx := context.Background()
	var st appendState
	head, err := s.Head(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	st.headCount, st.headSequence = head.EventCount, head.LastSequence
	if head.LastHash != nil {
		st.headHash = *head.LastHash
	}
	db := s.DB()
	for _, q := range []struct {
		dst  *int64
		sql  string
		args []any
	}{
		{&st.used, `SELECT COALESCE(SUM(used), 0) FROM daily_usage WHERE user_id = $1 AND day = $2`, []any{user, day}},
		{&st.machineEvents, `SELECT COALESCE(SUM(events), 0) FROM machine_heads WHERE user_id = $1`, []any{user}},
		{&st.events, `SELECT count(*) FROM events WHERE account = $1`, []any{user}},
		{&st.merkleRows, `SELECT count(*) FROM merkle_hashes WHERE account = $1`, []any{user}},
	} {
		if err := db.QueryRowContext(ctx, q.sql, q.args...).Scan(q.dst); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// The optimistic append (PostgreSQL, no transaction) writes everything or
// nothing: a head that moved, a spent quota or a taken event_id leave the
// head, the quota, the machine counter, the events and the Merkle rows as they
// were. The last two refusals happen after the statement's compare-and-set
// already moved the head, so only the statement's self-abort undoes it.
func TestAppendUnlockedWritesAllOrNothing(t *testing.T) {
	s := storetest.Open(t, storetest.DSN(t, storetest.Postgres))
	ctx := context.Background()
	const user, day = "u-optimistic", batchDay

	// Three events and two quota units through the locked path.
	threeEvents(t, s, user)
	if err := s.InTx(ctx, func(tx *sql.Tx) error {
		_, _, err := s.ConsumeQuota(ctx, tx, user, day, 2, 100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	next := func(eventID string, limit int64) store.Append { return nextAppend(t, s, user, eventID, limit) }
	before := readAppendState(t, s, user, day)

	stale := next("evt-3", 100)
	stale.Expect.EventCount, stale.Expect.LastSequence = 2, 1
	for name, a := range map[string]store.Append{
		"head moved":     stale,
		"quota spent":    next("evt-3", 2),
		"event_id taken": next("evt-1", 100),
	} {
		out, err := s.AppendEvent(ctx, nil, a)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if out.Stored() {
			t.Fatalf("%s: appended: %+v", name, out)
		}
		if got := readAppendState(t, s, user, day); got != before {
			t.Fatalf("%s: rows moved:\n got  %+v\n want %+v", name, got, before)
		}
	}

	out, err := s.AppendEvent(ctx, nil, next("evt-3", 100))
	if err != nil || !out.Stored() || out.QuotaUsed != 3 {
		t.Fatalf("append onto the current head: %+v, %v", out, err)
	}
	after := readAppendState(t, s, user, day)
	if after.headCount != 4 || after.headSequence != 3 || after.headHash != batchPayload(user, 3) || after.used != 3 || after.events != 4 ||
		after.merkleRows != merkle.StoredHashCount(4) || after.machineEvents != before.machineEvents+1 {
		t.Fatalf("after the append: %+v (before %+v)", after, before)
	}
	// The tree the statement extended is the tree of the four leaves.
	checkRoot(t, s, user, 4)
}
