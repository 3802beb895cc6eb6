package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// eventBody reads a single append's X-SVC-Surface and body; a body that
// cannot be read is refused after the daily quota (app.RefuseBody).
func (s *Server) eventBody(r *http.Request) (string, []byte, error) {
	surface, err := app.Surface(surfaceHeader(r))
	if err != nil {
		return "", nil, err
	}
	body, err := readJSONBody(r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return "", nil, s.app.RefuseBody(r.Context(), principal(r), err)
	}
	return surface, body, nil
}

func (s *Server) appendEvent(w http.ResponseWriter, r *http.Request) error {
	surface, body, err := s.eventBody(r)
	if err != nil {
		return err
	}
	in, ok := decodeEventFast(body)
	if !ok {
		if in, err = decodeBody[api.EventInput](body, nil); err != nil {
			return s.app.RefuseBody(r.Context(), principal(r), err)
		}
	}
	res, err := s.app.Append(r.Context(), principal(r), in, surface)
	if err != nil {
		return err
	}
	return writeAppended(w, res)
}

// writeAppended answers an append: the stored event, and on an idempotent
// retry (nothing written) the header Idempotent-Replayed.
func writeAppended(w http.ResponseWriter, res app.AppendResult) error {
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	b, err := appendAppendResponse(make([]byte, 0, 1024), &api.AppendResponse{Status: "appended", Event: res.Event,
		Epoch: res.Epoch, Quota: res.Quota, DedupAdvisory: res.Advisory})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}

