package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/httpapi"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// strictCase is what TestStrictInputEveryRoute needs to know of a route
// beyond the route table and the OpenAPI document.
type strictCase struct {
	// body is a valid JSON object body ("": the route takes none). Every
	// key and value in it is probed.
	body string
	// query holds valid values of the parameters a probe of another one
	// needs (a required parameter); every parameter the OpenAPI document
	// lists is probed.
	query string
	// times are the body fields holding a timestamp.
	times []string
	// free are the body fields holding the client's own JSON (raw,
	// tool_input): inside them only the text rule applies.
	free []string
	// rows is a list field whose items are read one by one (the batch's
	// events): a value or key that does not fit an item's form is answered
	// in the 200's errors for that item, as SPEC.md says, and not stored.
	rows string
	// unbuilt routes answer 501 before reading anything.
	unbuilt bool
}

const (
	validEvent = `{"event_id":"evt-s1","event_type":"tool_call","sequence":0,"raw":{"tool_input":{"cmd_sha256":"ab","args":["x"]}},` +
		`"decision":"allow","tool":"bash","machine_id":"m-strict","parent_id":"evt-s0","signature":"c2ln","signature_key":"k1",` +
		`"ts":"2026-11-21T12:00:00+00:00"}`
	validKey = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
)

// strictCases has one case per route of routes.go: a route without one
// fails TestStrictInputEveryRoute.
var strictCases = map[string]strictCase{
	"GET /v1/health":       {},
	"GET /v1/openapi.json": {},
	"GET /metrics":         {},

	"POST /v1/auth/otp/request": {body: `{"email":"new@example.com","acceptances":[{"document_id":"beta_terms","version":"2026-01-01.1","content_hash":"ab"}]}`},
	"POST /v1/auth/otp/verify":  {body: `{"email":"new@example.com","code":"12345678"}`},
	"POST /v1/auth/logout":      {},
	"GET /v1/auth/session":      {},
	"POST /v1/keys": {body: `{"scopes":["events:read"],"machine":"m1","label":"l","expires_at":"2027-01-01T00:00:00+00:00"}`,
		times: []string{"expires_at"}},
	"GET /v1/keys":                  {},
	"POST /v1/keys/{key_id}/revoke": {},

	"POST /v1/events":        {body: validEvent, times: []string{"ts"}, free: []string{"raw"}},
	"POST /v1/events/append": {body: strings.Replace(validEvent, `"sequence":0,`, "", 1), times: []string{"ts"}, free: []string{"raw"}},
	"POST /v1/events/batch":  {body: `{"client_machine":"m1","events":[` + validEvent + `]}`, times: []string{"events[0].ts"}, free: []string{"events[0].raw"}, rows: "events"},
	"POST /v1/events/search": {body: `{"after":"2026-11-20T00:00:00+00:00","before":"2026-11-22T00:00:00+00:00","cursor":5,"decision":"allow",` +
		`"event_types":["tool_call"],"limit":10,"tool":"bash"}`, times: []string{"after", "before"}},
	"GET /v1/events/stream":                     {},
	"GET /v1/events/{event_id}":                 {},
	"GET /v1/chain/tip":                         {},
	"PUT /v1/machines/{machine_id}/signing-key": {body: `{"public_key":"` + validKey + `"}`},
	"GET /v1/machines":                          {},
	"POST /v1/policy/test":                      {body: `{"tool":"bash","tool_input":{"cmd":"ls","n":[1,{"a":"b"}]},"intent":"fresh","parent_event_id":"evt-0"}`, free: []string{"tool_input"}},

	"GET /v1/chain/blocks":            {},
	"GET /v1/chain/verify":            {},
	"GET /v1/chain/proof/inclusion":   {query: "event_id=evt-0"},
	"GET /v1/chain/proof/consistency": {query: "first=0"},
	"GET /v1/chain/export":            {},

	"GET /v1/grants": {},
	"POST /v1/grants": {body: `{"subagent":"s","expires_at":"2026-11-22T12:00:00+00:00","max_tool_calls":5,"allowed_tools":["bash"],"grant_id":"g-5a","parent_agent":"p"}`,
		times: []string{"expires_at"}},
	"GET /v1/grants/status":             {query: "subagent=s"},
	"POST /v1/grants/{grant_id}/revoke": {body: `{"subagent":"s"}`},
	"POST /v1/grants/{grant_id}/use":    {body: `{"subagent":"s","n":1}`},
	"POST /v1/tool-calls": {body: `{"subagent":"s","tool":"bash","event_id":"evt-tc1","raw":{"input_sha256":"ab"},` +
		`"ts":"2026-11-21T12:00:00+00:00","parent_id":"evt-tc0","no_grant":"allow",` +
		`"results":[{"event_id":"evt-tr0","parent_id":"evt-tc0","tool":"bash","raw":{"result_sha256":"cd"},"ts":"2026-11-21T12:00:00+00:00"}]}`,
		times: []string{"ts", "results[0].ts"}, free: []string{"raw", "results[0].raw"}},
	"GET /v1/delegation/public-key": {},

	"GET /v1/governance/proposals":                       {},
	"POST /v1/governance/proposals":                      {body: `{"kind":"deny_scope","note":"n","evidence":{"blocked_attempts":3,"threshold":3},"subject":{"subagent":"s","tool":"t"}}`},
	"GET /v1/governance/proposals/{proposal_id}":         {},
	"POST /v1/governance/proposals/{proposal_id}/ratify": {body: `{"reason":"r"}`},

	"POST /v1/approval-rules":                            {body: `{"subagent":"s","tool":"*","ttl_seconds":60}`},
	"GET /v1/approval-rules":                             {},
	"DELETE /v1/approval-rules/{rule_id}":                {},
	"GET /v1/approvals":                                  {query: "status=pending&limit=5"},
	"GET /v1/approvals/{approval_id}":                    {},
	"POST /v1/approvals/{approval_id}/approve":           {body: `{"note":"n"}`},
	"POST /v1/approvals/{approval_id}/deny":              {body: `{"note":"n"}`},
	"POST /v1/governance/proposals/{proposal_id}/enact":  {body: `{"reason":"r"}`},
	"POST /v1/governance/proposals/{proposal_id}/reject": {body: `{"reason":"r"}`},

	"POST /v1/heal/auto/start": {body: `{"period_seconds":300}`},
	"POST /v1/heal/auto/stop":  {},
	"POST /v1/heal/run":        {body: `{"dry_run":true,"machine_id":"m1"}`},
	"POST /v1/heal/scan":       {body: `{"machine_id":"m1"}`},
	"GET /v1/heal/status":      {},

	"POST /v1/legal/accept":                      {body: `{"accepted":true,"content_hash":"ab","document_id":"beta_terms","version":"2026-01-01.1"}`},
	"GET /v1/legal/acceptances":                  {},
	"GET /v1/legal/documents":                    {},
	"GET /v1/legal/documents/{document_id}/text": {},

	"GET /v1/notifications":                              {},
	"POST /v1/notifications/digest/run":                  {body: `{"user_id":"0190a5c4-0000-7000-8000-000000000000"}`},
	"GET /v1/notifications/preferences":                  {},
	"PUT /v1/notifications/preferences":                  {body: `{"preferences":[{"type":"grant.revoked","channel":"email","enabled":true,"digest":false}]}`},
	"POST /v1/notifications/test":                        {body: `{"type":"grant.revoked","body":"b","severity":"warning"}`},
	"POST /v1/notifications/{notification_id}/redeliver": {},
	"POST /v1/webhooks":                                  {body: `{"url":"https://example.com/hook","types":["grant.revoked"]}`},
	"GET /v1/webhooks":                                   {},
	"DELETE /v1/webhooks/{webhook_id}":                   {},
	"GET /v1/webhooks/{webhook_id}/deliveries":           {},

	"GET /v1/orgs":                             {},
	"POST /v1/orgs":                            {body: `{"name":"t"}`},
	"GET /v1/orgs/{org_id}":                    {},
	"POST /v1/orgs/{org_id}/accept":            {},
	"POST /v1/orgs/{org_id}/invite":            {body: `{"email":"invitee@example.com","role":"member"}`},
	"GET /v1/orgs/{org_id}/keys":               {},
	"GET /v1/orgs/{org_id}/members":            {},
	"DELETE /v1/orgs/{org_id}/members/{email}": {},
	"GET /v1/dashboard/usage":                  {},
	// A JSON-RPC tunnel: the tool calls it carries are requests of the
	// routes above, probed there.
	"POST /v1/mcp":                           {},
	"POST /v1/internal/cron/admin-digest":    {},
	"POST /v1/internal/cron/anchor":          {},
	"POST /v1/internal/cron/approval-expiry": {},
	"POST /v1/internal/cron/digest":          {},
	"POST /v1/internal/cron/grant-expiry":    {},
	"POST /v1/internal/cron/key-expiry":      {},
	"POST /v1/internal/cron/webhooks":        {},
	"GET /v1/internal/jobs":                  {},
}

