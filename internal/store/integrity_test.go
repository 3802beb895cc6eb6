package store_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/checkpoint"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// appendRaw stores events [from, to) for user the way the append path does:
// head locked, InsertEvent in one transaction per event.
func appendRaw(t *testing.T, s *store.Store, user string, from, to int64) []string {
	t.Helper()
	ctx := context.Background()
	var hashes []string
	for i := from; i < to; i++ {
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			head, err := s.LockHead(ctx, tx, user)
			if err != nil {
				return err
			}
			e := rawEvent(user, i, head.EventCount)
			hashes = append(hashes, e.PayloadHash)
			return insertEvent(ctx, s, tx, &e)
		})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	return hashes
}

// rawEvent is user's event of sequence i at leaf, its payload hash made
// from the two.
func rawEvent(user string, i, leaf int64) store.Event {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", user, i)))
	return store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: i, EventID: fmt.Sprintf("evt-%d", i),
		EventType: "t", PayloadHash: verify.HashPrefix + hex.EncodeToString(sum[:]), TS: "2026-01-01T00:00:00Z",
		Surface: "rest"}}, LeafIndex: leaf}
}

// refStore is the reference tree of the leaves hashes in tlog's stored form.
func refStore(t *testing.T, hashes []string) *merkle.HashStore {
	t.Helper()
	ref := &merkle.HashStore{}
	for _, h := range hashes {
		leaf, err := verify.HashBytes(h)
		if err != nil {
			t.Fatal(err)
		}
		if err := ref.Append(leaf); err != nil {
			t.Fatal(err)
		}
	}
	return ref
}

// checkStoredHashes compares every stored hash of user's tree of n leaves
// with the reference's.
func checkStoredHashes(t *testing.T, s *store.Store, user string, ref *merkle.HashStore, n int64) {
	t.Helper()
	all := make([]int64, merkle.StoredHashCount(n))
	for i := range all {
		all[i] = int64(i)
	}
	want, err := ref.ReadHashes(all)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.HashReader(context.Background(), nil, user).ReadHashes(all)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("stored hash %d of %d: %x, reference %x", i, len(all), got[i], want[i])
		}
	}
}

func refTree(t *testing.T, hashes []string) *testonly.Tree {
	ref := testonly.New(rfc6962.DefaultHasher)
	for _, h := range hashes {
		b, err := verify.HashBytes(h)
		if err != nil {
			t.Fatal(err)
		}
		ref.AppendData(b)
	}
	return ref
}

func TestMerkleTreeMaintainedOnAppend(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		hashes := appendRaw(t, s, "u1", 0, 37)
		appendRaw(t, s, "u2", 0, 5) // another account's tree is separate
		ref := refTree(t, hashes)
		r := s.HashReader(ctx, nil, "u1")
		for n := int64(0); n <= 37; n++ {
			root, err := merkle.Root(n, r)
			if err != nil {
				t.Fatal(err)
			}
			if root != verify.Hash(ref.HashAt(uint64(n))) {
				t.Fatalf("root of %d: %s, reference %x", n, root, ref.HashAt(uint64(n)))
			}
		}
		// On SQLite the roots above were computed from the tail (single
		// appends write no Merkle row; merkle_behind_sqlite.go); the
		// writer's work behind them stores the rows.
		indexBehindAll(t, s)
		// Each row holds one hash on PostgreSQL and a run of up to four
		// consecutive ones on SQLite (migration 012): count hashes.
		var stored, rows, longest int64
		if err := s.DB().QueryRowContext(ctx, `SELECT coalesce(sum(length(hash)), 0) / 32, count(*), coalesce(max(length(hash)), 0) / 32
			FROM merkle_hashes WHERE account = $1`, s.KeyOfAccount(t, "u1")).Scan(&stored, &rows, &longest); err != nil {
			t.Fatal(err)
		}
		if stored != merkle.StoredHashCount(37) {
			t.Fatalf("%d hashes stored, want %d", stored, merkle.StoredHashCount(37))
		}
		if s.Dialect == store.SQLite {
			// The 37 leaves' hashes stored behind the appends at once, as
			// consecutive runs of four (the last one shorter).
			if want := (stored + 3) / 4; rows != want || longest != 4 {
				t.Fatalf("SQLite runs: %d rows for %d hashes, longest %d; want %d rows of at most 4", rows, stored, longest, want)
			}
		} else if rows != stored {
			t.Fatalf("PostgreSQL: %d rows for %d hashes, want one each", rows, stored)
		}

		// A tree that lost its rows (or predates migration 005) is rebuilt
		// from the events by the next append, in its transaction
		// (PostgreSQL), or by the writer's work behind it (SQLite).
		if _, err := s.WriteDB().ExecContext(ctx, `DELETE FROM merkle_hashes WHERE account = $1`, s.KeyOfAccount(t, "u1")); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, appendRaw(t, s, "u1", 37, 40)...)
		indexBehindAll(t, s)
		root, err := merkle.Root(40, s.HashReader(ctx, nil, "u1"))
		if err != nil || root != verify.Hash(refTree(t, hashes).Hash()) {
			t.Fatalf("rebuilt root %s: %v", root, err)
		}
		if _, err := merkle.Root(6, s.HashReader(ctx, nil, "nobody")); !errors.Is(err, store.ErrMissingHash) {
			t.Fatalf("missing tree: %v", err)
		}
	})
}

