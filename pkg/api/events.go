package api

import "encoding/json"

// The record (SPEC.md "Event", "Quota", "Epoch stamp"; the Events routes).

// EventInput is an event as a client sends it: the body of POST /v1/events,
// one row of a batch, and, without its place, the body of POST
// /v1/events/append. The server decodes into it, so a pointer tells an absent
// field from a zero value (sequence 0 is a value). event_id and event_type
// are required everywhere, sequence on POST /v1/events and in a batch.
// Sequence, PrevHash and PayloadHash are the place and the hash: POST
// /v1/events/append refuses all three (the service numbers the event), and
// POST /v1/events refuses payload_hash (the service computes it); a batch
// row may carry payload_hash, checked against the computed one.
type EventInput struct {
	EventID   *string         `json:"event_id"`
	EventType *string         `json:"event_type"`
	Sequence  *int64          `json:"sequence,omitempty"`
	PrevHash  *string         `json:"prev_hash,omitempty"`
	Raw       json.RawMessage `json:"raw,omitempty"`
	Decision  *string         `json:"decision,omitempty"`
	Tool      *string         `json:"tool,omitempty"`
	MachineID *string         `json:"machine_id,omitempty"`
	ParentID  *string         `json:"parent_id,omitempty"`
	// TS is the event's time as sent (ISO-8601 with a UTC offset); the
	// service stores it as sent and hashes that value.
	TS *string `json:"ts,omitempty"`
	// Signature is standard base64 of the Ed25519 signature over the RFC 8785
	// canonical bytes of Raw (JSON null when Raw is absent), by the key the
	// machine registered. SignatureKey is stored as sent and not checked;
	// pkg/client sends the key's fingerprint (sha256:<hex> of the 32 bytes).
	Signature    *string `json:"signature,omitempty"`
	SignatureKey *string `json:"signature_key,omitempty"`
	PayloadHash  *string `json:"payload_hash,omitempty"`
}

// Event is an event as search and the single read show it: without raw,
// signature and signature_key.
type Event struct {
	EventID         string  `json:"event_id"`
	EventType       string  `json:"event_type"`
	Sequence        int64   `json:"sequence"`
	PrevHash        *string `json:"prev_hash"`
	PayloadHash     string  `json:"payload_hash"`
	Decision        *string `json:"decision"`
	Tool            *string `json:"tool"`
	MachineID       *string `json:"machine_id"`
	ParentID        *string `json:"parent_id"`
	TS              string  `json:"ts"`
	APIKeyID        *string `json:"api_key_id"`
	UserID          string  `json:"user_id"`
	MachineSequence int64   `json:"machine_sequence"`
	Surface         string  `json:"surface"`
}

// StoredEvent is the whole stored event, as the append answer shows it.
type StoredEvent struct {
	Event
	Raw          json.RawMessage `json:"raw"`
	Signature    *string         `json:"signature"`
	SignatureKey *string         `json:"signature_key"`
}

// Quota is the account's daily event quota.
type Quota struct {
	Limit     int64 `json:"limit"`
	Remaining int64 `json:"remaining"`
	UsedToday int64 `json:"used_today"`
}

// EpochStamp is SPEC.md's Epoch stamp, server-assigned by the formula of
// CONTRACT.md "The record".
type EpochStamp struct {
	Anchor     string     `json:"anchor"`
	DateUTC    string     `json:"date_utc"`
	EpochIndex int64      `json:"epoch_index"`
	Quadrant   string     `json:"quadrant"`
	Scheme     string     `json:"scheme"`
	Phase      EpochPhase `json:"phase"`
}

// EpochPhase is the accumulated phase of an EpochStamp.
type EpochPhase struct {
	AccumulatedPhase string `json:"accumulated_phase"`
	CycleNumber      int64  `json:"cycle_number"`
	EpochIndex       int64  `json:"epoch_index"`
	Scheme           string `json:"scheme"`
}

// DedupAdvisory says an appended cacheable tool call repeats an earlier one.
type DedupAdvisory struct {
	SemanticKey        string `json:"semantic_key"`
	DedupStatus        string `json:"dedup_status"`
	DedupAction        string `json:"dedup_action"`
	CachedFromEventID  string `json:"cached_from_event_id"`
	CachedFromSequence int64  `json:"cached_from_sequence"`
	CachedAt           string `json:"cached_at"`
	WindowEvents       int    `json:"window_events"`
	WindowSeconds      int    `json:"window_seconds"`
}