// Every route, sent each class of bad input — NUL and invalid UTF-8 in each
// path segment, query parameter and JSON string; each key twice and in
// another case; over-long text; ±24:00 offsets; values of the wrong type —
// answers 4xx naming the field (an id that cannot exist: as a missing id
// answers), and writes nothing, on both stores (issue 18).
func TestStrictInputEveryRoute(t *testing.T) {
	doc, _ := loadDoc(t)
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.CronSecret, c.Teams = "strict-cron", true })
		_, key := e.adminAccount("admin@example.com")
		_, cookie := e.signIn("session@example.com")
		// Path values that name something of the account, so that a probe
		// of another value of the path meets it (a member of a team that
		// exists); the others name nothing.
		org := e.do("POST", "/v1/orgs", key, `{"name":"strict"}`)
		if org.Status != 201 {
			t.Fatalf("team: %d %s", org.Status, org.Body)
		}
		known := map[string]string{"org_id": org.JSON(t)["org"].(map[string]any)["org_id"].(string)}
		seen := map[string]bool{}
		for _, rt := range e.handler.RouteTable() {
			seen[rt.Pattern] = true
			c, ok := strictCases[rt.Pattern]
			switch {
			case !ok:
				t.Errorf("%s has no case in strictCases", rt.Pattern)
				continue
			case !rt.Built && !c.unbuilt:
				t.Errorf("%s is not built: mark its case unbuilt", rt.Pattern)
				continue
			case rt.Built && c.unbuilt:
				t.Errorf("%s is built now: give it a case", rt.Pattern)
				continue
			case !rt.Built:
				continue // 501 before anything is read
			}
			var creds []string
			switch rt.Access {
			case "public":
			case "cron":
				creds = []string{"X-Cron-Secret", "strict-cron"}
			case "session":
				creds = []string{"Cookie", "auditchain_session=" + cookie}
			default:
				creds = []string{"X-API-Key", key}
			}
			t.Run(rt.Pattern, func(t *testing.T) { probeRoute(t, e, doc, rt, c, creds, known) })
		}
		for p := range strictCases {
			if !seen[p] {
				t.Errorf("strictCases has %s, which is no route", p)
			}
		}
	})
}

