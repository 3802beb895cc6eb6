package httpapi

import (
	"bytes"
	"testing"

	"github.com/auditchain/auditchain/pkg/api"
)

// The hand-written search encoder must produce exactly what encoding/json
// produced before it, for every string a client can store.
func TestAppendSearchResponse(t *testing.T) {
	str := func(s string) *string { return &s }
	seq := func(n int64) *int64 { return &n }
	tricky := []string{"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnewline\n\x00\x1f",
		"é ü 日本", "line\u2028sep\u2029", "bad utf-8 \xff\xfe", "emoji 🙂"}
	var evs []api.Event
	for i, s := range tricky {
		evs = append(evs, api.Event{UserID: "u-" + s, Sequence: int64(i) * 1e12, EventID: s, EventType: s,
			PayloadHash: "sha256:" + s, TS: s, Surface: s, MachineSequence: -int64(i)})
		evs = append(evs, api.Event{UserID: "u", Sequence: int64(i), EventID: "e", EventType: "tool_call", PrevHash: str(s),
			PayloadHash: "h", Decision: str(s), Tool: str(s), MachineID: str(s), ParentID: str(s), TS: "t", APIKeyID: str(s),
			Surface: "api"})
	}
	tests := []struct {
		name   string
		evs    []api.Event
		next   *int64
		userID string
	}{
		{"empty", nil, nil, "u"},
		{"empty slice", []api.Event{}, nil, "u"},
		{"tricky strings", evs, seq(7), "user <&> \u2028 \xff"},
		{"negative cursor", evs[:1], seq(-1), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results := make([]api.Event, len(tt.evs)) // [] when empty, as the encoder writes it
			copy(results, tt.evs)
			var buf bytes.Buffer
			if err := encodeJSON(&buf, api.SearchResponse{Count: len(results), NextCursor: tt.next, Results: results, UserID: tt.userID}); err != nil {
				t.Fatal(err)
			}
			want := buf.Bytes()
			if got := appendSearchResponse(nil, tt.evs, tt.next, tt.userID); string(got) != string(want) {
				t.Errorf("appendSearchResponse:\n got %s\nwant %s", got, want)
			}
		})
	}
}
