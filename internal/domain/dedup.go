package domain

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/auditchain/auditchain/pkg/api"
	"slices"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/pkg/verify"
)

// The dedup gate (SPEC.md "POST /v1/policy/test", and dedup_advisory on
// POST /v1/events). One pure decision serves both, so the probe predicts
// exactly what the append reports. Decisions: docs/decisions/dedup.md.

// Dedup statuses (SPEC.md "POST /v1/policy/test").
const (
	DedupHit         = "hit"
	DedupMiss        = "miss"
	DedupBypass      = "bypass"
	DedupUncacheable = "uncacheable"
)

// Dedup actions: what the caller should do with the call.
const (
	DedupReuse   = "reuse"   // hit: reuse the cached result
	DedupExecute = "execute" // anything else: run the tool
)

// Intent is the caller's wish about cached results.
type Intent string

const (
	IntentNone     Intent = ""          // null or absent
	IntentFresh    Intent = "fresh"     // always run: bypass
	IntentCachedOK Intent = "cached_ok" // a cached result is welcome (same as none)
)

// Valid reports whether i is one of the values SPEC.md allows.
func (i Intent) Valid() bool {
	return i == IntentNone || i == IntentFresh || i == IntentCachedOK
}

// DefaultCacheableTools are read-only tools whose repeat within the window
// returns what the first call did: reading, fetching and searching. A tool
// that writes or executes is never cacheable.
var DefaultCacheableTools = []string{"read_file", "web_fetch", "web_search", "grep", "glob", "list_dir"}

// DedupPolicy is the gate's configuration.
type DedupPolicy struct {
	CacheableTools []string
	// WindowEvents: a prior call counts only among the last WindowEvents
	// events of the chain (sequence > tip − WindowEvents).
	WindowEvents int
	// WindowSeconds: a prior call counts only if at most this old.
	WindowSeconds int
}

// DefaultDedupPolicy is the policy the service runs with.
func DefaultDedupPolicy() DedupPolicy {
	return DedupPolicy{CacheableTools: slices.Clone(DefaultCacheableTools), WindowEvents: 50, WindowSeconds: 300}
}

// Cacheable reports whether the gate may ever answer hit for tool.
func (p DedupPolicy) Cacheable(tool string) bool { return slices.Contains(p.CacheableTools, tool) }

