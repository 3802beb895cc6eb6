package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
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
		b.Run(fmt.Sprint(size), func(b *testing.B) { benchInsertEvents(b, storetest.SQLite, rawOfSize(size)) })
	}
}

// BenchmarkIndexBehindRaw is BenchmarkIndexBehind by raw size (the single
// appends made for each tail are counted in the process's CPU time too).
func BenchmarkIndexBehindRaw(b *testing.B) {
	for _, size := range []int{95, 2000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) { benchIndexBehind(b, rawOfSize(size)) })
	}
}
