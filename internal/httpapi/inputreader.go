package httpapi

// readInput, the strict reader behind decode (decode.go): it walks a body
// once against the Go type a route decodes into and names the first thing
// that breaks the rules listed at the top of decode.go, before encoding/json
// sees the body.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/auditchain/auditchain/internal/domain"
)

// maxNesting is encoding/json's own limit on nesting.
const maxNesting = 10000

// readInput checks body against readInput's rules for type t and returns the
// problem to answer, or nil. A fatal problem (inputKind.fatal) anywhere in the
// body wins over a value's problem found earlier, so that a caller reading a
// list's items one by one (the batch) knows the body is well formed.
func readInput(body []byte, t reflect.Type) *inputProblem {
	in := &inputReader{jsonScan: jsonScan{b: body}}
	in.space()
	in.value(t, fieldCaps{}, nil)
	if in.fatal == nil {
		if in.space(); in.i < len(in.b) {
			in.fail(inputSyntax, nil, "", "unexpected data after the JSON value")
		}
	}
	if in.fatal != nil {
		return in.fatal
	}
	return in.first
}

// inputReader walks one body. After a value's problem it goes on reading,
// as free JSON, to find any fatal problem later in the body.
type inputReader struct {
	jsonScan // the body and the position, as the fast path reads them
	depth    int
	first    *inputProblem // the first problem of any kind
	fatal    *inputProblem // the first fatal problem
}

// pathElem is one step of a field's path: a key, or an index of a list.
type pathElem struct {
	parent  *pathElem
	key     string
	index   int
	isIndex bool
}

func (p *pathElem) String() string {
	if p == nil {
		return ""
	}
	prefix := p.parent.String()
	switch {
	case p.isIndex:
		return prefix + "[" + strconv.Itoa(p.index) + "]"
	case prefix == "":
		return p.key
	}
	return prefix + "." + p.key
}

// badKeyName names a key that breaks the text rule by its bytes as sent
// (escapes kept), made printable.
func badKeyName(raw []byte) string {
	return strings.ToValidUTF8(string(raw), "\ufffd")
}

func (in *inputReader) report(p *inputProblem) {
	if in.first == nil {
		in.first = p
	}
	if p.kind.fatal() && in.fatal == nil {
		in.fatal = p
	}
}

func (in *inputReader) fail(kind inputKind, path *pathElem, key, message string) {
	in.report(&inputProblem{kind: kind, field: path.String(), key: key, message: message})
}

// fieldCaps are a field's `max` (bytes of text, items of a list) and `each`
// (bytes of each text item of a list) caps, named in its tags (domain.Cap);
// 0 is no cap.
type fieldCaps struct{ max, each int }

// structInfo is a struct type's json keys.
type structInfo struct {
	fields map[string]structField
	folded map[string]string // lower-case key → key
}

type structField struct {
	typ  reflect.Type
	caps fieldCaps
}

var structInfos sync.Map // reflect.Type → *structInfo

func infoOf(t reflect.Type) *structInfo {
	if v, ok := structInfos.Load(t); ok {
		return v.(*structInfo)
	}
	si := &structInfo{fields: map[string]structField{}, folded: map[string]string{}}
	addFields(si, t)
	structInfos.Store(t, si)
	return si
}

// tagCap resolves a field's cap tag by its name in domain.Cap.
func tagCap(t reflect.Type, f reflect.StructField, tag string) int {
	name, ok := f.Tag.Lookup(tag)
	if !ok {
		return 0
	}
	n := domain.Cap(name)
	if n == 0 {
		panic(fmt.Sprintf("%s.%s: %s tag %q names no cap", t, f.Name, tag, name))
	}
	return n
}

// addFields adds t's json keys to si, those of embedded structs as
// encoding/json promotes them.
func addFields(si *structInfo, t reflect.Type) {
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			addFields(si, f.Type)
			continue
		}
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		caps := fieldCaps{max: tagCap(t, f, "max"), each: tagCap(t, f, "each")}
		si.fields[name] = structField{typ: f.Type, caps: caps}
		si.folded[strings.ToLower(name)] = name
	}
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	unmarshalerT   = reflect.TypeFor[json.Unmarshaler]()
)

// value reads one value of type t (nil: free JSON) at path.
func (in *inputReader) value(t reflect.Type, caps fieldCaps, path *pathElem) {
	if in.fatal != nil {
		return
	}
	if in.i >= len(in.b) {
		in.fail(inputSyntax, path, "", "the body is not valid JSON: it ends too soon")
		return
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t == rawMessageType || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerT)) {
		t = nil // the client's own JSON
	}
	c := in.b[in.i]
	if c == 'n' {
		in.literal("null", path)
		return // null reads as absent, whatever the field
	}
	want := jsonKindOf(t)
	if got := kindOfByte(c); t != nil && got != "" && want != got && !(got == "a number" && want == "an integer") {
		in.report(&inputProblem{kind: inputType, field: path.String(), got: got, message: "must be " + want + ", got " + got})
		t = nil // read on as free JSON
	}
	switch c {
	case '{':
		in.object(t, path)
	case '[':
		in.array(t, caps, path)
	case '"':
		n, ok := in.str(path)
		if ok && t != nil && caps.max > 0 && n > caps.max {
			in.fail(inputTooLong, path, "", fmt.Sprintf("must be at most %d bytes, got %d", caps.max, n))
		}
	case 't':
		in.literal("true", path)
	case 'f':
		in.literal("false", path)
	default:
		in.number(t, path)
	}
}