// probe is one bad request and the field its answer must name.
type probe struct {
	name  string
	path  string // the request path and query
	body  []byte // nil: none
	field string // the field the answer names
	// like is a request whose answer this one must equal (an id that cannot
	// exist answers as a well-formed missing one), instead of naming field.
	like *probe
	// row: the answer is the batch's 200, naming field in the errors of row 0.
	row bool
}

func probeRoute(t *testing.T, parent *env, doc *openapi3.T, rt httpapi.RouteInfo, c strictCase, creds []string, known map[string]string) {
	sub := *parent
	sub.t = t // failures end this route's subtest
	e := &sub
	method, pattern, _ := strings.Cut(rt.Pattern, " ")
	var body []byte
	if c.body != "" {
		body = []byte(c.body)
	}
	fill := func(name, value string) string {
		p := pattern
		for _, param := range pathParamsOf(pattern) {
			v := known[param]
			switch {
			case param == name:
				v = value
			case v == "":
				v = "zz-missing"
			}
			p = strings.Replace(p, "{"+param+"}", v, 1)
		}
		return p
	}
	base := fill("", "")
	baseQuery, err := url.ParseQuery(c.query)
	if err != nil {
		t.Fatal(err)
	}
	withQuery := func(name, raw string) string {
		parts := []string{}
		for k, vs := range baseQuery {
			if k != name {
				parts = append(parts, url.QueryEscape(k)+"="+url.QueryEscape(vs[0]))
			}
		}
		parts = append(parts, url.QueryEscape(name)+"="+raw)
		return base + "?" + strings.Join(parts, "&")
	}
	baseURL := base
	if c.query != "" {
		baseURL += "?" + c.query
	}

	var probes []probe
	// Path segments: an id answers as a missing one does.
	for _, name := range pathParamsOf(pattern) {
		like := &probe{name: "well-formed " + name, path: fill(name, "zz-missing-"+name), body: body}
		for _, bad := range []string{"%00", "%FF", "a%C3"} {
			probes = append(probes, probe{name: name + "=" + bad, path: fill(name, bad), body: body, field: name, like: like})
		}
	}
	// Query parameters: those the document lists, and one it does not.
	params := queryParamsOf(t, doc, method, pattern)
	params = append(params, &openapi3.Parameter{Name: "probe", Schema: openapi3.NewStringSchema().NewRef()})
	for _, p := range params {
		for _, bad := range []string{"%00", "x%FF", "%ED%A0%80"} {
			probes = append(probes, probe{name: "query " + p.Name + "=" + bad, path: withQuery(p.Name, bad), body: body, field: p.Name})
		}
		s := p.Schema.Value
		switch {
		case s.Type.Is("integer"), s.Type.Is("boolean"):
			probes = append(probes, probe{name: "query " + p.Name + " not a " + s.Type.Slice()[0], path: withQuery(p.Name, "x7"), body: body, field: p.Name})
		case s.Format == "date-time":
			for _, off := range []string{"%2B24:00", "-24:00"} {
				probes = append(probes, probe{name: "query " + p.Name + " offset " + off, path: withQuery(p.Name, "2026-11-26T11:00:00"+off), body: body, field: p.Name})
			}
		}
	}
	// The body: each class at each place.
	if c.body != "" {
		root, err := parseJSONTree([]byte(c.body))
		if err != nil {
			t.Fatalf("the case's body: %v", err)
		}
		for _, bp := range bodyProbes(root, c) {
			bp.path = baseURL
			probes = append(probes, bp)
		}
	} else if method != "GET" {
		probes = append(probes,
			probe{name: "a body where none is taken", path: baseURL, body: []byte(`{"probe":1}`), field: "probe"},
			probe{name: "a body with NUL where none is taken", path: baseURL, body: []byte(`{"probe":"\u0000"}`), field: "probe"})
	}

	before := e.fingerprint()
	var rows []probe
	type answered struct {
		p   probe
		got string
		m   map[string]any
	}
	var likes []answered
	for _, p := range probes {
		if p.row {
			rows = append(rows, p)
			continue
		}
		r := send(e, method, p.path, p.body, creds)
		if r.Status < 400 || r.Status > 499 {
			t.Errorf("%s: answered %d, want 4xx: %s", p.name, r.Status, short(r.Body))
			continue
		}
		m := r.JSON(t)
		if p.like != nil {
			likes = append(likes, answered{p, fmt.Sprint(r.Status, " ", m["code"]), m})
		} else if !namesField(m, p.field) {
			t.Errorf("%s: the answer does not name %q: %s", p.name, p.field, short(r.Body))
		}
	}
	if after := e.fingerprint(); after != before {
		t.Fatalf("the refused requests wrote")
	}
	// After the fingerprint: a well-formed request may write (a machine's
	// signing key, say).
	for _, a := range likes {
		ref := send(e, method, a.p.like.path, a.p.like.body, creds)
		switch {
		case ref.Status >= 400 && ref.Status < 500:
			if want := fmt.Sprint(ref.Status, " ", ref.JSON(t)["code"]); a.got != want {
				t.Errorf("%s: answered %s, a missing %s answers %s", a.p.name, a.got, a.p.field, want)
			}
		case !namesField(a.m, a.p.field):
			// Not an id of something stored: a value like any other.
			t.Errorf("%s: the answer does not name %q: %v", a.p.name, a.p.field, a.m)
		}
	}
	// Rows read one by one: refused in errors, nothing stored.
	for _, p := range rows {
		tip := e.do("GET", "/v1/chain/tip", creds[1], nil).JSON(t)["event_count"]
		r := send(e, method, p.path, p.body, creds)
		if r.Status != 200 {
			t.Errorf("%s: answered %d, want 200 with the row refused: %s", p.name, r.Status, short(r.Body))
			continue
		}
		res := r.JSON(t)
		errs, _ := res["errors"].([]any)
		// The row as a whole (field "") is named by its index alone.
		if res["ingested"] != float64(0) || len(errs) != 1 || errs[0].(map[string]any)["index"] != float64(0) ||
			(p.field != "" && !namesField(errs[0].(map[string]any), p.field)) {
			t.Errorf("%s: %s, want row 0 refused naming %q", p.name, short(r.Body), p.field)
		}
		if after := e.do("GET", "/v1/chain/tip", creds[1], nil).JSON(t)["event_count"]; after != tip {
			t.Errorf("%s: stored an event", p.name)
		}
	}
}

