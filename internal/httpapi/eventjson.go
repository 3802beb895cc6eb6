package httpapi

import (
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// A fast path for the bodies of POST /v1/events and /v1/events/batch.
//
// encoding/json scans the whole body once to validate it, then again to
// decode by reflection, allocating each field, and the strict body reader
// (decode.go) adds a pass of its own: on batch ingest that is CPU taken from
// the cores the SQLite writer shares (figures: BenchmarkDecodeBatch,
// docs/performance.md "Sixth round of 2026-11-26"). These functions decode
// the shape clients send — exact lowercase keys, each once, strings without
// escapes, an integer sequence, a raw of valid UTF-8 without \u0000 or a
// lone surrogate — directly, and say no (ok false) to anything else, which then
// takes the body reader's path unchanged: an escape in a field, a key in
// another case or given twice, a number with a fraction, invalid JSON or
// text, a raw nested deeper than maxRawDepth. Where they say yes, the result
// is what the body reader gives for the same bytes (FuzzEventJSON and
// FuzzBatchJSON compare the two).

// jsonScan reads JSON from b at i.
type jsonScan struct {
	b []byte
	i int
}

func (s *jsonScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next skips whitespace and reports whether c comes next, taking it.
func (s *jsonScan) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// plain reads a string without escapes or control characters, of valid
// UTF-8 (whose bytes encoding/json keeps as they are), and returns its bytes.
func (s *jsonScan) plain() ([]byte, bool) {
	if !s.next('"') {
		return nil, false
	}
	start, ascii := s.i, true
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, ascii || utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// null takes a null literal if one comes next.
func (s *jsonScan) null() bool {
	s.space()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// optString reads a string or null into *dst (nil for null), the string
// stored in slot.
func (s *jsonScan) optString(dst **string, slot *string) bool {
	if s.null() {
		*dst = nil
		return true
	}
	v, ok := s.plain()
	if !ok {
		return false
	}
	*slot = string(v)
	*dst = slot
	return true
}

// integerPart reads the optional minus and the digits of a JSON number and
// reports whether they are well formed: a digit at least, no leading zero.
func (s *jsonScan) integerPart() bool {
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > digits && (s.b[digits] != '0' || s.i-digits == 1)
}

// optInt64 reads an integer that fits int64 (no fraction, no exponent) or
// null into *dst.
func (s *jsonScan) optInt64(dst **int64, slot *int64) bool {
	if s.null() {
		*dst = nil
		return true
	}
	start := s.i
	if !s.integerPart() || s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return false
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil {
		return false
	}
	*slot = n
	*dst = slot
	return true
}

// maxRawDepth bounds the nesting of a raw the fast path takes: encoding/json
// refuses a body nested deeper than 10,000 levels in all, raw's own levels
// plus those around it, which json.Valid on raw alone does not see (found by
// a reviewer). Deeper raws are left to encoding/json.
const maxRawDepth = 64

// value reads any JSON value and returns a copy of its bytes, as
// json.RawMessage keeps them (null included). The value's end is found by
// skipping strings and counting brackets; json.Valid then checks it exactly.
// The text rule holds inside it (domain.ValidText): it says no to invalid
// UTF-8, and to a \u escape of U+0000 or of a surrogate (a pair is rare
// enough to leave to the body reader).
func (s *jsonScan) value() (json.RawMessage, bool) {
	s.space()
	start, depth := s.i, 0
scan:
	for ; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '"':
			for s.i++; s.i < len(s.b) && s.b[s.i] != '"'; s.i++ {
				if s.b[s.i] == '\\' {
					if s.i++; s.i < len(s.b) && s.b[s.i] == 'u' && !plainEscape(s.b[s.i+1:]) {
						return nil, false
					}
				}
			}
			if depth == 0 {
				s.i++
				break scan
			}
		case '{', '[':
			if depth++; depth > maxRawDepth {
				return nil, false
			}
		case '}', ']':
			if depth == 0 {
				break scan
			}
			if depth--; depth == 0 {
				s.i++
				break scan
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				break scan
			}
		}
	}
	if s.i > len(s.b) || s.i == start || !json.Valid(s.b[start:s.i]) || !utf8.Valid(s.b[start:s.i]) {
		return nil, false
	}
	return append(json.RawMessage(nil), s.b[start:s.i]...), true
}

// plainEscape reports whether b starts with the four hex digits of a \u
// escape that is neither U+0000 nor a surrogate.
func plainEscape(b []byte) bool {
	r, ok := hexRune(b)
	return ok && r != 0 && !utf16.IsSurrogate(r)
}

// hexRune reads the four hex digits of a \u escape at the start of b.
func hexRune(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// eventSlots holds the values an EventInput's pointers point at, so that an
// event's fields take one allocation.
type eventSlots struct {
	eventID, eventType, prevHash, decision, tool, machineID, parentID, signature, signatureKey, ts, payloadHash string
	sequence                                                                                                    int64
}

// event reads one event object.
func (s *jsonScan) event() (in api.EventInput, ok bool) {
	if !s.next('{') {
		return in, false
	}
	if s.next('}') {
		return in, true
	}
	slots := new(eventSlots)
	var seen uint16
	for {
		key, ok := s.plain()
		if !ok || !s.next(':') {
			return in, false
		}
		var bit uint16
		switch string(key) {
		case "event_id":
			bit, ok = 1<<0, s.optString(&in.EventID, &slots.eventID)
		case "event_type":
			bit, ok = 1<<1, s.optString(&in.EventType, &slots.eventType)
		case "sequence":
			bit, ok = 1<<2, s.optInt64(&in.Sequence, &slots.sequence)
		case "prev_hash":
			bit, ok = 1<<3, s.optString(&in.PrevHash, &slots.prevHash)
		case "raw":
			bit = 1 << 4
			in.Raw, ok = s.value()
		case "decision":
			bit, ok = 1<<5, s.optString(&in.Decision, &slots.decision)
		case "tool":
			bit, ok = 1<<6, s.optString(&in.Tool, &slots.tool)
		case "machine_id":
			bit, ok = 1<<7, s.optString(&in.MachineID, &slots.machineID)
		case "parent_id":
			bit, ok = 1<<8, s.optString(&in.ParentID, &slots.parentID)
		case "signature":
			bit, ok = 1<<9, s.optString(&in.Signature, &slots.signature)
		case "signature_key":
			bit, ok = 1<<10, s.optString(&in.SignatureKey, &slots.signatureKey)
		case "ts":
			bit, ok = 1<<11, s.optString(&in.TS, &slots.ts)
		case "payload_hash":
			bit, ok = 1<<12, s.optString(&in.PayloadHash, &slots.payloadHash)
		default:
			return in, false // another field, or a key in another case
		}
		if !ok || seen&bit != 0 {
			return in, false // a bad value, or a key given twice
		}
		seen |= bit
		if s.next('}') {
			return in, true
		}
		if !s.next(',') {
			return in, false
		}
	}
}

// end reports whether only whitespace is left.
func (s *jsonScan) end() bool {
	s.space()
	return s.i == len(s.b)
}

// decodeEventFast decodes a single append's body, or says no (ok false).
func decodeEventFast(body []byte) (api.EventInput, bool) {
	s := jsonScan{b: body}
	in, ok := s.event()
	return in, ok && s.end()
}

// decodeBatchFast decodes a batch body whose keys are exactly
// "client_machine" and "events", each at most once, events an array of
// events; or says no (ok false).
func decodeBatchFast(body []byte) (clientMachine *string, rows []api.EventInput, ok bool) {
	s := jsonScan{b: body}
	if !s.next('{') {
		return nil, nil, false
	}
	var sawMachine, sawEvents bool
	var machine string
	for !s.next('}') {
		if sawMachine || sawEvents {
			if !s.next(',') {
				return nil, nil, false
			}
		}
		key, ok := s.plain()
		if !ok || !s.next(':') {
			return nil, nil, false
		}
		switch string(key) {
		case "client_machine":
			if sawMachine || !s.optString(&clientMachine, &machine) || len(machine) > domain.MaxNameBytes {
				return nil, nil, false
			}
			sawMachine = true
		case "events":
			if sawEvents || s.null() || !s.next('[') {
				return nil, nil, false
			}
			sawEvents = true
			rows = make([]api.EventInput, 0, 64)
			for !s.next(']') {
				if len(rows) > 0 && !s.next(',') {
					return nil, nil, false
				}
				in, ok := s.event()
				if !ok {
					return nil, nil, false
				}
				rows = append(rows, in)
			}
		default:
			return nil, nil, false
		}
	}
	return clientMachine, rows, sawEvents && s.end()
}
