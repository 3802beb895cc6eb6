package store

// The subagent column (migration 036): raw's subagent member, which the
// console's sub-agent filter finds through its key (events_subagent on
// PostgreSQL, events_by_subagent on SQLite: migration 039), read from raw
// in Go before the insert rather than by the index's own expression.

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// RawSubagent is the subagent column's value for raw: the value of raw's
// top-level subagent member (the first, should raw name it twice), however
// raw spells the name, as the console's sub-agent filter compares it — a
// string's text, an object's or an array's JSON text as raw holds it. nil
// when raw is not an object or has no such member, or the value is null, a
// number or a boolean (none of which the filter found on SQLite), or a string
// holding U+0000 or an unpaired surrogate (no filter text can name one, and
// PostgreSQL's text cannot hold U+0000).
func RawSubagent(raw []byte) *string {
	// A raw that holds neither the name unescaped nor a \u escape cannot
	// name the member: only \uXXXX spells a letter. Most raws stop here.
	if !bytes.Contains(raw, []byte(`"subagent"`)) && !bytes.Contains(raw, []byte(`\u`)) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		if t != "subagent" {
			continue
		}
		switch value[0] {
		case '"':
			if s, ok := jsonStringText(value); ok {
				return &s
			}
		case '{', '[':
			s := string(value)
			return &s
		}
		return nil
	}
	return nil
}

// ReadSubagent sets the event's subagent column from its raw (RawSubagent),
// once. The service calls it before the writer takes the event
// (app.prepareEvent), so that the single SQLite writer does not read raw; an
// insert reads raw itself for an event whose caller did not
// (subagentColumn).
func (e *Event) ReadSubagent() {
	if !e.SubagentRead {
		e.Subagent, e.SubagentRead = RawSubagent(e.Raw), true
	}
}

// subagentColumn is the value the insert binds to the subagent column.
func (e *Event) subagentColumn() *string {
	if e.SubagentRead {
		return e.Subagent
	}
	return RawSubagent(e.Raw)
}

// jsonStringText is the text of q, a JSON string as a valid raw holds it
// (quotes included); ok is false when the text holds U+0000, an unpaired
// surrogate or bytes that are not UTF-8.
func jsonStringText(q []byte) (string, bool) {
	body := q[1 : len(q)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body), utf8.Valid(body)
	}
	var b strings.Builder
	b.Grow(len(body))
	for i := 0; i < len(body); {
		if body[i] != '\\' {
			b.WriteByte(body[i])
			i++
			continue
		}
		if i+1 >= len(body) {
			return "", false
		}
		c := body[i+1]
		i += 2
		if c != 'u' {
			b.WriteByte(unescaped(c))
			continue
		}
		r, ok := hexRune(body, i)
		if !ok {
			return "", false
		}
		i += 4
		if utf16.IsSurrogate(r) {
			var low rune
			if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
				return "", false
			}
			if low, ok = hexRune(body, i+2); !ok {
				return "", false
			}
			if r = utf16.DecodeRune(r, low); r == utf8.RuneError {
				return "", false
			}
			i += 6
		}
		if r == 0 {
			return "", false
		}
		b.WriteRune(r)
	}
	s := b.String()
	return s, utf8.ValidString(s)
}

// unescaped is the byte a JSON escape \c stands for (c not u).
func unescaped(c byte) byte {
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return c // ", \ and /
}

// hexRune reads the four hex digits of a \u escape at b[i:].
func hexRune(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
	return rune(v), err == nil
}
