package store_test

import (
	"testing"

	"github.com/auditchain/auditchain/internal/store"
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