// appendBatchRaw appends leaves from..to-1 to user's chain in one
// InsertEvents call (the batch path: one multi-row insert, its Merkle rows
// written together).
func appendBatchRaw(t *testing.T, s *store.Store, user string, from, to int64) []string {
	t.Helper()
	ctx := context.Background()
	var hashes []string
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		head, err := s.LockHead(ctx, tx, user)
		if err != nil {
			return err
		}
		var evs []store.Event
		for i := from; i < to; i++ {
			evs = append(evs, rawEvent(user, i, head.EventCount+i-from))
			hashes = append(hashes, evs[len(evs)-1].PayloadHash)
		}
		return insertRun(ctx, s, tx, evs)
	})
	if err != nil {
		t.Fatalf("batch %d..%d: %v", from, to, err)
	}
	return hashes
}

// Batches and single appends, in any mix, leave exactly the stored hashes of
// the reference tree at every index (on SQLite read back from runs of up to
// four, which a batch's rows and an append's rows split differently), and no
// hash beyond them.
func TestStoredHashesOfMixedBatchesAndAppends(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		var hashes []string
		n := int64(0)
		for _, step := range []struct {
			batch bool
			size  int64
		}{{true, 1}, {false, 2}, {true, 3}, {true, 7}, {false, 1}, {true, 64}, {false, 5}, {true, 500}, {false, 3}, {true, 2}} {
			if step.batch {
				hashes = append(hashes, appendBatchRaw(t, s, "u1", n, n+step.size)...)
			} else {
				hashes = append(hashes, appendRaw(t, s, "u1", n, n+step.size)...)
			}
			n += step.size
		}
		appendBatchRaw(t, s, "u2", 0, 9) // another account's runs interleave in the key order
		ref := refStore(t, hashes)
		checkStoredHashes(t, s, "u1", ref, n)
		// Out of order and repeated indexes are answered in the order asked.
		count := merkle.StoredHashCount(n)
		want, err := ref.ReadHashes([]int64{count - 1, 0, 5, count / 2})
		if err != nil {
			t.Fatal(err)
		}
		r := s.HashReader(ctx, nil, "u1")
		picked := []int64{count - 1, 0, 5, 5, count / 2}
		wantAt := []tlog.Hash{want[0], want[1], want[2], want[2], want[3]}
		got, err := r.ReadHashes(picked)
		if err != nil {
			t.Fatal(err)
		}
		for i, idx := range picked {
			if got[i] != wantAt[i] {
				t.Fatalf("hash %d asked at position %d: %x, reference %x", idx, i, got[i], wantAt[i])
			}
		}
		for _, missing := range [][]int64{{count}, {3, count + 40}} {
			if _, err := r.ReadHashes(missing); !errors.Is(err, store.ErrMissingHash) {
				t.Fatalf("indexes %v past the tree: %v, want ErrMissingHash", missing, err)
			}
		}
		if _, err := s.HashReader(ctx, nil, "nobody").ReadHashes([]int64{0}); !errors.Is(err, store.ErrMissingHash) {
			t.Fatalf("an account without a tree: %v, want ErrMissingHash", err)
		}
	})
}