// jsonKindOf names the JSON type a Go type reads ("" for free JSON).
func jsonKindOf(t reflect.Type) string {
	if t == nil {
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

func kindOfByte(c byte) string {
	switch {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '-' || '0' <= c && c <= '9':
		return "a number"
	}
	return "" // not JSON: the value's reader says so
}

func (in *inputReader) literal(word string, path *pathElem) {
	if !bytes.HasPrefix(in.b[in.i:], []byte(word)) {
		in.fail(inputSyntax, path, "", "the body is not valid JSON")
		return
	}
	in.i += len(word)
}

// number reads a JSON number; an integer field takes an integer within its
// type's bits, as encoding/json does.
func (in *inputReader) number(t reflect.Type, path *pathElem) {
	start := in.i
	if !in.integerPart() {
		in.fail(inputSyntax, path, "", "the body is not valid JSON")
		return
	}
	integer := true
	if in.i < len(in.b) && in.b[in.i] == '.' {
		integer = false
		in.i++
		if !in.digits() {
			in.fail(inputSyntax, path, "", "the body is not valid JSON")
			return
		}
	}
	if in.i < len(in.b) && (in.b[in.i] == 'e' || in.b[in.i] == 'E') {
		integer = false
		in.i++
		if in.i < len(in.b) && (in.b[in.i] == '+' || in.b[in.i] == '-') {
			in.i++
		}
		if !in.digits() {
			in.fail(inputSyntax, path, "", "the body is not valid JSON")
			return
		}
	}
	if t == nil {
		return
	}
	text := string(in.b[start:in.i])
	var err error
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if !integer {
			err = errors.New("not an integer")
		} else {
			_, err = strconv.ParseInt(text, 10, t.Bits())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !integer {
			err = errors.New("not an integer")
		} else {
			_, err = strconv.ParseUint(text, 10, t.Bits())
		}
	case reflect.Float32, reflect.Float64:
		_, err = strconv.ParseFloat(text, t.Bits())
	}
	if err != nil {
		in.report(&inputProblem{kind: inputType, field: path.String(), got: text,
			message: fmt.Sprintf("must be %s within %d bits, got %s", jsonKindOf(t), t.Bits(), text)})
	}
}

func (in *inputReader) digits() bool {
	start := in.i
	for in.i < len(in.b) && in.b[in.i] >= '0' && in.b[in.i] <= '9' {
		in.i++
	}
	return in.i > start
}

// str reads a string at path under the text rule and returns its decoded
// length in bytes.
func (in *inputReader) str(path *pathElem) (int, bool) {
	_, n, ok := in.readString(path, false, false)
	return n, ok
}

// readString reads a JSON string; with decode it also returns its value. A
// key (isKey) that breaks the text rule is named as a field of path.
func (in *inputReader) readString(path *pathElem, decode, isKey bool) (string, int, bool) {
	in.i++ // the opening quote
	start := in.i
	if isKey {
		if end := stringEnd(in.b, start); end >= 0 {
			path = &pathElem{parent: path, key: badKeyName(in.b[start:end])}
		}
	}
	var buf []byte
	n := 0
	ascii := true
	for in.i < len(in.b) {
		c := in.b[in.i]
		switch {
		case c == '"':
			raw := in.b[start:in.i]
			in.i++
			if !ascii && !utf8.Valid(raw) {
				in.fail(inputText, path, "", domain.TextRuleMessage)
				return "", 0, false
			}
			if buf != nil {
				return string(buf), n, true
			}
			if decode {
				return string(raw), n, true
			}
			return "", n, true
		case c < 0x20:
			in.fail(inputSyntax, path, "", "the body is not valid JSON: a control character in a string")
			return "", 0, false
		case c == '\\':
			if buf == nil {
				buf = append([]byte(nil), in.b[start:in.i]...)
			}
			r, ok := in.escape(path)
			if !ok {
				return "", 0, false
			}
			buf = utf8.AppendRune(buf, r)
			n += utf8.RuneLen(r)
			continue
		case c >= utf8.RuneSelf:
			ascii = false
		}
		if buf != nil {
			buf = append(buf, c)
		}
		n++
		in.i++
	}
	in.fail(inputSyntax, path, "", "the body is not valid JSON: a string does not end")
	return "", 0, false
}

// stringEnd is the index of the quote ending the string whose text starts
// at start, or -1.
func stringEnd(b []byte, start int) int {
	for i := start; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// escape reads one escape sequence (at the backslash) and returns its rune;
// \u0000 and lone surrogates break the text rule.
func (in *inputReader) escape(path *pathElem) (rune, bool) {
	if in.i+1 >= len(in.b) {
		in.fail(inputSyntax, path, "", "the body is not valid JSON")
		return 0, false
	}
	c := in.b[in.i+1]
	in.i += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'u':
		r, ok := in.hex4()
		if !ok {
			in.fail(inputSyntax, path, "", "the body is not valid JSON: a bad \\u escape")
			return 0, false
		}
		if utf16.IsSurrogate(r) {
			// Only a high surrogate followed by a low one is text.
			if r < 0xdc00 && in.i+1 < len(in.b) && in.b[in.i] == '\\' && in.b[in.i+1] == 'u' {
				save := in.i
				in.i += 2
				if lo, ok := in.hex4(); ok && lo >= 0xdc00 && lo <= 0xdfff {
					return utf16.DecodeRune(r, lo), true
				}
				in.i = save
			}
			in.fail(inputText, path, "", domain.TextRuleMessage)
			return 0, false
		}
		if r == 0 {
			in.fail(inputText, path, "", domain.TextRuleMessage)
			return 0, false
		}
		return r, true
	}
	in.fail(inputSyntax, path, "", "the body is not valid JSON: a bad escape")
	return 0, false
}

func (in *inputReader) hex4() (rune, bool) {
	r, ok := hexRune(in.b[in.i:])
	if ok {
		in.i += 4
	}
	return r, ok
}

// object reads an object: into a struct's exact keys when t is a struct, a
// map's keys (each once) when a map, free JSON when nil.
func (in *inputReader) object(t reflect.Type, path *pathElem) {
	var si *structInfo
	var elem reflect.Type
	var seen map[string]bool
	if t != nil {
		seen = map[string]bool{}
		if t.Kind() == reflect.Struct {
			si = infoOf(t)
		} else {
			elem = t.Elem()
		}
	}
	if !in.enter(path, '}') {
		return
	}
	for {
		in.space()
		if in.i >= len(in.b) || in.b[in.i] != '"' {
			in.fail(inputSyntax, path, "", "the body is not valid JSON: an object key must be a string")
			return
		}
		key, _, ok := in.readString(path, true, true)
		if !ok {
			return
		}
		keyPath := &pathElem{parent: path, key: key}
		in.space()
		if in.i >= len(in.b) || in.b[in.i] != ':' {
			in.fail(inputSyntax, path, "", "the body is not valid JSON: a key without a value")
			return
		}
		in.i++
		in.space()
		var vt reflect.Type
		var caps fieldCaps
		switch {
		case t == nil:
		case seen[key]:
			in.report(&inputProblem{kind: inputDuplicate, field: keyPath.String(), key: key, message: "appears more than once"})
		case si != nil:
			seen[key] = true
			if f, ok := si.fields[key]; ok {
				vt, caps = f.typ, f.caps
			} else if meant, ok := si.folded[strings.ToLower(key)]; ok {
				in.report(&inputProblem{kind: inputCase, field: keyPath.String(), key: key, meant: meant,
					message: fmt.Sprintf("unknown field %q: keys are case-sensitive; the key is %q", key, meant)})
			} else {
				in.report(&inputProblem{kind: inputUnknown, field: keyPath.String(), key: key, message: "unknown field"})
			}
		default:
			seen[key] = true
			vt = elem
		}
		in.value(vt, caps, keyPath)
		if in.fatal != nil || !in.more(path, '}') {
			return
		}
	}
}

// array reads an array of t's elements (free JSON when t is nil).
func (in *inputReader) array(t reflect.Type, caps fieldCaps, path *pathElem) {
	var elem reflect.Type
	if t != nil {
		elem = t.Elem()
	}
	if !in.enter(path, ']') {
		return
	}
	for n := 0; ; n++ {
		in.space()
		if t != nil && caps.max > 0 && n == caps.max {
			in.fail(inputTooLong, path, "", fmt.Sprintf("must hold at most %d items", caps.max))
			elem = nil
		}
		in.value(elem, fieldCaps{max: caps.each}, &pathElem{parent: path, index: n, isIndex: true})
		if in.fatal != nil || !in.more(path, ']') {
			return
		}
	}
}

// enter takes the opening bracket of an object or array at path and reports
// whether a member follows: false for an empty one (taken whole, up to end)
// and for one nested too deeply.
func (in *inputReader) enter(path *pathElem, end byte) bool {
	if in.depth == maxNesting {
		in.fail(inputSyntax, path, "", "the body is nested too deeply")
		return false
	}
	in.depth++
	in.i++
	in.space()
	if in.i < len(in.b) && in.b[in.i] == end {
		in.i++
		in.depth--
		return false
	}
	return true
}

// more reads what follows a member: true after a comma (another member
// follows), false after end (taken: the container is done) or anything else
// (not JSON).
func (in *inputReader) more(path *pathElem, end byte) bool {
	in.space()
	switch {
	case in.i < len(in.b) && in.b[in.i] == ',':
		in.i++
		return true
	case in.i < len(in.b) && in.b[in.i] == end:
		in.i++
		in.depth--
		return false
	}
	in.fail(inputSyntax, path, "", fmt.Sprintf("the body is not valid JSON: expected , or %c", end))
	return false
}