// short cuts an answer for a message.
func short(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

func send(e *env, method, path string, body []byte, creds []string) response {
	e.t.Helper()
	var b any
	if body != nil {
		b = body
	}
	key := ""
	headers := creds
	if len(creds) == 2 && creds[0] == "X-API-Key" {
		key, headers = creds[1], nil
	}
	return e.do(method, path, key, b, headers...)
}

func pathParamsOf(pattern string) []string {
	var out []string
	for _, seg := range strings.Split(pattern, "/") {
		if strings.HasPrefix(seg, "{") {
			out = append(out, strings.Trim(seg, "{}."))
		}
	}
	return out
}

// queryParamsOf lists the query parameters the OpenAPI document gives the
// operation.
func queryParamsOf(t *testing.T, doc *openapi3.T, method, path string) []*openapi3.Parameter {
	item := doc.Paths.Find(path)
	if item == nil || item.GetOperation(method) == nil {
		t.Fatalf("%s %s is not in the OpenAPI document", method, path)
	}
	var out []*openapi3.Parameter
	for _, refs := range []openapi3.Parameters{item.Parameters, item.GetOperation(method).Parameters} {
		for _, ref := range refs {
			if ref.Value.In == "query" {
				out = append(out, ref.Value)
			}
		}
	}
	return out
}

// ---- bodies ---------------------------------------------------------------

// jsonTree is a JSON value with its object keys in order.
type jsonTree struct {
	kind  byte // o(bject), a(rray), s(tring), n(umber), b(oolean), z (null)
	text  string
	keys  []string
	items []*jsonTree // object values (by keys) or array items
}

func parseJSONTree(b []byte) (*jsonTree, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return readTree(dec)
}

func readTree(dec *json.Decoder) (*jsonTree, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		n := &jsonTree{kind: 'a'}
		if v == '{' {
			n.kind = 'o'
		}
		for dec.More() {
			if n.kind == 'o' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.(string))
			}
			child, err := readTree(dec)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, child)
		}
		_, err := dec.Token()
		return n, err
	case string:
		return &jsonTree{kind: 's', text: v}, nil
	case json.Number:
		return &jsonTree{kind: 'n', text: v.String()}, nil
	case bool:
		return &jsonTree{kind: 'b', text: strconv.FormatBool(v)}, nil
	}
	return &jsonTree{kind: 'z', text: "null"}, nil
}

