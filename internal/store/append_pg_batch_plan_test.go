package store_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// The batch statement's generic plan — made once per session, possibly while
// the tables are still empty — reaches chain_heads and merkle_hashes through
// their primary keys only: no sequential scan or hash join that would read a
// whole table per batch once it holds many accounts (store.AppendUnlockedBatch).
func TestAppendBatchPlanReadsByPrimaryKey(t *testing.T) {
	s := storetest.Open(t, storetest.DSN(t, storetest.Postgres))
	ctx := context.Background()
	conn, err := s.BatchDB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PREPARE batch AS "+store.AppendBatchStatement); err != nil {
		t.Fatal(err)
	}
	text := explain(t, conn, `EXPLAIN (COSTS off) EXECUTE batch(
		'{u}', '{1}', '{1}', '{e}', '{t}', '{p}', '{h}', '{r}', '{d}', '{x}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{ts}',
		'{1}', '{rest}', '{k}', '{NULL}', '{1}', '{day}', '{""}', '{""}', '{""}', '{1}', '{0}', '{p}', '{0}', 100,
		'{u}', '{1}', '{"\\x00"}', '{NULL}')`)
	for _, bad := range []string{"Seq Scan", "Hash Join", "Bitmap Heap Scan"} {
		if strings.Contains(text, bad) {
			t.Fatalf("the batch plan has %q:\n%s", bad, text)
		}
	}
	// Each head is found by its key from the batch's row (a lookup per
	// account, not a walk of the index), and so is the Merkle row checked.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`Index Scan using chain_heads_pkey on chain_heads h\s+Index Cond: \(user_id = v_\d+\.user_id\)`),
		regexp.MustCompile(`Index Only Scan using merkle_hashes_pkey on merkle_hashes t\s+Index Cond: \(\(account = v_\d+\.user_id\) AND \(idx = v_\d+\.tree_check\)\)`),
	} {
		if !want.MatchString(text) {
			t.Fatalf("the batch plan lacks %s:\n%s", want, text)
		}
	}
}
