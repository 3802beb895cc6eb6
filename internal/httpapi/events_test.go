package httpapi

import (
	"bytes"
	"encoding/json"
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

// The hand-written encoding of an append's answer is encoding/json's, byte
// for byte: strings needing escapes, absent pointers, raw absent, compact,
// spaced or carrying HTML and U+2028, with and without a dedup advisory.
func TestAppendAppendResponse(t *testing.T) {
	str := func(s string) *string { return &s }
	tricky := []string{"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnewline\n\x00\x1f",
		"é ü 日本", "line\u2028sep\u2029", "bad utf-8 \xff\xfe", "emoji 🙂"}
	raws := []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`{"a":[1,2.5e3,null,true],"b":"<&>\u2028"}`),
		json.RawMessage(" {\n\t\"spaced\" : [ 1 , \"a b\" ] }\r\n"), json.RawMessage(`{"s":"\u003c\ud83d\ude00"}`)}
	var responses []api.AppendResponse
	for i, s := range tricky {
		raw := raws[i%len(raws)]
		ev := api.StoredEvent{Event: api.Event{UserID: "u-" + s, Sequence: int64(i) * 1e12, EventID: s, EventType: s,
			PrevHash: str(s), PayloadHash: "sha256:" + s, Decision: str(s), Tool: str(s), MachineID: str(s), ParentID: str(s),
			TS: s, APIKeyID: str(s), Surface: s, MachineSequence: -int64(i)}, Raw: raw, Signature: str(s), SignatureKey: str(s)}
		epoch := api.EpochStamp{Anchor: s, DateUTC: s, EpochIndex: int64(i) - 3, Quadrant: s, Scheme: s,
			Phase: api.EpochPhase{AccumulatedPhase: s, CycleNumber: 1 << 40, EpochIndex: -int64(i), Scheme: s}}
		quota := api.Quota{Limit: int64(i), Remaining: -1, UsedToday: 1 << 50}
		responses = append(responses,
			api.AppendResponse{Status: s, Event: ev, Epoch: epoch, Quota: quota},
			api.AppendResponse{Status: "appended", Event: api.StoredEvent{Event: api.Event{UserID: "u", EventID: "e"}, Raw: raw},
				Epoch: epoch, Quota: quota, DedupAdvisory: &api.DedupAdvisory{SemanticKey: s, DedupStatus: s, DedupAction: s,
					CachedFromEventID: s, CachedFromSequence: int64(i), CachedAt: s, WindowEvents: -i, WindowSeconds: 1 << 30}})
	}
	for i, r := range responses {
		var buf bytes.Buffer
		if err := encodeJSON(&buf, r); err != nil {
			t.Fatal(err)
		}
		got, err := appendAppendResponse(nil, &r)
		if err != nil || string(got) != buf.String() {
			t.Errorf("response %d: appendAppendResponse (%v):\n got %s\nwant %s", i, err, got, buf.Bytes())
		}
	}
}