// A body probe changes the tree at one path.
type bodyOp int

const (
	opNUL bodyOp = iota
	opUTF8
	opLong
	opPlus24
	opMinus24
	opType
	opTwice
	opCase
)

var opNames = []string{"NUL", "invalid UTF-8", "over-long text", "+24:00", "-24:00", "wrong type", "key twice", "key in another case"}

// encodeTree writes n, applying op at path at.
func encodeTree(b *bytes.Buffer, n *jsonTree, path, at string, op bodyOp) {
	if path == at {
		switch op {
		case opNUL:
			b.WriteString(`"a\u0000b"`)
			return
		case opUTF8:
			b.WriteString("\"a\xffb\"")
			return
		case opLong:
			b.WriteString(`"` + strings.Repeat("x", 20000) + `"`)
			return
		case opPlus24, opMinus24:
			off := "+24:00"
			if op == opMinus24 {
				off = "-24:00"
			}
			b.WriteString(`"2026-11-26T11:00:00` + off + `"`)
			return
		case opType:
			b.WriteString(map[byte]string{'s': `7`, 'n': `"7"`, 'b': `"true"`, 'o': `"x"`, 'a': `{"a":1}`}[n.kind])
			return
		}
	}
	switch n.kind {
	case 'o':
		b.WriteByte('{')
		for i, k := range n.keys {
			kp := joinPath(path, k)
			member := func(key string) {
				if b.Len() > 0 && b.Bytes()[b.Len()-1] != '{' {
					b.WriteByte(',')
				}
				q, _ := json.Marshal(key)
				b.Write(q)
				b.WriteByte(':')
				encodeTree(b, n.items[i], kp, at, op)
			}
			switch {
			case kp == at && op == opTwice:
				member(k)
				member(k)
			case kp == at && op == opCase:
				member(caseVariant(k))
			default:
				member(k)
			}
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, item := range n.items {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeTree(b, item, path+"["+strconv.Itoa(i)+"]", at, op)
		}
		b.WriteByte(']')
	case 's':
		q, _ := json.Marshal(n.text)
		b.Write(q)
	default:
		b.WriteString(n.text)
	}
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func caseVariant(k string) string {
	if v := strings.ToUpper(k[:1]) + k[1:]; v != k {
		return v
	}
	return strings.ToUpper(k)
}

// bodyProbes lists every probe of c's body.
func bodyProbes(root *jsonTree, c strictCase) []probe {
	var out []probe
	add := func(path string, op bodyOp, field string) {
		var b bytes.Buffer
		encodeTree(&b, root, "", path, op)
		p := probe{name: opNames[op] + " at " + path, body: b.Bytes(), field: field}
		if c.rows != "" && strings.HasPrefix(path, c.rows+"[") && op != opNUL && op != opUTF8 && op != opTwice {
			// The row's own field, as the row's error names it.
			_, p.field, _ = strings.Cut(field, "].")
			p.row = true
		}
		out = append(out, p)
	}
	inside := func(path string) bool {
		for _, f := range c.free {
			if strings.HasPrefix(path, f+".") || strings.HasPrefix(path, f+"[") {
				return true
			}
		}
		return false
	}
	var walk func(n *jsonTree, path string)
	walk = func(n *jsonTree, path string) {
		in, free := inside(path), slices.Contains(c.free, path)
		if path != "" {
			if n.kind == 's' {
				add(path, opNUL, path)
				add(path, opUTF8, path)
				if !in && !free {
					add(path, opLong, path)
				}
				if slices.Contains(c.times, path) {
					add(path, opPlus24, path)
					add(path, opMinus24, path)
				}
			}
			if !in && n.kind != 'z' {
				add(path, opType, path)
			}
		}
		for i, child := range n.items {
			if n.kind == 'o' {
				kp := joinPath(path, n.keys[i])
				if !inside(kp) {
					add(kp, opTwice, kp)
					add(kp, opCase, joinPath(path, caseVariant(n.keys[i])))
				}
				walk(child, kp)
			} else {
				walk(child, path+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	walk(root, "")
	return out
}