// A tree stored one hash per row, as every tree was before SQLite's
// migration 012 (and as PostgreSQL keeps it), is extended by single appends
// and batches and reads back exactly.
func TestAppendsExtendATreeOfOneHashRows(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		hashes := appendRaw(t, s, "u1", 0, 11)
		ref := refStore(t, hashes)
		if _, err := s.WriteDB().ExecContext(ctx, `DELETE FROM merkle_hashes WHERE account = $1`, s.KeyOfAccount(t, "u1")); err != nil {
			t.Fatal(err)
		}
		for i := range merkle.StoredHashCount(11) {
			h, err := ref.ReadHashes([]int64{i})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.WriteDB().ExecContext(ctx, `INSERT INTO merkle_hashes (account, idx, hash) VALUES ($3, $1, $2)`, i, h[0][:], s.KeyOfAccount(t, "u1")); err != nil {
				t.Fatal(err)
			}
		}
		hashes = append(hashes, appendRaw(t, s, "u1", 11, 14)...)
		hashes = append(hashes, appendBatchRaw(t, s, "u1", 14, 40)...)
		checkStoredHashes(t, s, "u1", refStore(t, hashes), 40)
		var old int64
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM merkle_hashes WHERE account = $2 AND idx < $1 AND length(hash) = 32`,
			merkle.StoredHashCount(11), s.KeyOfAccount(t, "u1")).Scan(&old); err != nil || old != merkle.StoredHashCount(11) {
			t.Fatalf("%d one-hash rows left below the appended ones (%v), want all %d: the tree was rebuilt instead of extended",
				old, err, merkle.StoredHashCount(11))
		}
	})
}

// A tree that lost its last row is rebuilt by the next append (on SQLite
// by the writer's work behind it), even when
// the leaf before wrote several hashes and its first one is still there:
// leaf 15 writes five (its leaf hash and four subtree roots; two rows on
// SQLite, five on PostgreSQL), and the even leaf 16 reads none of them.
func TestAppendRebuildsATreeCutShortAtItsEnd(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		hashes := appendRaw(t, s, "u1", 0, 16)
		indexBehindAll(t, s) // SQLite: the rows are stored behind the appends
		if _, err := s.WriteDB().ExecContext(ctx, `DELETE FROM merkle_hashes WHERE account = $1
			AND idx = (SELECT max(idx) FROM merkle_hashes WHERE account = $1)`, s.KeyOfAccount(t, "u1")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.HashReader(ctx, nil, "u1").ReadHashes([]int64{merkle.StoredHashCount(16) - 1}); !errors.Is(err, store.ErrMissingHash) {
			t.Fatalf("the tree's last hash after deleting its row: %v, want missing", err)
		}
		hashes = append(hashes, appendRaw(t, s, "u1", 16, 17)...)
		indexBehindAll(t, s)
		checkStoredHashes(t, s, "u1", refStore(t, hashes), 17)
	})
}

// On SQLite, a tree that runs past its leaves (a row written behind the
// store's back, ahead of where the next leaf begins) is rebuilt by the next
// batch, or for single appends by the writer's work behind them, instead of
// being written over: runs are only written where the stored tree ends.
func TestAppendsRebuildATreeThatRunsPastItsLeaves(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		if s.Dialect != store.SQLite {
			t.Skip("PostgreSQL keeps one hash per row under its primary key and reads no tree end")
		}
		ctx := context.Background()
		hashes := appendRaw(t, s, "u1", 0, 6)
		stray := func(n int64) {
			t.Helper()
			if _, err := s.WriteDB().ExecContext(ctx, `INSERT INTO merkle_hashes (account, idx, hash) VALUES ($2, $1, zeroblob(32))`,
				merkle.StoredHashCount(n)+3, s.KeyOfAccount(t, "u1")); err != nil {
				t.Fatal(err)
			}
		}
		check := func(n int64) {
			t.Helper()
			indexBehindAll(t, s) // single appends' rows are stored behind them
			checkStoredHashes(t, s, "u1", refStore(t, hashes), n)
			var past int
			if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM merkle_hashes WHERE account = $2 AND idx >= $1`,
				merkle.StoredHashCount(n), s.KeyOfAccount(t, "u1")).Scan(&past); err != nil || past != 0 {
				t.Fatalf("%d rows past the tree of %d leaves (%v), want none", past, n, err)
			}
		}
		stray(6)
		hashes = append(hashes, appendRaw(t, s, "u1", 6, 7)...) // odd leaf
		check(7)
		stray(7)
		hashes = append(hashes, appendRaw(t, s, "u1", 7, 8)...) // even leaf
		check(8)
		stray(8)
		hashes = append(hashes, appendBatchRaw(t, s, "u1", 8, 20)...)
		check(20)
		// A tree of no leaves must have no row either.
		if _, err := s.WriteDB().ExecContext(ctx, `INSERT INTO merkle_hashes (account, idx, hash) VALUES ($1, 5, zeroblob(32))`, s.KeyOfAccount(t, "u2")); err != nil {
			t.Fatal(err)
		}
		u2 := appendBatchRaw(t, s, "u2", 0, 3)
		checkStoredHashes(t, s, "u2", refStore(t, u2), 3)
	})
}