// appendAppendResponse appends r encoded as encodeJSON would (no HTML
// escaping, a final newline), without reflection: it answers every append,
// where encoding/json took 2 % of the server's CPU (issue #39,
// docs/performance.md). TestAppendAppendResponse holds the two encodings
// equal.
func appendAppendResponse(b []byte, r *api.AppendResponse) ([]byte, error) {
	b = append(b, `{"status":`...)
	b = appendJSONString(b, r.Status)
	b = append(b, `,"event":`...)
	b = appendEventView(b, &r.Event.Event)
	b = append(b[:len(b)-1], `,"raw":`...) // the view's closing brace
	b, err := appendRawJSON(b, r.Event.Raw)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"signature":`...)
	b = appendJSONStringPtr(b, r.Event.Signature)
	b = append(b, `,"signature_key":`...)
	b = appendJSONStringPtr(b, r.Event.SignatureKey)
	e := &r.Epoch
	b = append(b, `},"epoch":{"anchor":`...)
	b = appendJSONString(b, e.Anchor)
	b = append(b, `,"date_utc":`...)
	b = appendJSONString(b, e.DateUTC)
	b = append(b, `,"epoch_index":`...)
	b = strconv.AppendInt(b, e.EpochIndex, 10)
	b = append(b, `,"quadrant":`...)
	b = appendJSONString(b, e.Quadrant)
	b = append(b, `,"scheme":`...)
	b = appendJSONString(b, e.Scheme)
	b = append(b, `,"phase":{"accumulated_phase":`...)
	b = appendJSONString(b, e.Phase.AccumulatedPhase)
	b = append(b, `,"cycle_number":`...)
	b = strconv.AppendInt(b, e.Phase.CycleNumber, 10)
	b = append(b, `,"epoch_index":`...)
	b = strconv.AppendInt(b, e.Phase.EpochIndex, 10)
	b = append(b, `,"scheme":`...)
	b = appendJSONString(b, e.Phase.Scheme)
	b = append(b, `}},"quota":{"limit":`...)
	b = strconv.AppendInt(b, r.Quota.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, r.Quota.Remaining, 10)
	b = append(b, `,"used_today":`...)
	b = strconv.AppendInt(b, r.Quota.UsedToday, 10)
	b = append(b, '}')
	if d := r.DedupAdvisory; d != nil {
		b = append(b, `,"dedup_advisory":{"semantic_key":`...)
		b = appendJSONString(b, d.SemanticKey)
		b = append(b, `,"dedup_status":`...)
		b = appendJSONString(b, d.DedupStatus)
		b = append(b, `,"dedup_action":`...)
		b = appendJSONString(b, d.DedupAction)
		b = append(b, `,"cached_from_event_id":`...)
		b = appendJSONString(b, d.CachedFromEventID)
		b = append(b, `,"cached_from_sequence":`...)
		b = strconv.AppendInt(b, d.CachedFromSequence, 10)
		b = append(b, `,"cached_at":`...)
		b = appendJSONString(b, d.CachedAt)
		b = append(b, `,"window_events":`...)
		b = strconv.AppendInt(b, int64(d.WindowEvents), 10)
		b = append(b, `,"window_seconds":`...)
		b = strconv.AppendInt(b, int64(d.WindowSeconds), 10)
		b = append(b, '}')
	}
	return append(b, "}\n"...), nil
}

// appendRawJSON appends raw as encoding/json writes a json.RawMessage
// without HTML escaping: null when empty, else compacted (the service
// stores raw compacted, so that is a copy). Unlike encoding/json it does
// not validate raw without whitespace: the service stores only valid JSON
// (app.prepareEvent compacts it, which validates).
func appendRawJSON(b []byte, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return append(b, "null"...), nil
	}
	if bytes.ContainsAny(raw, " \t\r\n") {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, err
		}
		return append(b, buf.Bytes()...), nil
	}
	return append(b, raw...), nil
}

// appendNextEvent is POST /v1/events/append: POST /v1/events for an event
// the service numbers at the tip (app.AppendNext). The body has no
// sequence, prev_hash or payload_hash; one sent, even null, is answered as
// the service's field (422 naming it), after the daily quota like any body.
func (s *Server) appendNextEvent(w http.ResponseWriter, r *http.Request) error {
	surface, body, err := s.eventBody(r)
	if err != nil {
		return err
	}
	in, err := decodeNextEvent(body)
	if err != nil {
		return s.app.RefuseBody(r.Context(), principal(r), err)
	}
	res, err := s.app.AppendNext(r.Context(), principal(r), in, surface)
	if err != nil {
		return err
	}
	return writeAppended(w, res)
}

// nextEventType is what the body reader reads POST /v1/events/append's body
// as: api.EventInput without the fields the service sets there, so that one
// of them is met, in the body's order, as a key the route does not take.
var nextEventType = withoutKeys(reflect.TypeFor[api.EventInput](), "sequence", "prev_hash", "payload_hash")

// withoutKeys is the struct type t without the fields of the given json keys.
func withoutKeys(t reflect.Type, keys ...string) reflect.Type {
	var fields []reflect.StructField
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); !slices.Contains(keys, name) {
			fields = append(fields, f)
		}
	}
	return reflect.StructOf(fields)
}

// decodeNextEvent reads POST /v1/events/append's body strictly (decodeBody
// with nextEventType's keys). An empty event_id or event_type reads as
// missing ("required").
func decodeNextEvent(body []byte) (api.EventInput, error) {
	var in api.EventInput
	if p := readInput(body, nextEventType); p != nil {
		if p.kind == inputUnknown && p.field == p.key {
			switch p.key {
			case "sequence", "prev_hash", "payload_hash":
				return in, app.ServiceSets(p.key)
			}
		}
		return in, p.err()
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return in, fmt.Errorf("decode %T after the strict read: %w", in, err)
	}
	for _, f := range []**string{&in.EventID, &in.EventType} {
		if *f != nil && **f == "" {
			*f = nil
		}
	}
	return in, nil
}

// batchRequest is a batch body with its rows as sent: the form it is read
// in when a row does not read as an event.
type batchRequest struct {
	ClientMachine *string           `json:"client_machine" max:"name"`
	Events        []json.RawMessage `json:"events"`
}

func (b *batchRequest) validate() []domain.FieldError { return requireEvents(b.Events == nil) }

// batchBody is a batch body whose rows all read as events.
type batchBody api.BatchRequest

func (b *batchBody) validate() []domain.FieldError { return requireEvents(b.Events == nil) }

func requireEvents(missing bool) []domain.FieldError {
	if missing {
		return []domain.FieldError{{Field: "events", Message: "required: an array of at most 500 events"}}
	}
	return nil
}

// decodeBatch reads a batch body (SPEC.md "POST /v1/events/batch": rows are
// checked for shape, and each bad row is named in errors while the good ones
// are stored). The usual shape takes the fast path (eventjson.go); anything
// else the body reader. A body that is not one JSON text with each name once
// and the text rule kept throughout, or whose top level is wrong, is refused
// whole; a row that does not read as an event (a key or a value outside the
// event's form) is named in unreadable by its index, and the rest still go in.
func decodeBatch(body []byte) (clientMachine *string, rows []api.EventInput, unreadable map[int]domain.FieldError, err error) {
	if m, rows, ok := decodeBatchFast(body); ok {
		return m, rows, nil, nil
	}
	p := readInput(body, reflect.TypeFor[batchBody]())
	if p == nil {
		b, err := decodeBody[batchBody](body, nil)
		return b.ClientMachine, b.Events, nil, err
	}
	if p.kind.fatal() || !strings.HasPrefix(p.field, "events[") {
		return nil, nil, nil, p.err()
	}
	// Some row does not read as an event: each row on its own.
	b, err := decodeBody[batchRequest](body, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	rows = make([]api.EventInput, len(b.Events))
	unreadable = map[int]domain.FieldError{}
	for i, raw := range b.Events {
		if p := readInput(raw, reflect.TypeFor[api.EventInput]()); p != nil {
			unreadable[i] = domain.FieldError{Field: p.field, Message: p.message}
			continue
		}
		if err := json.Unmarshal(raw, &rows[i]); err != nil {
			return nil, nil, nil, fmt.Errorf("batch row %d after the strict read: %w", i, err)
		}
	}
	return b.ClientMachine, rows, unreadable, nil
}

func (s *Server) appendBatch(w http.ResponseWriter, r *http.Request) error {
	body, err := readJSONBody(r, 8*s.cfg.MaxBodyBytes, false)
	if err != nil {
		return s.app.RefuseBody(r.Context(), principal(r), err)
	}
	clientMachine, rows, unreadable, err := decodeBatch(body)
	if err != nil {
		return s.app.RefuseBody(r.Context(), principal(r), err)
	}
	res, err := s.app.AppendBatch(r.Context(), principal(r), clientMachine, rows, unreadable)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

func (s *Server) searchEvents(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[api.SearchRequest](r, s.cfg.MaxBodyBytes, true)
	if err != nil {
		return err
	}
	p := principal(r)
	evs, limit, err := s.app.Search(r.Context(), p, req)
	if err != nil {
		return err
	}
	// next_cursor continues the listing; it is set only when a full page came back.
	var next *int64
	if len(evs) == limit && limit > 0 {
		c := evs[len(evs)-1].Sequence
		next = &c
	}
	bp := searchBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 1<<20 {
			searchBufs.Put(bp)
		}
	}()
	*bp = appendSearchResponse((*bp)[:0], evs, next, p.UserID)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(*bp)
	return err
}

// searchBufs recycles search response buffers (a 200-event page is ~100 KB).
var searchBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// appendSearchResponse encodes a search answer exactly as encodeJSON encodes
// the api.SearchResponse (no HTML escaping, a final newline), without
// reflection: a page's encoding is a large share of a search's CPU
// (docs/performance.md "Search: what a page costs"). TestAppendSearchResponse
// holds the two encodings equal.
func appendSearchResponse(b []byte, evs []api.Event, next *int64, userID string) []byte {
	b = append(b, `{"count":`...)
	b = strconv.AppendInt(b, int64(len(evs)), 10)
	b = append(b, `,"next_cursor":`...)
	if next == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *next, 10)
	}
	b = append(b, `,"results":[`...)
	for i := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEventView(b, &evs[i])
	}
	b = append(b, `],"user_id":`...)
	b = appendJSONString(b, userID)
	return append(b, "}\n"...)
}

// appendEventView encodes e as encoding/json would.
func appendEventView(b []byte, e *api.Event) []byte {
	b = append(b, `{"event_id":`...)
	b = appendJSONString(b, e.EventID)
	b = append(b, `,"event_type":`...)
	b = appendJSONString(b, e.EventType)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, e.Sequence, 10)
	b = append(b, `,"prev_hash":`...)
	b = appendJSONStringPtr(b, e.PrevHash)
	b = append(b, `,"payload_hash":`...)
	b = appendJSONString(b, e.PayloadHash)
	b = append(b, `,"decision":`...)
	b = appendJSONStringPtr(b, e.Decision)
	b = append(b, `,"tool":`...)
	b = appendJSONStringPtr(b, e.Tool)
	b = append(b, `,"machine_id":`...)
	b = appendJSONStringPtr(b, e.MachineID)
	b = append(b, `,"parent_id":`...)
	b = appendJSONStringPtr(b, e.ParentID)
	b = append(b, `,"ts":`...)
	b = appendJSONString(b, e.TS)
	b = append(b, `,"api_key_id":`...)
	b = appendJSONStringPtr(b, e.APIKeyID)
	b = append(b, `,"user_id":`...)
	b = appendJSONString(b, e.UserID)
	b = append(b, `,"machine_sequence":`...)
	b = strconv.AppendInt(b, e.MachineSequence, 10)
	b = append(b, `,"surface":`...)
	b = appendJSONString(b, e.Surface)
	return append(b, '}')
}

func appendJSONStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *s)
}

// appendJSONString quotes s; strings needing any escape (controls, quotes,
// backslashes, anything non-ASCII) go through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			q, _ := api.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func (s *Server) getEvent(w http.ResponseWriter, r *http.Request) error {
	read, err := s.app.EventWithAncestry(r.Context(), principal(r), r.PathValue("event_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, read)
}

func (s *Server) chainTip(w http.ResponseWriter, r *http.Request) error {
	tip, err := s.app.ChainTip(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, tip)
}

// signingKeyBody is the body of PUT /v1/machines/{machine_id}/signing-key
// (pkg/api's) with its check.
type signingKeyBody api.SigningKeyRequest

func (b *signingKeyBody) validate() []domain.FieldError {
	if b.PublicKey == "" {
		return []domain.FieldError{{Field: "public_key", Message: "required: standard base64 of a 32-byte Ed25519 public key"}}
	}
	return nil
}

func (s *Server) putSigningKey(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[signingKeyBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	k, err := s.app.RegisterSigningKey(r.Context(), principal(r), r.PathValue("machine_id"), req.PublicKey)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.SigningKeyRegistered{MachineID: k.MachineID, Algorithm: "ed25519", Fingerprint: k.Fingerprint,
		RegisteredAt: time.UnixMicro(k.RegisteredAt).UTC().Format(time.RFC3339Nano), FromLeaf: k.FromLeaf})
}

func (s *Server) listMachines(w http.ResponseWriter, r *http.Request) error {
	ms, err := s.app.Machines(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.MachineList{Count: len(ms), Machines: ms})
}

// policyTestBody is the body of POST /v1/policy/test (pkg/api's) with its
// checks.
type policyTestBody api.PolicyTestRequest

func (b *policyTestBody) validate() []domain.FieldError {
	var errs []domain.FieldError
	if b.Tool == "" {
		errs = append(errs, domain.FieldError{Field: "tool", Message: "required"})
	}
	if len(b.ToolInput) > 0 && string(b.ToolInput) != "null" && b.ToolInput[0] != '{' {
		errs = append(errs, domain.FieldError{Field: "tool_input", Message: "must be an object"})
	}
	if b.Intent != nil && !domain.Intent(*b.Intent).Valid() {
		errs = append(errs, domain.FieldError{Field: "intent", Message: "must be fresh, cached_ok or null"})
	}
	return errs
}

func (s *Server) policyTest(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[policyTestBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	d, err := s.app.PolicyTest(r.Context(), principal(r), api.PolicyTestRequest(req))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.PolicyDecision(d))
}
