package bench

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// directChunk is how many events one direct-prefill transaction writes.
const directChunk = 5000

// directPrefill writes n linked events on each account straight into the store,
// before the server starts (--direct-prefill): the rows a batch append would
// store — same canonical payload hash, machine sequence and semantic key — and
// through the store's own AppendEvent, so each account's Merkle tree and chain
// head are the ones the append path builds. What it skips is HTTP, JSON
// decoding and the group committer, which is what makes 1M–5M events take
// minutes instead of tens of minutes. heal-scan on a prefilled account
// answers clean (TestDirectPrefillIsAValidChain).
func directPrefill(ctx context.Context, db string, accts []account, n int, progress func(done, total int, rate float64)) error {
	if n <= 0 || len(accts) == 0 {
		return nil
	}
	st, err := store.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	dedup := domain.DefaultDedupPolicy()
	if st.Dialect == store.SQLite {
		// The single write connection: a 1 GiB page cache keeps the random
		// payload_hash and event_id index inserts of a multi-million chain off disk.
		if _, err := st.WriteDB().ExecContext(ctx, `PRAGMA cache_size = -1048576`); err != nil {
			return err
		}
	}
	pool := newRawPool(nil)
	ts := batchTS()
	tsParsed, err := domain.ParseTimestamp(ts)
	if err != nil {
		return err
	}
	tsMicros := tsParsed.UnixMicro()
	total := n * len(accts)
	done := 0
	start, last := time.Now(), time.Now()
	for _, a := range accts {
		var (
			hash  []byte // this account's tip payload hash; nil: empty chain
			spec  eventSpec
			canon []byte
			id    []byte
			hbuf  []byte
		)
		for from := 0; from < n; from += directChunk {
			to := min(from+directChunk, n)
			err := st.InTx(ctx, func(tx *sql.Tx) error {
				head, err := st.LockHead(ctx, tx, a.userID)
				if err != nil {
					return err
				}
				if head.EventCount != int64(from) {
					return fmt.Errorf("account %s has %d events, expected %d: direct prefill needs fresh accounts", a.userID, head.EventCount, from)
				}
				for seq := int64(from); seq < int64(to); seq++ {
					r := int(seq % rawPoolSize)
					tool, decision := benchTools[seq%3], benchDecisions[(seq/3)%3]
					id = appendEventID(id[:0], "direct", 0, seq)
					spec = eventSpec{id: id, seq: seq, prevHash: hash, raw: pool.raws[r], tool: tool, decision: decision, ts: ts}
					canon = appendCanonical(canon[:0], &spec)
					hbuf = appendHashOf(hbuf[:0], canon)
					e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: a.userID, Sequence: seq,
						EventID: string(id), EventType: domain.EventTypeToolCall, PayloadHash: string(hbuf), Decision: &decision,
						Tool: &tool, TS: ts, Surface: "rest"}, Raw: pool.raws[r]}, LeafIndex: seq, TSMicros: &tsMicros,
						CreatedAt: time.Now().UnixMicro()}
					if hash != nil {
						prev := string(hash)
						e.PrevHash = &prev
					}
					if a.keyID != "" {
						e.APIKeyID = &a.keyID
					}
					if key, ok := dedup.StoredKey(e.EventType, e.Tool, e.Raw); ok {
						e.SemanticKey = &key // as the service stores it (App.prepareEvent)
					}
					out, err := st.AppendEvent(ctx, tx, store.Append{Event: &e, Expect: head})
					if err != nil || !out.Stored() {
						return fmt.Errorf("event %d: %v %w", seq, out, err)
					}
					head = store.Head{LastSequence: e.Sequence, LastHash: &e.PayloadHash, LastEventID: &e.EventID, EventCount: head.EventCount + 1}
					hash = append(hash[:0], hbuf...)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("direct prefill: %w", err)
			}
			done += to - from
			if progress != nil && (time.Since(last) > 5*time.Second || done == total) {
				last = time.Now()
				progress(done, total, float64(done)/time.Since(start).Seconds())
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}
