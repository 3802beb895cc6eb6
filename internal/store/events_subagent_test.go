package store_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// RawSubagent reads raw's top-level subagent member however raw spells it,
// as the sub-agent filter compares it (migration 036).
func TestRawSubagent(t *testing.T) {
	none := "(none)"
	for _, c := range []struct{ raw, want string }{
		{`{"subagent":"w1","tool_input":{}}`, "w1"},
		{`{"tool_input":{},"subagent":"w1"}`, "w1"},
		{`{"sub\u0061gent":"w1"}`, "w1"},               // the name spelled with an escape
		{`{"subagent":"\u0077\u0031"}`, "w1"},          // the value spelled with escapes
		{`{"subagent":"a\"b\\c\/d\n"}`, "a\"b\\c/d\n"}, // every short escape
		{`{"subagent":"\ud83d\ude00 caf\u00e9"}`, "😀 café"},
		{`{"subagent":"w1","subagent":"w2"}`, "w1"}, // the first, as SQLite's json_extract
		{`{"subagent":{"a":"\u0041"}}`, `{"a":"\u0041"}`},
		{`{"subagent":[1,"x"]}`, `[1,"x"]`},
		{`{"subagent":""}`, ""},
		{`{"x":{"subagent":"w1"}}`, none}, // nested: not raw's member
		{`{"cmd":"grep \"subagent\" log"}`, none},
		{`{"note":"caf\u00e9","tool_input":{"cmd":"a\\b"}}`, none},
		{`{"subagent":null}`, none},
		{`{"subagent":5}`, none},
		{`{"subagent":true}`, none},
		{`{"subagent":"w\u0000"}`, none}, // PostgreSQL's text cannot hold it
		{`{"subagent":"\ud800"}`, none},  // an unpaired surrogate
		{`{"subagent":"\udc00\ud800"}`, none},
		{`[1,2,"subagent"]`, none},
		{`"subagent"`, none},
		{``, none},
	} {
		got := none
		if p := store.RawSubagent([]byte(c.raw)); p != nil {
			got = *p
		}
		if got != c.want {
			t.Errorf("RawSubagent(%s) = %q, want %q", c.raw, got, c.want)
		}
	}
}

// rawOfSize is a tool call's raw of about n bytes, naming no sub-agent: the
// bench's (95 bytes) or a file write's content.
func rawOfSize(n int) json.RawMessage {
	if n <= 100 {
		return json.RawMessage(`{"tool_input":{"cmd_sha256":"` + strings.Repeat("ab", 32) + `"}}`)
	}
	return json.RawMessage(`{"tool_input":{"content":"` + strings.Repeat("x", n) + `","file_path":"/a/b.go"}}`)
}

// BenchmarkInsertEventsRaw is BenchmarkInsertEvents (SQLite) by raw size: what
// the single writer pays per byte of raw, as an index over raw would
// (docs/performance.md "Console at size": measured by the process's CPU time
// over a fixed number of iterations, -test.benchtime 60x).
func BenchmarkInsertEventsRaw(b *testing.B) {
	for _, size := range []int{95, 2000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			s := storetest.Open(b, storetest.DSN(b, storetest.SQLite))
			ctx := context.Background()
			const accounts, batch = 100, 500
			raw := rawOfSize(size)
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
		})
	}
}

// BenchmarkIndexBehindRaw is BenchmarkIndexBehind by raw size (the single
// appends made for each tail are counted in the process's CPU time too).
func BenchmarkIndexBehindRaw(b *testing.B) {
	for _, size := range []int{95, 2000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			s := storetest.Open(b, storetest.DSN(b, storetest.SQLite))
			ctx := context.Background()
			raw := rawOfSize(size)
			const accounts = 100
			seq := make([]int64, accounts)
			var rows int64
			for b.Loop() {
				b.StopTimer()
				err := s.InTx(ctx, func(tx *sql.Tx) error {
					for i := range store.IndexBehindRows {
						a := i % accounts
						user := fmt.Sprintf("u-%03d", a)
						head, err := s.LockHead(ctx, tx, user)
						if err != nil {
							return err
						}
						dec, tool := "allow", "bash"
						e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: seq[a],
							EventID: fmt.Sprintf("evt-%d-%d", a, seq[a]), EventType: "tool_call",
							PayloadHash: fmt.Sprintf("sha256:%064x", rows+int64(i)), TS: "2026-11-28T00:00:00Z", Surface: "rest",
							Decision: &dec, Tool: &tool}, Raw: raw}, LeafIndex: head.EventCount, TSMicros: &rows}
						if err := insertEvent(ctx, s, tx, &e); err != nil {
							return err
						}
						seq[a]++
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for s.EventsBehind() > 0 {
					n, err := s.IndexBehind(ctx)
					if err != nil {
						b.Fatal(err)
					}
					rows += n
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
		})
	}
}
