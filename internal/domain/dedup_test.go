package domain

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/google/go-cmp/cmp"
)

func TestSemanticKeyGolden(t *testing.T) {
	// Expected values are sha256sum of the canonical bytes written out by hand,
	// e.g. printf '%s' '{"tool":"read_file","tool_input":{"path":"/etc/hosts"}}' | sha256sum
	tests := []struct {
		name, tool, input, want string
	}{
		{"object", "read_file", `{"path":"/etc/hosts"}`,
			"sha256:782c29ef76618db09fe58311318ba9dbad46eb5ebd8f06e50c418a15319138e0"},
		{"null input", "web_search", `null`,
			"sha256:d79be18981e73558b2b81f529cc0818ef53b92aeb787aad5d259b571e7e65743"},
		{"absent input is null", "web_search", ``,
			"sha256:d79be18981e73558b2b81f529cc0818ef53b92aeb787aad5d259b571e7e65743"},
		// Canonical: {"tool":"grep","tool_input":{"a":[1,2.5,"é"],"b":true,"z":{"x":1,"y":null}}}
		{"nested, reordered, spaced, escaped", "grep", "{ \"z\": {\"y\": null, \"x\": 1.0},\n \"b\": true, \"a\": [1, 2.50, \"\\u00e9\"] }",
			"sha256:c6ff6f24d55df23c561be4c6635f6de2f7606489ce16b81a045b4d950b69eee5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SemanticKey(tt.tool, json.RawMessage(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("SemanticKey = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestSemanticKeyStability(t *testing.T) {
	same := []string{
		`{"path":"a.go","limit":10,"offset":0}`,
		`{"offset":0,"path":"a.go","limit":10}`,
		"{\n  \"limit\": 10.0,\n  \"offset\": 0,\n  \"path\": \"a.go\"\n}",
		`{"limit":1e1,"offset":-0,"path":"\u0061.go"}`,
	}
	first, err := SemanticKey("read_file", json.RawMessage(same[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range same[1:] {
		if got, err := SemanticKey("read_file", json.RawMessage(in)); err != nil || got != first {
			t.Errorf("SemanticKey(%s) = %s, %v; want %s", in, got, err, first)
		}
	}
	different := map[string]struct {
		tool, input string
	}{
		"other tool":  {"grep", same[0]},
		"other value": {"read_file", `{"path":"b.go","limit":10,"offset":0}`},
		"extra field": {"read_file", `{"path":"a.go","limit":10,"offset":0,"x":null}`},
		"null input":  {"read_file", `null`},
	}
	for name, d := range different {
		if got, _ := SemanticKey(d.tool, json.RawMessage(d.input)); got == first {
			t.Errorf("%s: same key as the original", name)
		}
	}
	if _, err := SemanticKey("read_file", json.RawMessage(`{"path":`)); err == nil {
		t.Error("malformed tool_input was keyed")
	}
}

func TestEventSemanticKey(t *testing.T) {
	readFile := "read_file"
	empty := ""
	want, _ := SemanticKey("read_file", json.RawMessage(`{"path":"/etc/hosts"}`))
	wantNull, _ := SemanticKey("read_file", json.RawMessage(`null`))
	tests := []struct {
		name      string
		eventType string
		tool      *string
		raw       string
		wantKey   string
		wantOK    bool
	}{
		{"tool call", "tool_call", &readFile, `{"tool_input":{"path":"/etc/hosts"},"intent":"cached_ok"}`, want, true},
		{"input order irrelevant", "tool_call", &readFile, `{"tool_input":{ "path" : "/etc/hosts" }}`, want, true},
		{"explicit null input", "tool_call", &readFile, `{"tool_input":null}`, wantNull, true},
		{"no tool_input member", "tool_call", &readFile, `{"path":"/etc/hosts"}`, "", false},
		{"raw null", "tool_call", &readFile, `null`, "", false},
		{"raw absent", "tool_call", &readFile, ``, "", false},
		{"raw not an object", "tool_call", &readFile, `["tool_input"]`, "", false},
		{"no tool", "tool_call", nil, `{"tool_input":{}}`, "", false},
		{"empty tool", "tool_call", &empty, `{"tool_input":{}}`, "", false},
		{"not a tool call", "tool_result", &readFile, `{"tool_input":{"path":"/etc/hosts"}}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, ok := EventSemanticKey(tt.eventType, tt.tool, json.RawMessage(tt.raw))
			if key != tt.wantKey || ok != tt.wantOK {
				t.Errorf("EventSemanticKey = %q, %v; want %q, %v", key, ok, tt.wantKey, tt.wantOK)
			}
		})
	}
}

func TestEventIntent(t *testing.T) {
	for raw, want := range map[string]Intent{
		`{"intent":"fresh"}`:     IntentFresh,
		`{"intent":"cached_ok"}`: IntentCachedOK,
		`{"intent":null}`:        IntentNone,
		`{"intent":"other"}`:     IntentNone,
		`{"intent":3}`:           IntentNone,
		`{}`:                     IntentNone,
		`null`:                   IntentNone,
		``:                       IntentNone,
	} {
		if got := EventIntent(json.RawMessage(raw)); got != want {
			t.Errorf("EventIntent(%s) = %q, want %q", raw, got, want)
		}
	}
}

func TestIntentValid(t *testing.T) {
	for _, i := range []Intent{IntentNone, IntentFresh, IntentCachedOK} {
		if !i.Valid() {
			t.Errorf("%q not valid", i)
		}
	}
	if Intent("FRESH").Valid() || Intent("cached").Valid() {
		t.Error("an unknown intent is valid")
	}
}

func TestDefaultDedupPolicy(t *testing.T) {
	p := DefaultDedupPolicy()
	if p.WindowEvents != 50 || p.WindowSeconds != 300 {
		t.Errorf("window = %d events, %d s; want 50, 300", p.WindowEvents, p.WindowSeconds)
	}
	for _, tool := range []string{"read_file", "web_fetch", "web_search", "grep", "glob", "list_dir"} {
		if !p.Cacheable(tool) {
			t.Errorf("%s not cacheable", tool)
		}
	}
	for _, tool := range []string{"write_file", "bash", "edit", "Read_File", ""} {
		if p.Cacheable(tool) {
			t.Errorf("%s cacheable", tool)
		}
	}
	p.CacheableTools[0] = "bash" // a copy: the default list is not shared
	if DefaultDedupPolicy().Cacheable("bash") {
		t.Error("changing one policy changed the default")
	}
}

func TestDecideDedup(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := DefaultDedupPolicy() // 50 events, 300 s
	const key = "sha256:aaaa"
	const tip = int64(100)
	call := func(id string, seq int64, age time.Duration) PriorCall {
		return PriorCall{EventID: id, Sequence: seq, TS: now.Add(-age), SemanticKey: key}
	}
	hit := func(id string, seq int64, at string) DedupDecision {
		return DedupDecision{DedupStatus: DedupHit, WouldHit: true, DedupAction: DedupReuse, SemanticKey: key,
			CachedAt: &at, CachedFromEventID: &id, CachedFromSequence: &seq, WindowEvents: 50, WindowSeconds: 300}
	}
	other := func(status string) DedupDecision {
		return DedupDecision{DedupStatus: status, DedupAction: DedupExecute, SemanticKey: key, WindowEvents: 50, WindowSeconds: 300}
	}
	recent := call("evt-recent", 99, time.Minute)
	tests := []struct {
		name       string
		tool       string
		intent     Intent
		candidates []PriorCall
		tip        int64
		want       DedupDecision
	}{
		{"hit", "read_file", IntentNone, []PriorCall{recent}, tip, hit("evt-recent", 99, "2026-03-01T11:59:00+00:00")},
		{"cached_ok is a normal lookup", "read_file", IntentCachedOK, []PriorCall{recent}, tip, hit("evt-recent", 99, "2026-03-01T11:59:00+00:00")},
		{"fresh bypasses a would-be hit", "read_file", IntentFresh, []PriorCall{recent}, tip, other(DedupBypass)},
		{"fresh bypasses an uncacheable tool too", "bash", IntentFresh, []PriorCall{recent}, tip, other(DedupBypass)},
		{"uncacheable tool", "bash", IntentNone, []PriorCall{recent}, tip, other(DedupUncacheable)},
		{"uncacheable with cached_ok", "write_file", IntentCachedOK, nil, tip, other(DedupUncacheable)},
		{"miss: no history", "read_file", IntentNone, nil, tip, other(DedupMiss)},
		{"miss: empty chain", "read_file", IntentNone, nil, -1, other(DedupMiss)},
		{"miss: other key", "read_file", IntentNone, []PriorCall{{EventID: "x", Sequence: 99, TS: now, SemanticKey: "sha256:bbbb"}}, tip, other(DedupMiss)},
		{"newest of several wins", "read_file", IntentNone,
			[]PriorCall{call("evt-a", 60, 4*time.Minute), call("evt-c", 98, 2*time.Minute), call("evt-b", 80, 3*time.Minute)}, tip,
			hit("evt-c", 98, "2026-03-01T11:58:00+00:00")},
		{"newest in window wins over a newer-ts one outside", "read_file", IntentNone,
			[]PriorCall{call("evt-old-seq", 50, 0), call("evt-in", 70, time.Minute)}, tip,
			hit("evt-in", 70, "2026-03-01T11:59:00+00:00")},

		// Event window: (tip − 50, tip].
		{"exactly WindowEvents back is out", "read_file", IntentNone, []PriorCall{call("e", tip-50, 0)}, tip, other(DedupMiss)},
		{"one less than WindowEvents back is in", "read_file", IntentNone, []PriorCall{call("e", tip-49, 0)}, tip, hit("e", 51, "2026-03-01T12:00:00+00:00")},
		{"the tip itself is in", "read_file", IntentNone, []PriorCall{call("e", tip, 0)}, tip, hit("e", 100, "2026-03-01T12:00:00+00:00")},
		{"beyond the tip is ignored", "read_file", IntentNone, []PriorCall{call("e", tip+1, 0)}, tip, other(DedupMiss)},
		{"genesis event in a short chain", "read_file", IntentNone, []PriorCall{call("e", 0, 0)}, 3, hit("e", 0, "2026-03-01T12:00:00+00:00")},

		// Time window: ts in [now − 300 s, now].
		{"exactly WindowSeconds old is in", "read_file", IntentNone, []PriorCall{call("e", 99, 300*time.Second)}, tip, hit("e", 99, "2026-03-01T11:55:00+00:00")},
		{"a nanosecond older is out", "read_file", IntentNone, []PriorCall{call("e", 99, 300*time.Second+1)}, tip, other(DedupMiss)},
		{"future ts counts as now", "read_file", IntentNone, []PriorCall{call("e", 99, -time.Hour)}, tip, hit("e", 99, "2026-03-01T13:00:00+00:00")},
		{"no ts never hits", "read_file", IntentNone, []PriorCall{{EventID: "e", Sequence: 99, SemanticKey: key}}, tip, other(DedupMiss)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideDedup(p, tt.tool, key, tt.intent, tt.candidates, tt.tip, now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DecideDedup (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideDedupTimestampInUTC(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 500, time.UTC)
	ts := now.In(time.FixedZone("CET", 3600)).Add(-time.Second)
	d := DecideDedup(DefaultDedupPolicy(), "grep", "k", IntentNone, []PriorCall{{EventID: "e", Sequence: 1, TS: ts, SemanticKey: "k"}}, 1, now)
	if d.CachedAt == nil || *d.CachedAt != "2026-03-01T11:59:59.0000005+00:00" {
		t.Fatalf("cached_at = %v", d.CachedAt)
	}
}

func TestDedupDecisionJSON(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := DefaultDedupPolicy()
	miss := DecideDedup(p, "grep", "sha256:ab", IntentNone, nil, 5, now)
	got, _ := json.Marshal(miss)
	want := `{"dedup_status":"miss","would_hit":false,"dedup_action":"execute","semantic_key":"sha256:ab","cached_at":null,"cached_from_event_id":null,"cached_from_sequence":null,"window_events":50,"window_seconds":300}`
	if string(got) != want {
		t.Errorf("miss JSON:\n got %s\nwant %s", got, want)
	}
	hit := DecideDedup(p, "grep", "sha256:ab", IntentNone, []PriorCall{{EventID: "evt-1", Sequence: 4, TS: now, SemanticKey: "sha256:ab"}}, 5, now)
	got, _ = json.Marshal(hit)
	want = `{"dedup_status":"hit","would_hit":true,"dedup_action":"reuse","semantic_key":"sha256:ab","cached_at":"2026-03-01T12:00:00+00:00","cached_from_event_id":"evt-1","cached_from_sequence":4,"window_events":50,"window_seconds":300}`
	if string(got) != want {
		t.Errorf("hit JSON:\n got %s\nwant %s", got, want)
	}
}

func TestAdvisory(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := DefaultDedupPolicy()
	for _, status := range []DedupDecision{
		DecideDedup(p, "grep", "k", IntentNone, nil, 5, now),
		DecideDedup(p, "grep", "k", IntentFresh, nil, 5, now),
		DecideDedup(p, "bash", "k", IntentNone, nil, 5, now),
	} {
		if _, ok := status.Advisory(); ok {
			t.Errorf("%s gave an advisory", status.DedupStatus)
		}
	}
	hit := DecideDedup(p, "grep", "k", IntentNone, []PriorCall{{EventID: "evt-1", Sequence: 4, TS: now, SemanticKey: "k"}}, 5, now)
	a, ok := hit.Advisory()
	want := api.DedupAdvisory{SemanticKey: "k", DedupStatus: "hit", DedupAction: "reuse", CachedFromEventID: "evt-1",
		CachedFromSequence: 4, CachedAt: "2026-03-01T12:00:00+00:00", WindowEvents: 50, WindowSeconds: 300}
	if diff := cmp.Diff(want, a); !ok || diff != "" {
		t.Errorf("Advisory ok=%v (-want +got):\n%s", ok, diff)
	}
}

var semanticKeyCases = []struct{ tool, raw string }{
	{"bash", `{"tool_input":{"cmd":"ls -la","cwd":"/tmp"}}`},
	{"bash", `{"intent":"fresh","tool_input":{"cmd":"ls"},"z":1}`},
	{"bash", `{"a":[1,2,{"b":null}],"tool_input":null}`},
	{"bash", `{"tool_input":"x"}`},
	{"bash", `{"tool_input":[1,"two",{"three":3}],"zz":{"tool_input":1}}`},
	{"bash", `{"other":{"tool_input":{"nested":"only"}}}`}, // no top-level member
	{"bash", `{}`},
	{"bash", `[1,2]`},
	{"bash", `"tool_input"`},
	{"fs.<write>&", `{"tool_input":{"path":"a<b>&c"}}`},
	{"outil é\u2028", `{"tool_input":{"é":"\u00e9\u2028"}}`},
	{"bash", `{"tool_input":{"n":1.5e3}}`},                 // not certainly canonical: parsed
	{"bash", `{"tool_input":{"b":1,"a":2}}`},               // unsorted: parsed
	{"bash", `{"tool_input": {"cmd":"ls"}}`},               // whitespace: parsed
	{"bash", `{"tool_input":{"s":"\u0041\n"}}`},            // escapes RFC 8785 writes differently
	{"bash", `{"tool_input":{"cmd":"ls"},"tool_input":2}`}, // duplicate
	{"bad\xff", `{"tool_input":1}`},
}

func TestEventSemanticKeyFastPathMatchesParsing(t *testing.T) {
	fast := 0
	for _, c := range semanticKeyCases {
		if checkSemanticKeyPaths(t, c.tool, c.raw) {
			fast++
		}
	}
	if fast < 8 {
		t.Fatalf("the fast path answered %d of the canonical cases; want at least 8", fast)
	}
}

// checkSemanticKeyPaths compares both ways of computing the key and reports
// whether the fast one answered.
func checkSemanticKeyPaths(t *testing.T, tool, raw string) bool {
	t.Helper()
	slowKey, slowOK := eventSemanticKeySlow(tool, json.RawMessage(raw))
	key, ok, known := semanticKeyOfCanonical(tool, json.RawMessage(raw))
	if !known {
		return false
	}
	if key != slowKey || ok != slowOK {
		t.Fatalf("tool %q raw %s: fast (%q, %v), parsed (%q, %v)", tool, raw, key, ok, slowKey, slowOK)
	}
	return true
}

func TestStoredKeyOnlyForCallsOfCacheableTools(t *testing.T) {
	p := DefaultDedupPolicy()
	raw := json.RawMessage(`{"tool_input":{"path":"/etc/hosts"}}`)
	str := func(s string) *string { return &s }
	for _, c := range []struct {
		eventType string
		tool      *string
		want      bool
	}{
		{"tool_call", str("read_file"), true},
		{"tool_call", str("grep"), true},
		{"tool_call", str("bash"), false},
		{"tool_call", nil, false},
		{"note", str("read_file"), false},
	} {
		key, ok := p.StoredKey(c.eventType, c.tool, raw)
		if ok != c.want {
			t.Errorf("%s of %v: key %q, ok %v; want ok %v", c.eventType, c.tool, key, ok, c.want)
		}
		if ok {
			if want, _ := EventSemanticKey(c.eventType, c.tool, raw); key != want {
				t.Errorf("%s: stored key %q, want the event's semantic key %q", *c.tool, key, want)
			}
		}
	}
}