func TestChainBlocksStored(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		appendRaw(t, s, "u1", 0, 9)
		_, key, _ := ed25519.GenerateKey(nil)
		signer, err := checkpoint.NewSigner(verify.Origin("u1"), key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.LastBlock(ctx, nil, "u1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("no blocks yet: %v", err)
		}
		var prev *checkpoint.Block
		for i, size := range []int64{3, 9} {
			root, err := merkle.Root(size, s.HashReader(ctx, nil, "u1"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := signer.Seal(prev, uint64(size), root)
			if err != nil {
				t.Fatal(err)
			}
			row := store.BlockRow{Block: b, CreatedAt: int64(i)}
			if err := s.InTx(ctx, func(tx *sql.Tx) error { return s.InsertBlock(ctx, tx, "u1", row) }); err != nil {
				t.Fatal(err)
			}
			// A second sealer of the same index fails instead of forking the chain.
			if err := s.InTx(ctx, func(tx *sql.Tx) error { return s.InsertBlock(ctx, tx, "u1", row) }); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("duplicate block index: %v", err)
			}
			prev = &row.Block
		}
		last, err := s.LastBlock(ctx, nil, "u1")
		if err != nil || last.Index != 1 || last.Size != 9 || *last.PrevHash != verify.BlockHash(mustNote(t, s, 0)) {
			t.Fatalf("last block %+v: %v", last, err)
		}
		for _, tc := range []struct {
			name    string
			get     func() (store.BlockRow, error)
			wantIdx int64
		}{
			{"by size", func() (store.BlockRow, error) { return s.BlockBySize(ctx, "u1", 3) }, 0},
			{"at or below", func() (store.BlockRow, error) { return s.BlockAtOrBelow(ctx, "u1", 8) }, 0},
			{"above", func() (store.BlockRow, error) { return s.BlockAbove(ctx, "u1", 3) }, 1},
		} {
			b, err := tc.get()
			if err != nil || b.Index != tc.wantIdx {
				t.Errorf("%s: %+v %v", tc.name, b, err)
			}
		}
		if _, err := s.BlockAbove(ctx, "u1", 9); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("above the last: %v", err)
		}
		var n int
		if err := s.BlocksFrom(ctx, "u1", 1, func(b *store.BlockRow) error { n++; return nil }); err != nil || n != 1 {
			t.Errorf("BlocksFrom(1): %d %v", n, err)
		}
	})
}

func mustNote(t *testing.T, s *store.Store, index int64) []byte {
	t.Helper()
	bs, err := s.Blocks(context.Background(), "u1", index, 1)
	if err != nil || len(bs) != 1 {
		t.Fatalf("block %d: %v", index, err)
	}
	return bs[0].Note
}

