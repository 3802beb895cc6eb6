package httpapi

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/domain"
)

// readerProbe is a body with every kind of field the reader knows.
type readerProbe struct {
	Name  *string         `json:"name" max:"name"`
	Note  *string         `json:"note" max:"note"`
	Count *int64          `json:"count"`
	Small *int8           `json:"small"`
	Flag  *bool           `json:"flag"`
	Tags  []string        `json:"tags" max:"list" each:"name"`
	Raw   json.RawMessage `json:"raw"`
	Inner *struct {
		Kind *string `json:"kind" max:"name"`
	} `json:"inner"`
	Rows []struct {
		ID *string `json:"id"`
	} `json:"rows"`
}

// The reader refuses each class of bad input and names the field; what it
// takes, encoding/json then decodes alike.
func TestReadInput(t *testing.T) {
	long := strings.Repeat("x", 257)
	for _, tc := range []struct {
		name  string
		body  string
		kind  inputKind
		field string
		ok    bool
	}{
		{name: "all fields", body: `{"name":"a","note":"b","count":-3,"small":127,"flag":true,"tags":["x"],"raw":{"a":[1,"\u00e9"],"a":2},"inner":{"kind":"k"},"rows":[{"id":"1"}]}`, ok: true},
		{name: "nulls read as absent", body: `{"name":null,"count":null,"tags":null,"inner":null,"raw":null}`, ok: true},
		{name: "a surrogate pair", body: `{"name":"\ud83d\ude00"}`, ok: true},
		{name: "an escaped backslash before u0000", body: `{"name":"\\u0000"}`, ok: true},
		{name: "UTF-8", body: `{"name":"répertoire"}`, ok: true},
		{name: "a name at its cap", body: `{"name":"` + long[:256] + `"}`, ok: true},

		{name: "not JSON", body: `{"name":`, kind: inputSyntax},
		{name: "trailing data", body: `{} {}`, kind: inputSyntax},
		{name: "trailing comma", body: `{"name":"a",}`, kind: inputSyntax},
		{name: "a control character", body: "{\"name\":\"a\tb\"}", kind: inputSyntax},
		{name: "a bad escape", body: `{"name":"\x"}`, kind: inputSyntax},
		{name: "a leading zero", body: `{"count":01}`, kind: inputSyntax},

		{name: "NUL", body: `{"name":"a\u0000"}`, kind: inputText, field: "name"},
		{name: "NUL in a list", body: `{"tags":["a","\u0000"]}`, kind: inputText, field: "tags[1]"},
		{name: "NUL in raw", body: `{"raw":{"a":{"b":["\u0000"]}}}`, kind: inputText, field: "raw.a.b[0]"},
		{name: "NUL in a nested key", body: `{"inner":{"k\u0000":1}}`, kind: inputText, field: `inner.k\u0000`},
		{name: "invalid UTF-8", body: "{\"name\":\"coll\xff\"}", kind: inputText, field: "name"},
		{name: "invalid UTF-8 in raw", body: "{\"raw\":\"\xc3\"}", kind: inputText, field: "raw"},
		{name: "invalid UTF-8 in a key", body: "{\"n\xffame\":1}", kind: inputText, field: "n\ufffdame"},
		{name: "a lone high surrogate", body: `{"name":"\ud800x"}`, kind: inputText, field: "name"},
		{name: "a lone low surrogate", body: `{"inner":{"kind":"\udc00"}}`, kind: inputText, field: "inner.kind"},
		{name: "a high surrogate and no low one", body: `{"name":"\ud800\u0041"}`, kind: inputText, field: "name"},

		{name: "a key twice", body: `{"name":"a","name":"b"}`, kind: inputDuplicate, field: "name"},
		{name: "a nested key twice", body: `{"rows":[{"id":"1","id":"2"}]}`, kind: inputDuplicate, field: "rows[0].id"},
		{name: "a key in another case", body: `{"Name":"a"}`, kind: inputCase, field: "Name"},
		{name: "a nested key in another case", body: `{"inner":{"KIND":"a"}}`, kind: inputCase, field: "inner.KIND"},
		{name: "an unknown key", body: `{"nom":"a"}`, kind: inputUnknown, field: "nom"},

		{name: "a number for a string", body: `{"name":1}`, kind: inputType, field: "name"},
		{name: "a string for an integer", body: `{"count":"1"}`, kind: inputType, field: "count"},
		{name: "a fraction for an integer", body: `{"count":1.5}`, kind: inputType, field: "count"},
		{name: "an exponent for an integer", body: `{"count":1e2}`, kind: inputType, field: "count"},
		{name: "an integer over 64 bits", body: `{"count":9223372036854775808}`, kind: inputType, field: "count"},
		{name: "an integer over 8 bits", body: `{"small":128}`, kind: inputType, field: "small"},
		{name: "a string for a boolean", body: `{"flag":"true"}`, kind: inputType, field: "flag"},
		{name: "an object for a list", body: `{"tags":{}}`, kind: inputType, field: "tags"},
		{name: "a number in a list of strings", body: `{"tags":[1]}`, kind: inputType, field: "tags[0]"},
		{name: "an array for an object", body: `{"inner":[]}`, kind: inputType, field: "inner"},
		{name: "not an object", body: `[1]`, kind: inputType, field: ""},

		{name: "a name over its cap", body: `{"name":"` + long + `"}`, kind: inputTooLong, field: "name"},
		{name: "escapes counted decoded", body: `{"name":"` + strings.Repeat(`\u00e9`, 129) + `"}`, kind: inputTooLong, field: "name"},
		{name: "a note over its cap", body: `{"note":"` + strings.Repeat("n", 4097) + `"}`, kind: inputTooLong, field: "note"},
		{name: "a list item over its cap", body: `{"tags":["` + long + `"]}`, kind: inputTooLong, field: "tags[0]"},
		{name: "a list over its cap", body: `{"tags":[` + strings.Repeat(`"t",`, 256) + `"t"]}`, kind: inputTooLong, field: "tags"},

		{name: "nested to encoding/json's limit", body: `{"raw":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`, ok: true},
		{name: "nested deeper", body: `{"raw":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, kind: inputSyntax},

		// A fatal problem anywhere wins over a value's problem before it.
		{name: "NUL after a wrong type", body: `{"count":"x","name":"\u0000"}`, kind: inputText, field: "name"},
		{name: "a duplicate after an unknown key", body: `{"nom":1,"rows":[{"id":"1","id":"2"}]}`, kind: inputDuplicate, field: "rows[0].id"},
		{name: "syntax after a wrong type", body: `{"count":"x",}`, kind: inputSyntax},
		// Inside an unknown key's value, only the text rule.
		{name: "NUL inside an unknown key", body: `{"nom":{"a":"\u0000"}}`, kind: inputText, field: "nom.a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := readInput([]byte(tc.body), reflect.TypeFor[readerProbe]())
			if tc.ok {
				if p != nil {
					t.Fatalf("refused: %+v", *p)
				}
				var want readerProbe
				if err := json.Unmarshal([]byte(tc.body), &want); err != nil {
					t.Fatalf("the reader took what encoding/json refuses: %v", err)
				}
				return
			}
			if p == nil {
				t.Fatal("taken")
			}
			if p.kind != tc.kind || (tc.kind != inputSyntax && p.field != tc.field) {
				t.Fatalf("problem %+v, want kind %d naming %q", *p, tc.kind, tc.field)
			}
			if p.message == "" {
				t.Fatal("no message")
			}
		})
	}
}

// A batch whose rows do not all read as events is read row by row; a fatal
// problem in any row, or one at the top level, refuses the whole body.
func TestDecodeBatch(t *testing.T) {
	row := `{"event_id":"evt-1","event_type":"t","sequence":1}`
	for _, tc := range []struct {
		name       string
		body       string
		rows       int
		unreadable map[int]string // index → field
		refused    string         // field named by a refusal of the whole body
	}{
		{name: "rows that read", body: `{"events":[` + row + `,` + row + `]}`, rows: 2},
		{name: "an escape takes the reader's path", body: `{"events":[{"tool":"a\"b"}]}`, rows: 1},
		{name: "a row with a wrong type", body: `{"events":[` + row + `,{"sequence":"1"},{"Tool":"x"}]}`, rows: 3,
			unreadable: map[int]string{1: "sequence", 2: "Tool"}},
		{name: "a row that is no object", body: `{"events":[7]}`, rows: 1, unreadable: map[int]string{0: ""}},
		{name: "NUL in a row", body: `{"events":[` + row + `,{"tool":"\u0000"}]}`, refused: "events[1].tool"},
		{name: "NUL after a bad row", body: `{"events":[{"sequence":"1"},{"tool":"\u0000"}]}`, refused: "events[1].tool"},
		{name: "a key twice in a row", body: `{"events":[{"tool":"a","tool":"b"}]}`, refused: "events[0].tool"},
		{name: "Events", body: `{"Events":[]}`, refused: "Events"},
		{name: "events twice", body: `{"events":[],"events":[]}`, refused: "events"},
		{name: "an unknown key beside a bad row", body: `{"events":[{"sequence":"1"}],"other":1}`, refused: "other"},
		{name: "no events", body: `{"client_machine":"m"}`, refused: "events"},
		{name: "a client_machine over its cap", body: `{"client_machine":"` + strings.Repeat("m", 257) + `","events":[]}`, refused: "client_machine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rows, unreadable, err := decodeBatch([]byte(tc.body))
			if tc.refused != "" {
				de := asDomainError(t, err)
				if len(de.Fields) != 1 || de.Fields[0].Field != tc.refused {
					t.Fatalf("refusal %+v, want one naming %q", de, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != tc.rows || len(unreadable) != len(tc.unreadable) {
				t.Fatalf("%d rows, unreadable %v; want %d, %v", len(rows), unreadable, tc.rows, tc.unreadable)
			}
			for i, field := range tc.unreadable {
				if unreadable[i].Field != field || unreadable[i].Message == "" {
					t.Fatalf("row %d: %+v, want field %q", i, unreadable[i], field)
				}
			}
		})
	}
}

func asDomainError(t *testing.T, err error) *domain.Error {
	t.Helper()
	var de *domain.Error
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want a domain error", err)
	}
	return de
}
