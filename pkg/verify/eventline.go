package verify

// A hand-written decoder for the one line shape that makes up almost all of
// an export: an event line exactly as ExportWriter writes it. encoding/json
// pays for reflection, a validating pre-scan and a copy of every string on
// each such line; this reads the fixed keys in their fixed order in one pass.
//
// It is strict by construction: it accepts only input it decodes to exactly
// the value encoding/json would produce, and declines everything else —
// other key order or spelling, unknown or repeated keys, whitespace, escapes
// in the event's own strings, invalid UTF-8, null where a string or number is
// expected, numbers that are not plain int64. A declined line goes through
// encoding/json as before, so its errors and edge cases are unchanged.
// FuzzDecodeEventLine holds the two equal.

import (
	"encoding/json"
	"unicode/utf8"
)

// eventLineStart is how ExportWriter begins every event line.
const eventLineStart = `{"kind":"event","event":{"event_id":`

// fastEvent holds a decoded event and the strings its nullable fields point
// to, so a line costs two allocations (this and the line's string copy).
type fastEvent struct {
	event   ExportEvent
	strings [8]string
}

// decodeEventLine decodes an export line of kind event into l, or reports
// false (leaving l untouched) when the line is not in the writer's exact
// shape. The event's Raw aliases line: the caller must not modify line
// afterwards.
func decodeEventLine(line []byte, l *exportLine) bool {
	if len(line) < len(eventLineStart) || string(line[:len(eventLineStart)]) != eventLineStart {
		return false
	}
	p := eventLineParser{b: line, i: len(eventLineStart), s: string(line)}
	fe := new(fastEvent)
	e := &fe.event
	var ok bool
	if e.EventID, ok = p.str(); !ok || !p.key(`,"event_type":`) {
		return false
	}
	if e.EventType, ok = p.str(); !ok || !p.key(`,"sequence":`) {
		return false
	}
	if e.Sequence, ok = p.int64(); !ok {
		return false
	}
	if !p.key(`,"prev_hash":`) || !p.nullableStr(&e.PrevHash, &fe.strings[0]) {
		return false
	}
	if !p.key(`,"raw":`) {
		return false
	}
	start := p.i
	if !p.value(0) {
		return false
	}
	e.Raw = json.RawMessage(line[start:p.i:p.i])
	for i, f := range [...]struct {
		key   string
		field **string
	}{
		{`,"decision":`, &e.Decision},
		{`,"tool":`, &e.Tool},
		{`,"machine_id":`, &e.MachineID},
		{`,"parent_id":`, &e.ParentID},
		{`,"ts":`, &e.TS},
		{`,"signature":`, &e.Signature},
		{`,"signature_key":`, &e.SignatureKey},
	} {
		if !p.key(f.key) || !p.nullableStr(f.field, &fe.strings[i+1]) {
			return false
		}
	}
	if !p.key(`,"payload_hash":`) {
		return false
	}
	if e.PayloadHash, ok = p.str(); !ok || !p.key(`}}`) || p.i != len(line) {
		return false
	}
	*l = exportLine{Kind: LineEvent, Event: e}
	return true
}

// eventLineParser walks one line; s is the line as a string, so decoded
// strings are substrings of one copy rather than one allocation each.
type eventLineParser struct {
	b []byte
	s string
	i int
}

// key consumes the literal k (punctuation and a key, always ASCII).
func (p *eventLineParser) key(k string) bool {
	if len(p.b)-p.i < len(k) || p.s[p.i:p.i+len(k)] != k {
		return false
	}
	p.i += len(k)
	return true
}

// str reads a string without escapes or control characters, in valid UTF-8:
// the only strings whose decoded value is their bytes.
func (p *eventLineParser) str() (string, bool) {
	b := p.b
	if p.i >= len(b) || b[p.i] != '"' {
		return "", false
	}
	start := p.i + 1
	ascii := true
	for i := start; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			if !ascii && !utf8.Valid(b[start:i]) {
				return "", false
			}
			p.i = i + 1
			return p.s[start:i], true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// nullableStr reads null (field = nil) or a string (field points to it,
// stored in slot).
func (p *eventLineParser) nullableStr(field **string, slot *string) bool {
	if p.key("null") {
		*field = nil
		return true
	}
	s, ok := p.str()
	if !ok {
		return false
	}
	*slot = s
	*field = slot
	return true
}

// int64 reads an integer of at most 18 digits (so it cannot overflow), as
// strconv.ParseInt would for encoding/json; anything else (fractions,
// exponents, leading zeros, 19 digits and more) is declined.
func (p *eventLineParser) int64() (int64, bool) {
	b, i := p.b, p.i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	digits := i
	var n int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		n = n*10 + int64(b[i]-'0')
		i++
	}
	switch count := i - digits; {
	case count == 0 || count > 18:
		return 0, false
	case count > 1 && b[digits] == '0':
		return 0, false
	}
	p.i = i
	if neg {
		n = -n
	}
	return n, true
}

// maxRawDepth bounds the nesting value follows; deeper raws take
// encoding/json (whose own limit is far higher).
const maxRawDepth = 64

// value skips one JSON value without whitespace, accepting only what
// encoding/json's validator accepts (RFC 8259 grammar; strings may hold any
// byte ≥ 0x20 but '"' and '\\' unescaped, as json.Valid allows).
// RawMessage keeps the bytes verbatim, so validating is all it takes.
func (p *eventLineParser) value(depth int) bool {
	b := p.b
	if p.i >= len(b) || depth > maxRawDepth {
		return false
	}
	switch c := b[p.i]; {
	case c == '{':
		p.i++
		if p.i < len(b) && b[p.i] == '}' {
			p.i++
			return true
		}
		for {
			if !p.rawString() || !p.key(":") || !p.value(depth+1) || p.i >= len(b) {
				return false
			}
			switch b[p.i] {
			case ',':
				p.i++
			case '}':
				p.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		p.i++
		if p.i < len(b) && b[p.i] == ']' {
			p.i++
			return true
		}
		for {
			if !p.value(depth+1) || p.i >= len(b) {
				return false
			}
			switch b[p.i] {
			case ',':
				p.i++
			case ']':
				p.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return p.rawString()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.key("true")
	case c == 'f':
		return p.key("false")
	case c == 'n':
		return p.key("null")
	}
	return false
}

// rawString skips a JSON string with its escapes checked.
func (p *eventLineParser) rawString() bool {
	b := p.b
	if p.i >= len(b) || b[p.i] != '"' {
		return false
	}
	for i := p.i + 1; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			p.i = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHexDigit(h) {
						return false
					}
				}
				i += 6
			default:
				return false
			}
		default:
			i++
		}
	}
	return false
}

func isHexDigit(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number skips a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *eventLineParser) number() bool {
	b, i := p.b, p.i
	digits := func() int {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - start
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	p.i = i
	return true
}