// BenchmarkInsertEvent measures the append path's store work (event row, its
// Merkle rows, the head) with 256 appends per transaction, as group commit
// does, so the figure is not just fsync.
func BenchmarkInsertEvent(b *testing.B) {
	for _, backend := range []storetest.Backend{storetest.SQLite, storetest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			s := storetest.Open(b, storetest.DSN(b, backend))
			ctx := context.Background()
			var i int64
			for b.Loop() {
				err := s.InTx(ctx, func(tx *sql.Tx) error {
					head, err := s.LockHead(ctx, tx, "u")
					if err != nil {
						return err
					}
					for range 256 {
						sum := sha256.Sum256([]byte(fmt.Sprint(i)))
						e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: "u", Sequence: i, EventID: fmt.Sprintf("evt-%d", i),
							EventType: "t", PayloadHash: verify.HashPrefix + hex.EncodeToString(sum[:]), TS: "2026-01-01T00:00:00Z",
							Surface: "rest"}}, LeafIndex: head.EventCount}
						if err := insertEvent(ctx, s, tx, &e); err != nil {
							return err
						}
						head.EventCount++
						i++
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i), "ns/event")
		})
	}
}

// BenchmarkInsertEventCharged measures a client append's store work as the
// service does it (LockHead, LeafHashes, InsertEventCharged: head, quota,
// row and Merkle rows), 256 appends per transaction as group commit does.
func BenchmarkInsertEventCharged(b *testing.B) {
	for _, backend := range []storetest.Backend{storetest.SQLite, storetest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			s := storetest.Open(b, storetest.DSN(b, backend))
			ctx := context.Background()
			var seq int64
			for b.Loop() {
				err := s.InTx(ctx, func(tx *sql.Tx) error {
					for range 256 {
						head, err := s.LockHead(ctx, tx, "u")
						if err != nil {
							return err
						}
						e := rawEvent("u", seq, head.EventCount)
						e.PrevHash = head.LastHash
						hs, err := s.LeafHashes(ctx, tx, &e)
						if err != nil {
							return err
						}
						out, err := s.AppendEvent(ctx, tx, store.Append{Event: &e, Hashes: hs, Expect: head,
							Quota: &store.Quota{Day: "2026-01-01", Limit: 1 << 40}})
						if err != nil || !out.Stored() {
							return fmt.Errorf("append %d: %+v %v", seq, out, err)
						}
						seq++
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(seq), "ns/event")
		})
	}
}

// BenchmarkInsertEvents measures batch ingest's store work per event: one
// InsertEvents call of 500 events per transaction (rows, Merkle rows, head),
// round robin over 100 accounts, with events like the bench's (a tool call
// with a decision, a ~90-byte raw, a client ts; one creation time per batch,
// as the service sets it per request).
func BenchmarkInsertEvents(b *testing.B) {
	for _, backend := range []storetest.Backend{storetest.SQLite, storetest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			benchInsertEvents(b, backend, json.RawMessage(`{"tool_input":{"cmd_sha256":"`+strings.Repeat("ab", 32)+`"}}`))
		})
	}
}

// benchInsertEvents is BenchmarkInsertEvents on backend with raw on every row.
func benchInsertEvents(b *testing.B, backend storetest.Backend, raw json.RawMessage) {
	s := storetest.Open(b, storetest.DSN(b, backend))
	ctx := context.Background()
	const accounts, batch = 100, 500
	tool, keyID := "bash", "0194d5a0-0000-7000-8000-000000000001"
	decisions := []string{"allow", "deny", "ask"}
	var events int64
	for i := 0; b.Loop(); i++ {
		user := fmt.Sprintf("bench-%03d", i%accounts)
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			head, err := s.LockHead(ctx, tx, user)
			if err != nil {
				return err
			}
			evs := make([]store.Event, batch)
			for j := range evs {
				n := head.EventCount + int64(j)
				sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", user, n)))
				ts := int64(1_790_000_000_000_000) + n
				evs[j] = store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: n, EventID: fmt.Sprintf("evt-%s-%d", user, n),
					EventType: "tool_call", PayloadHash: verify.HashPrefix + hex.EncodeToString(sum[:]), Decision: &decisions[n%3],
					Tool: &tool, TS: "2026-11-26T06:00:00.000000Z", Surface: "rest", APIKeyID: &keyID, MachineSequence: n},
					Raw: raw}, LeafIndex: n, TSMicros: &ts, CreatedAt: 1_790_000_000_000_000 + int64(i)}
			}
			return insertRun(ctx, s, tx, evs)
		})
		if err != nil {
			b.Fatal(err)
		}
		events += batch
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}
