package httpapi

// The one reader of request bodies (docs/decisions/strict-input.md). Every
// route's body goes through readInput against the Go type the route
// decodes into, before anything is written:
//
//   - the body is one JSON value (RFC 8259), nested at most maxNesting deep;
//   - every string, keys included, obeys the text rule (domain.CheckText):
//     valid UTF-8, no U+0000, no \u escape of a lone surrogate (which
//     encoding/json would silently turn into U+FFFD);
//   - an object read into a struct has exactly its json keys, each once: an
//     unknown key, a key in another case ("Kind" for "kind", which
//     encoding/json would take) and a key given twice are refused;
//   - every value has its field's JSON type (an integer field takes an
//     integer that fits), and text and lists fit their `max` tags.
//
// A field of type json.RawMessage or any (an event's raw, a policy test's
// tool_input) is the client's own JSON: only the text rule applies inside
// it. Problems are named by the field's path ("subject.subagent",
// "events[2].tool"). Only then does encoding/json decode the body, which it
// then reads exactly as checked.
//
// The fast path of event appends (eventjson.go) takes the usual shape of
// an event without this reader and encoding/json; where it takes a body, the
// result is what this reader gives (FuzzEventJSON, FuzzBatchJSON).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/auditchain/auditchain/internal/domain"
)

// validator is implemented by request bodies that check their own fields.
type validator interface {
	validate() []domain.FieldError
}

// decode reads a JSON body strictly into T: the content type must be JSON, the
// body must fit maxBytes, and readInput's rules hold. An empty body decodes to
// the zero T only when optional.
func decode[T any](r *http.Request, maxBytes int64, optional bool) (T, error) {
	return decodeAs[T](r, maxBytes, optional, nil)
}

// decodeAs is decode for a route that answers the reader's problems with its
// own code (refuse; nil: inputProblem.err).
func decodeAs[T any](r *http.Request, maxBytes int64, optional bool, refuse func(*inputProblem) error) (T, error) {
	var v T
	body, err := readJSONBody(r, maxBytes, optional)
	if err != nil || body == nil {
		return v, err
	}
	return decodeBody[T](body, refuse)
}

// readJSONBody reads a JSON request body within maxBytes; nil without error
// when the body is empty (or null) and optional.
func readJSONBody(r *http.Request, maxBytes int64, optional bool) ([]byte, error) {
	body, err := readBody(r, maxBytes)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 || (optional && bytes.Equal(bytes.TrimSpace(body), []byte("null"))) {
		if optional {
			return nil, nil
		}
		return nil, &domain.Error{Code: domain.CodeMalformedJSON, Detail: "a JSON object body is required"}
	}
	if err := checkJSONContentType(r); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeBody decodes body strictly into T and runs T's own checks; refuse
// (nil: inputProblem.err) answers what the reader finds.
func decodeBody[T any](body []byte, refuse func(*inputProblem) error) (T, error) {
	var v T
	if p := readInput(body, reflect.TypeFor[T]()); p != nil {
		if refuse != nil {
			return v, refuse(p)
		}
		return v, p.err()
	}
	if err := json.Unmarshal(body, &v); err != nil {
		// readInput let through what encoding/json refuses: a bug here.
		return v, fmt.Errorf("decode %T after the strict read: %w", v, err)
	}
	if val, ok := any(&v).(validator); ok {
		if fields := val.validate(); len(fields) > 0 {
			return v, domain.Validation(fields...)
		}
	}
	return v, nil
}

func readBody(r *http.Request, maxBytes int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(maxBytes)
		}
		return nil, &domain.Error{Code: domain.CodeMalformedJSON, Detail: "the request body could not be read"}
	}
	if int64(len(body)) > maxBytes {
		return nil, tooLarge(maxBytes)
	}
	return body, nil
}

func tooLarge(max int64) *domain.Error {
	return (&domain.Error{Code: domain.CodeBodyTooLarge,
		Detail: fmt.Sprintf("the request body is larger than %d bytes", max)}).With("limit_bytes", max)
}

func checkJSONContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return &domain.Error{Code: domain.CodeUnsupportedMedia,
		Detail: "send the body as Content-Type: application/json"}
}

// ---- the reader ---------------------------------------------------------------

// inputKind classes what readInput found wrong.
type inputKind int

const (
	inputSyntax    inputKind = iota // not one JSON value
	inputText                       // a string breaks the text rule
	inputDuplicate                  // a key given twice
	inputUnknown                    // a key the type does not have
	inputCase                       // a key the type has in another case
	inputType                       // a value of the wrong JSON type
	inputTooLong                    // text or a list over its cap
)

// fatal reports whether the problem concerns the body as a whole (it is not
// one JSON text with each name once), rather than a value's fit to its field.
func (k inputKind) fatal() bool { return k <= inputDuplicate }

// inputProblem is the first thing readInput found wrong, named by its field.
type inputProblem struct {
	kind    inputKind
	field   string // the path of the field ("" for the body itself)
	key     string // for key problems: the key as sent
	meant   string // for inputCase: the key the type has
	message string
	got     string // for inputType: what was sent ("a string", ...)
}

// err is the problem as most routes answer it: 400 malformed_json for a body
// that is not JSON, otherwise 422 validation_error naming the field.
func (p *inputProblem) err() *domain.Error {
	if p.kind == inputSyntax {
		return &domain.Error{Code: domain.CodeMalformedJSON, Detail: p.message}
	}
	return domain.Validation(domain.FieldError{Field: p.field, Message: p.message})
}

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
