package verify

// The RFC 8785 (JCS) fast path: an event's canonical bytes and hash built
// directly, and whether a JSON document is canonical already. Differential
// tests and fuzz targets hold each equal to the jcs library.

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// EventHash returns SHA-256(CanonicalEvent(e)), the bytes behind payload_hash,
// appending the canonical bytes to scratch[:0] (returned for reuse), so a
// caller hashing many events allocates little. Heal scans and VerifyExport use it.
// The common case builds the canonical bytes directly — the keys of
// HashedEvent in RFC 8785 order, RFC 8785 string escaping, raw copied when it
// is already canonical and given to jcs otherwise — without CanonicalEvent's
// marshalling of the whole event and parsing it again; anything unusual (a
// sequence beyond 2^53, invalid UTF-8, a raw jcs rejects) takes
// CanonicalEvent itself. A differential test and fuzz target hold the two equal.
func EventHash(e *HashedEvent, scratch []byte) ([]byte, Hash, error) {
	scratch, h, _, err := eventHash(e, scratch)
	return scratch, h, err
}

// eventHash is EventHash that also returns the canonical raw it built on the
// way (signedMessage(e.Raw), not a part of scratch), or nil when it did not
// build one.
func eventHash(e *HashedEvent, scratch []byte) ([]byte, Hash, []byte, error) {
	canon, canonRaw, ok := appendCanonicalEvent(scratch[:0], e)
	if !ok {
		c, err := CanonicalEvent(e)
		if err != nil {
			return canon, Hash{}, nil, err
		}
		return canon, sha256.Sum256(c), nil, nil
	}
	return canon, sha256.Sum256(canon), canonRaw, nil
}

const maxSafeInteger = 1<<53 - 1

// appendCanonicalEvent appends the canonical event to b, and returns the
// canonical raw apart (e.Raw itself when it is canonical already).
func appendCanonicalEvent(b []byte, e *HashedEvent) ([]byte, []byte, bool) {
	if e.Sequence > maxSafeInteger || e.Sequence < -maxSafeInteger {
		return b, nil, false
	}
	ok := true
	str := func(key string, s *string) {
		b = append(b, key...)
		if s == nil {
			b = append(b, "null"...)
			return
		}
		var good bool
		b, good = appendJCSString(b, *s)
		ok = ok && good
	}
	// RFC 8785 orders members by UTF-16 code units; all keys are ASCII.
	str(`{"decision":`, e.Decision)
	b = append(b, `,"event_id":`...)
	b, ok = appendJCSStringAnd(b, e.EventID, ok)
	b = append(b, `,"event_type":`...)
	b, ok = appendJCSStringAnd(b, e.EventType, ok)
	str(`,"machine_id":`, e.MachineID)
	str(`,"parent_id":`, e.ParentID)
	str(`,"prev_hash":`, e.PrevHash)
	b = append(b, `,"raw":`...)
	var canonRaw []byte
	switch {
	case len(e.Raw) == 0:
		canonRaw = []byte("null")
	case isCanonicalJSON(e.Raw):
		canonRaw = e.Raw
	default:
		c, err := canonicalJSON(e.Raw)
		if err != nil {
			return b, nil, false
		}
		canonRaw = c
	}
	b = append(b, canonRaw...)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, e.Sequence, 10)
	str(`,"signature":`, e.Signature)
	str(`,"signature_key":`, e.SignatureKey)
	str(`,"tool":`, e.Tool)
	str(`,"ts":`, e.TS)
	b = append(b, '}')
	return b, canonRaw, ok
}

func appendJCSStringAnd(b []byte, s string, ok bool) ([]byte, bool) {
	b, good := appendJCSString(b, s)
	return b, ok && good
}