// SemanticKey is "sha256:" + hex SHA-256 of the RFC 8785 canonical JSON of
// {"tool": tool, "tool_input": toolInput}; an empty toolInput counts as null.
// Key order and whitespace inside toolInput do not change the key.
func SemanticKey(tool string, toolInput json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(toolInput)) == 0 {
		toolInput = json.RawMessage("null")
	}
	doc, err := json.Marshal(struct {
		Tool      string          `json:"tool"`
		ToolInput json.RawMessage `json:"tool_input"`
	}{tool, toolInput})
	if err != nil {
		return "", fmt.Errorf("semantic key: tool_input is not JSON: %w", err)
	}
	canon, err := jcs.Transform(doc)
	if err != nil {
		return "", fmt.Errorf("semantic key: %w", err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// EventTypeToolCall is the event type that records a tool call.
const EventTypeToolCall = "tool_call"

// EventSemanticKey is the key of a stored event as the gate sees it: an event
// of type tool_call, with a tool, whose raw object has a tool_input member
// (null included). Any other event is no tool call to the gate (ok false).
func EventSemanticKey(eventType string, tool *string, raw json.RawMessage) (key string, ok bool) {
	if eventType != EventTypeToolCall || tool == nil || *tool == "" {
		return "", false
	}
	if key, ok, known := semanticKeyOfCanonical(*tool, raw); known {
		return key, ok
	}
	return eventSemanticKeySlow(*tool, raw)
}

// StoredKey is the dedup key an appended event is stored with: its
// EventSemanticKey when it is a call of a tool the policy caches, else none.
// The gate looks only such calls up by key (DecideDedup checks the tool
// first), so a key on any other event would only cost an index entry
// (docs/decisions/dedup.md).
func (p DedupPolicy) StoredKey(eventType string, tool *string, raw json.RawMessage) (key string, ok bool) {
	if tool == nil || !p.Cacheable(*tool) {
		return "", false
	}
	return EventSemanticKey(eventType, tool, raw)
}

// semanticKeyOfCanonical is EventSemanticKey without parsing: when raw is in
// RFC 8785 form already (stored events and most clients' raw are), its
// tool_input member is canonical as it stands, and the canonical document
// {"tool":…,"tool_input":…} is built around it ("tool" sorts before
// "tool_input"). known is false when raw is not certainly canonical or the
// tool cannot be written as an RFC 8785 string; FuzzEventSemanticKey holds it
// equal to eventSemanticKeySlow.
func semanticKeyOfCanonical(tool string, raw json.RawMessage) (key string, ok, known bool) {
	input, present, known := verify.CanonicalMember(raw, "tool_input")
	if !known {
		return "", false, false
	}
	if !present {
		return "", false, true
	}
	doc := make([]byte, 0, 32+len(tool)+len(input))
	doc = append(doc, `{"tool":`...)
	doc, good := verify.AppendJCSString(doc, tool)
	if !good {
		return "", false, false
	}
	doc = append(doc, `,"tool_input":`...)
	doc = append(doc, input...)
	doc = append(doc, '}')
	sum := sha256.Sum256(doc)
	return "sha256:" + hex.EncodeToString(sum[:]), true, true
}

// eventSemanticKeySlow is EventSemanticKey by parsing raw, for any raw.
func eventSemanticKeySlow(tool string, raw json.RawMessage) (key string, ok bool) {
	// A map tells a member that is null from one that is absent.
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return "", false // not an object
	}
	input, present := obj["tool_input"]
	if !present {
		return "", false
	}
	key, err := SemanticKey(tool, input)
	return key, err == nil
}

// EventIntent is the intent a stored tool call carries in raw.intent; any
// other value reads as none. An appended call with intent fresh was meant to
// run, so it gets no advisory.
func EventIntent(raw json.RawMessage) Intent {
	var obj struct {
		Intent Intent `json:"intent"`
	}
	if json.Unmarshal(raw, &obj) != nil || !obj.Intent.Valid() {
		return IntentNone
	}
	return obj.Intent
}

// PriorCall is a stored tool call the gate may match: its event's id,
// sequence, ts, and EventSemanticKey.
type PriorCall struct {
	EventID     string
	Sequence    int64
	TS          time.Time
	SemanticKey string
}

// DedupDecision is the gate's answer: the POST /v1/policy/test response
// (pkg/api.PolicyDecision) with the gate's methods; the cached_* members
// are null unless the status is hit.
type DedupDecision api.PolicyDecision

// DecideDedup decides a call of tool with semanticKey, made when the chain's
// last stored sequence is tipSequence (−1 for an empty chain), against prior
// calls (in any order; the store may pass only those with the same key):
//   - intent fresh: bypass, whatever the tool and history (SPEC.md);
//   - a tool outside the policy: uncacheable;
//   - hit when a prior call with the same key has sequence in
//     (tip − WindowEvents, tip] and ts in [now − WindowSeconds, now]; the
//     newest such call is named. Both edges: exactly WindowEvents back is out,
//     exactly WindowSeconds old is in. A call with no ts never hits; a ts after
//     now counts as age 0;
//   - otherwise miss.
func DecideDedup(p DedupPolicy, tool, semanticKey string, intent Intent, candidates []PriorCall, tipSequence int64, now time.Time) DedupDecision {
	d := DedupDecision{DedupAction: DedupExecute, SemanticKey: semanticKey,
		WindowEvents: p.WindowEvents, WindowSeconds: p.WindowSeconds}
	switch {
	case intent == IntentFresh:
		d.DedupStatus = DedupBypass
		return d
	case !p.Cacheable(tool):
		d.DedupStatus = DedupUncacheable
		return d
	}
	oldest := now.Add(-time.Duration(p.WindowSeconds) * time.Second)
	var best *PriorCall
	for i := range candidates {
		c := &candidates[i]
		if c.SemanticKey != semanticKey ||
			c.Sequence <= tipSequence-int64(p.WindowEvents) || c.Sequence > tipSequence ||
			c.TS.IsZero() || c.TS.Before(oldest) {
			continue
		}
		if best == nil || c.Sequence > best.Sequence {
			best = c
		}
	}
	if best == nil {
		d.DedupStatus = DedupMiss
		return d
	}
	at := stamp(best.TS)
	id, seq := best.EventID, best.Sequence
	d.DedupStatus, d.WouldHit, d.DedupAction = DedupHit, true, DedupReuse
	d.CachedAt, d.CachedFromEventID, d.CachedFromSequence = &at, &id, &seq
	return d
}

// Advisory is d as a dedup_advisory; ok is false unless d is a hit. The
// append path decides with the tip before the appended event and candidates
// that exclude it, so the advisory equals what a probe just before would say.
func (d DedupDecision) Advisory() (a api.DedupAdvisory, ok bool) {
	if d.DedupStatus != DedupHit {
		return api.DedupAdvisory{}, false
	}
	return api.DedupAdvisory{SemanticKey: d.SemanticKey, DedupStatus: d.DedupStatus, DedupAction: d.DedupAction,
		CachedFromEventID: *d.CachedFromEventID, CachedFromSequence: *d.CachedFromSequence, CachedAt: *d.CachedAt,
		WindowEvents: d.WindowEvents, WindowSeconds: d.WindowSeconds}, true
}