// AppendResponse answers POST /v1/events and POST /v1/events/append.
type AppendResponse struct {
	Status        string         `json:"status"` // appended
	Event         StoredEvent    `json:"event"`
	Epoch         EpochStamp     `json:"epoch"`
	Quota         Quota          `json:"quota"`
	DedupAdvisory *DedupAdvisory `json:"dedup_advisory,omitempty"`
}

// BatchRequest is the body of POST /v1/events/batch (at most 500 rows).
type BatchRequest struct {
	ClientMachine *string      `json:"client_machine" max:"name"`
	Events        []EventInput `json:"events"`
}

// BatchRowError names a batch row that was not stored, and why.
type BatchRowError struct {
	Index   int     `json:"index"`
	EventID *string `json:"event_id"`
	Code    string  `json:"code"`
	Field   string  `json:"field,omitempty"`
	Message string  `json:"message"`
}

// Rate is the batch route's rate window.
type Rate struct {
	Count     int `json:"count"`
	Limit     int `json:"limit"`
	Remaining int `json:"remaining"`
}

// BatchResponse answers POST /v1/events/batch: a resent row with identical
// content is skipped, not an error.
type BatchResponse struct {
	ClientMachine *string         `json:"client_machine"`
	Ingested      int             `json:"ingested"`
	Skipped       int             `json:"skipped"`
	Errors        []BatchRowError `json:"errors"`
	Quota         Quota           `json:"quota"`
	Rate          Rate            `json:"rate"`
}

// SearchRequest is the body of POST /v1/events/search; nil fields are not
// sent (the service's defaults apply: limit 200, newest first).
type SearchRequest struct {
	After      *string  `json:"after,omitempty" max:"name"`
	Before     *string  `json:"before,omitempty" max:"name"`
	Cursor     *int64   `json:"cursor,omitempty"`
	Decision   *string  `json:"decision,omitempty" max:"name"`
	EventTypes []string `json:"event_types,omitempty" each:"name"`
	Limit      *int     `json:"limit,omitempty"`
	Tool       *string  `json:"tool,omitempty" max:"name"`
}

// SearchResponse answers POST /v1/events/search: results newest first;
// NextCursor continues below the last one when the page was full.
type SearchResponse struct {
	Count      int     `json:"count"`
	NextCursor *int64  `json:"next_cursor"`
	Results    []Event `json:"results"`
	UserID     string  `json:"user_id"`
}

// Ancestor is one link of an event's prev_hash chain.
type Ancestor struct {
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	Sequence  int64  `json:"sequence"`
	TS        string `json:"ts"`
}

// EventRead answers GET /v1/events/{event_id}: the event and up to 50 links
// of the chain behind it.
type EventRead struct {
	Event    Event      `json:"event"`
	Ancestry []Ancestor `json:"ancestry"`
	UserID   string     `json:"user_id"`
}

// ChainTip answers GET /v1/chain/tip: the last stored event (all null for an
// empty chain) and the number of events.
type ChainTip struct {
	Sequence    *int64  `json:"sequence"`
	PayloadHash *string `json:"payload_hash"`
	EventID     *string `json:"event_id"`
	EventCount  int64   `json:"event_count"`
}

// SigningKeyRequest is the body of PUT /v1/machines/{machine_id}/signing-key:
// standard base64 of the machine's 32-byte Ed25519 public key.
type SigningKeyRequest struct {
	PublicKey string `json:"public_key" max:"name"`
}

// StreamEvent is the data of an `event` frame of GET /v1/events/stream
// (SPEC.md "Live stream"): an appended event's structural fields.
type StreamEvent struct {
	EventID   string  `json:"event_id"`
	EventType string  `json:"event_type"`
	Sequence  int64   `json:"sequence"`
	Tool      *string `json:"tool"`
	Decision  *string `json:"decision"`
	MachineID *string `json:"machine_id"`
}

// Stream is the data of the `event` frame announcing e.
func (e *Event) Stream() StreamEvent {
	return StreamEvent{EventID: e.EventID, EventType: e.EventType, Sequence: e.Sequence, Tool: e.Tool, Decision: e.Decision,
		MachineID: e.MachineID}
}

// StreamLagged is the data of a `lagged` frame: the connection fell behind
// and ends; what it missed starts at NextLeaf in stored order.
type StreamLagged struct {
	LastSequence *int64 `json:"last_sequence"`
	NextLeaf     *int64 `json:"next_leaf"`
}