// appendJCSString writes s as an RFC 8785 string: only '"', '\\' and control
// characters are escaped (\b \t \n \f \r by name, others as \u00xx). It
// reports false for invalid UTF-8, which encoding/json would have altered.
func appendJCSString(b []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return b, false
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20:
			b = append(b, c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	return append(b, '"'), true
}

// maxFastDepth bounds the nesting isCanonicalJSON follows; deeper documents
// take jcs, which has its own (larger) limit.
const maxFastDepth = 64

// isCanonicalJSON reports whether b is certainly already in RFC 8785 form, so
// jcs.Transform(b) would return b unchanged. It accepts a strict subset and
// answers false whenever in doubt: no whitespace; object keys of printable
// ASCII without escapes, strictly increasing (so bytewise order is UTF-16
// order and keys are unique); strings in valid UTF-8 escaping exactly what
// RFC 8785 escapes, as it escapes it; numbers only integers of at most 15
// digits (exactly representable, printed as themselves); bounded nesting.
func isCanonicalJSON(b []byte) bool {
	i, ok := canonValue(b, 0, 0)
	return ok && i == len(b)
}

func canonValue(b []byte, i, depth int) (int, bool) { return scanFastValue(b, i, depth, true) }

// scanFastValue scans the value at b[i] if it is in the subset
// isCanonicalJSON accepts — with its objects' keys in any order unless
// sorted — and returns where it ends.
func scanFastValue(b []byte, i, depth int, sorted bool) (int, bool) {
	if i >= len(b) || depth > maxFastDepth {
		return i, false
	}
	switch c := b[i]; {
	case c == '{':
		i++
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		var prev []byte
		for {
			start := i
			end, ok := canonKey(b, i)
			if !ok {
				return i, false
			}
			key := b[start+1 : end-1]
			if sorted && prev != nil && bytes.Compare(prev, key) >= 0 {
				return i, false
			}
			prev = key
			if end >= len(b) || b[end] != ':' {
				return i, false
			}
			if i, ok = scanFastValue(b, end+1, depth+1, sorted); !ok || i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i++
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '[':
		i++
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = scanFastValue(b, i, depth+1, sorted); !ok || i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i++
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '"':
		return canonString(b, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return canonInteger(b, i)
	case bytes.HasPrefix(b[i:], []byte("true")):
		return i + 4, true
	case bytes.HasPrefix(b[i:], []byte("false")):
		return i + 5, true
	case bytes.HasPrefix(b[i:], []byte("null")):
		return i + 4, true
	}
	return i, false
}

// canonicalJSON is jcs.Transform(b), by way of sortedCanonical when b is in
// the subset isCanonicalJSON accepts but for its keys' order (what
// encoding/json writes for a struct, and most clients' raws).
func canonicalJSON(b []byte) ([]byte, error) {
	if out, ok := sortedCanonical(b); ok {
		return out, nil
	}
	return jcs.Transform(b)
}

// sortedCanonical returns the RFC 8785 form of b when b is in the subset
// isCanonicalJSON accepts except that object keys may come in any order:
// the same document with each object's members sorted by key. Keys there
// are escape-free printable ASCII, so byte order is RFC 8785's UTF-16
// order; a key twice, or anything outside the subset, answers false.
// FuzzSortedCanonical holds it to jcs.Transform.
func sortedCanonical(b []byte) ([]byte, bool) {
	end, ok := scanFastValue(b, 0, 0, false)
	if !ok || end != len(b) {
		return nil, false
	}
	out, _, ok := appendSortedValue(make([]byte, 0, len(b)), b, 0)
	return out, ok
}

// fastMember is one member of an object being sorted: its key and where its
// value starts, in the input.
type fastMember struct {
	key   []byte
	value int
}

// appendSortedValue appends the value at b[i], already scanned by
// scanFastValue, with its objects' members sorted; it returns where the
// value ends in b.
func appendSortedValue(dst, b []byte, i int) ([]byte, int, bool) {
	switch b[i] {
	case '{':
		var members []fastMember
		j := i + 1
		if b[j] == '}' {
			return append(dst, '{', '}'), j + 1, true
		}
		for {
			end, _ := canonKey(b, j)
			next, _ := scanFastValue(b, end+1, 1, false)
			members = append(members, fastMember{key: b[j+1 : end-1], value: end + 1})
			j = next + 1
			if b[next] == '}' {
				break
			}
		}
		slices.SortFunc(members, func(x, y fastMember) int { return bytes.Compare(x.key, y.key) })
		dst = append(dst, '{')
		for k, m := range members {
			if k > 0 {
				if bytes.Equal(members[k-1].key, m.key) {
					return dst, 0, false
				}
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = append(dst, m.key...)
			dst = append(dst, '"', ':')
			var ok bool
			if dst, _, ok = appendSortedValue(dst, b, m.value); !ok {
				return dst, 0, false
			}
		}
		return append(dst, '}'), j, true
	case '[':
		j := i + 1
		if b[j] == ']' {
			return append(dst, '[', ']'), j + 1, true
		}
		dst = append(dst, '[')
		for {
			var ok bool
			if dst, j, ok = appendSortedValue(dst, b, j); !ok {
				return dst, 0, false
			}
			if b[j] == ']' {
				return append(dst, ']'), j + 1, true
			}
			dst = append(dst, ',')
			j++
		}
	}
	end, _ := scanFastValue(b, i, 1, false)
	return append(dst, b[i:end]...), end, true
}

// canonKey accepts a string of printable ASCII other than '"' and '\\'.
func canonKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return i, false
		}
	}
	return i, false
}

func canonString(b []byte, i int) (int, bool) {
	for i++; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				// Only controls without a short form, as \u00xx in lowercase.
				if i+6 > len(b) || b[i+2] != '0' || b[i+3] != '0' || (b[i+4] != '0' && b[i+4] != '1') {
					return i, false
				}
				d := b[i+5]
				var v byte
				switch {
				case d >= '0' && d <= '9':
					v = d - '0'
				case d >= 'a' && d <= 'f':
					v = d - 'a' + 10
				default:
					return i, false
				}
				v += (b[i+4] - '0') << 4
				if v == '\b' || v == '\t' || v == '\n' || v == '\f' || v == '\r' {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, false
			}
			i += size
		}
	}
	return i, false
}

