package api

import "encoding/json"

// Machines, their signing keys, and the dedup probe (CONTRACT.md "The
// record"; SPEC.md "POST /v1/policy/test").

// SigningKeyRegistered answers PUT /v1/machines/{machine_id}/signing-key:
// the key applies from leaf FromLeaf (its machine.signing_key event) on.
type SigningKeyRegistered struct {
	MachineID    string `json:"machine_id"`
	Algorithm    string `json:"algorithm"` // ed25519
	Fingerprint  string `json:"fingerprint"`
	RegisteredAt string `json:"registered_at"`
	FromLeaf     int64  `json:"from_leaf"`
}

// MachineKey is one registered key of a machine, named by its fingerprint.
type MachineKey struct {
	Fingerprint  string `json:"fingerprint"`
	RegisteredAt string `json:"registered_at"`
	FromLeaf     int64  `json:"from_leaf"`
}

// Machine is one machine of GET /v1/machines: CurrentFingerprint is the key
// its appends are checked against (nil: none registered).
type Machine struct {
	MachineID          string       `json:"machine_id"`
	Events             int64        `json:"events"`
	Keys               []MachineKey `json:"keys"`
	CurrentFingerprint *string      `json:"current_fingerprint"`
}

// MachineList answers GET /v1/machines.
type MachineList struct {
	Count    int       `json:"count"`
	Machines []Machine `json:"machines"`
}

// PolicyTestRequest is the body of POST /v1/policy/test (writes nothing).
type PolicyTestRequest struct {
	Tool          string          `json:"tool" max:"name"` // required
	ToolInput     json.RawMessage `json:"tool_input,omitempty"`
	Intent        *string         `json:"intent,omitempty" max:"name"` // fresh or cached_ok
	ParentEventID *string         `json:"parent_event_id,omitempty" max:"name"`
}

// PolicyDecision answers POST /v1/policy/test: what the dedup gate would
// decide for the call.
type PolicyDecision struct {
	DedupStatus        string  `json:"dedup_status"` // hit, miss, bypass, uncacheable
	WouldHit           bool    `json:"would_hit"`
	DedupAction        string  `json:"dedup_action"` // reuse or execute
	SemanticKey        string  `json:"semantic_key"`
	CachedAt           *string `json:"cached_at"`
	CachedFromEventID  *string `json:"cached_from_event_id"`
	CachedFromSequence *int64  `json:"cached_from_sequence"`
	WindowEvents       int     `json:"window_events"`
	WindowSeconds      int     `json:"window_seconds"`
}
