package app

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// Only calls of cacheable tools carry a dedup key: the gate looks no other
// tool up by it, and a key would only cost an index entry.
func TestOnlyCacheableToolCallsCarryADedupKey(t *testing.T) {
	a := &App{dedup: domain.DefaultDedupPolicy(), now: time.Now}
	str := func(s string) *string { return &s }
	seq := int64(0)
	for _, c := range []struct {
		eventType, tool string
		wantKey         bool
	}{
		{"tool_call", "read_file", true},
		{"tool_call", "grep", true},
		{"tool_call", "bash", false},
		{"tool_call", "write_file", false},
		{"note", "read_file", false},
	} {
		in := api.EventInput{EventID: str("e-" + c.tool), EventType: str(c.eventType), Sequence: &seq,
			Tool: str(c.tool), Raw: json.RawMessage(`{"tool_input":{"path":"/etc/hosts"}}`)}
		e, err := a.prepareEvent(Principal{UserID: "u"}, &in, "rest", a.now())
		if err != nil {
			t.Fatal(err)
		}
		if got := e.SemanticKey != nil; got != c.wantKey {
			t.Errorf("%s of %s: semantic key set %v, want %v", c.eventType, c.tool, got, c.wantKey)
		}
	}
}