func canonInteger(b []byte, i int) (int, bool) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	n := i - digits
	switch {
	case n == 0 || n > 15:
		return i, false
	case b[digits] == '0' && (n > 1 || digits > start): // leading zero, or -0
		return i, false
	case i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E'):
		return i, false
	}
	return i, true
}

// RFC 8785 helpers for callers that build canonical JSON around values they
// already hold in canonical form (the service's dedup keys, clients' hashes).

// AppendJCSString appends s as an RFC 8785 string. It reports false, having
// appended nothing useful, for invalid UTF-8 (which RFC 8785 cannot carry).
func AppendJCSString(b []byte, s string) ([]byte, bool) { return appendJCSString(b, s) }

// CanonicalMember returns the value of the member key of the object b when b
// is certainly RFC 8785 canonical (isCanonicalJSON: jcs.Transform would leave
// it unchanged); that value is then in
// canonical form too. known is false when b is not known to be canonical (the
// caller must decide some other way); present is false when b is canonical
// but not an object or has no such member.
func CanonicalMember(b []byte, key string) (value []byte, present, known bool) {
	if !isCanonicalJSON(b) {
		return nil, false, false
	}
	if len(b) < 2 || b[0] != '{' || b[1] == '}' {
		return nil, false, true
	}
	// Canonical: no whitespace, keys are escape-free ASCII (isCanonicalJSON),
	// each followed by ':' and a value, members separated by ','.
	i := 1
	for i < len(b) {
		end, _ := canonKey(b, i)
		name := b[i+1 : end-1]
		next, _ := canonValue(b, end+1, 1)
		if string(name) == key {
			return b[end+1 : next], true, true
		}
		if b[next] == '}' {
			break
		}
		i = next + 1
	}
	return nil, false, true
}
