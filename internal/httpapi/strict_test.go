package httpapi_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
)

// unwrittenTables are written by every credentialed call, refused or not
// (the usage meter counts calls), or by the scheduler: they are left out of
// what a refusal must not change.
var unwrittenTables = map[string]bool{"usage_counts": true, "job_runs": true}

// fingerprint hashes every row of every table of the store (but
// unwrittenTables): two equal fingerprints mean nothing was written between
// them.
func (e *env) fingerprint() string {
	e.t.Helper()
	// The writer's work behind earlier appends (search's indexes, the
	// single appends' Merkle rows on SQLite) is done first: it is
	// bookkeeping derived from rows already written, not something a
	// request wrote, and would otherwise land between two fingerprints.
	settleTail(e.t, e.store)
	db := e.store.WriteDB()
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
	if e.store.Dialect == store.Postgres {
		q = `SELECT tablename FROM pg_tables WHERE schemaname = current_schema()`
	}
	var tables []string
	for _, row := range queryRows(e.t, db, q) {
		tables = append(tables, fmt.Sprint(row[0]))
	}
	slices.Sort(tables)
	h := sha256.New()
	for _, table := range tables {
		if unwrittenTables[table] {
			continue
		}
		rows := queryStrings(e.t, db, `SELECT * FROM `+table)
		slices.Sort(rows)
		fmt.Fprintf(h, "%s %d\n%s\n", table, len(rows), strings.Join(rows, "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// queryRows runs q and returns each row's values.
func queryRows(t *testing.T, db *sql.DB, q string, args ...any) [][]any {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// queryStrings runs q and renders each row as one string.
func queryStrings(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	var out []string
	for _, row := range queryRows(t, db, q, args...) {
		out = append(out, fmt.Sprintf("%#v", row))
	}
	return out
}

// namesField reports whether a problem names field: as its field, param or
// key member, or in errors; a field inside a key may be named by the key.
func namesField(m map[string]any, field string) bool {
	top, _, _ := strings.Cut(field, ".")
	top, _, _ = strings.Cut(top, "[")
	names := []any{m["field"], m["param"], m["key"]}
	if errs, ok := m["errors"].([]any); ok {
		for _, fe := range errs {
			if f, ok := fe.(map[string]any); ok {
				names = append(names, f["field"])
			}
		}
	}
	for _, n := range names {
		if s, ok := n.(string); ok && (s == field || s == top) {
			return true
		}
	}
	return false
}

// The examples of issue 18 answer alike on both stores, naming the field, and
// write nothing: NUL and invalid UTF-8 in path segments, query parameters and
// JSON strings; duplicate and case-variant keys; ±24:00 offsets.
func TestStrictInputExamples(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		grant := `{"subagent":"coll","expires_at":"2026-11-22T12:00:00+00:00","max_tool_calls":5}`
		if r := e.do("POST", "/v1/grants", key, grant); r.Status != 201 {
			t.Fatalf("grant: %d %s", r.Status, r.Body)
		}
		before := e.fingerprint()
		for _, c := range []struct {
			method, path, body string
			status             int
			code, field        string
		}{
			{"GET", "/v1/events/%00", "", 404, "event_not_found", ""},
			{"GET", "/v1/events/%FF", "", 404, "event_not_found", ""},
			{"GET", "/v1/grants/status?subagent=%FF", "", 422, "malformed_query", "subagent"},
			{"GET", "/v1/grants/status?subagent=coll%FF", "", 422, "malformed_query", "subagent"},
			{"POST", "/v1/grants/%C3/revoke", `{"subagent":"coll"}`, 404, "no_grant", ""},
			{"POST", "/v1/grants/%00/use", `{"subagent":"coll","n":1}`, 409, "not_authorized", ""},
			{"GET", "/v1/governance/proposals?subagent=%00", "", 422, "validation_error", "subagent"},
			{"GET", "/v1/governance/proposals/%FF", "", 404, "proposal_not_found", ""},
			{"PUT", "/v1/machines/%FF/signing-key", `{"public_key":"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="}`, 422, "validation_error", "machine_id"},
			{"GET", "/v1/chain/proof/inclusion?event_id=%00", "", 422, "validation_error", "event_id"},
			{"GET", "/v1/grants?subagent=%00", "", 422, "validation_error", "subagent"},
			{"POST", "/v1/keys/%FF/revoke", "", 404, "key_not_found", ""},
			{"GET", "/v1/legal/documents/%00/text", "", 404, "unknown_legal_document", ""},
			{"POST", "/v1/grants", `{"subagent":"a\u0000","expires_at":"2026-11-22T12:00:00+00:00","max_tool_calls":5}`, 422, "malformed_grant", "subagent"},
			{"POST", "/v1/grants", `{"subagent":"a","parent_agent":"\u0000","expires_at":"2026-11-22T12:00:00+00:00","max_tool_calls":5}`, 422, "malformed_grant", "parent_agent"},
			{"POST", "/v1/grants", "{\"subagent\":\"coll\xff\",\"expires_at\":\"2026-11-22T12:00:00+00:00\",\"max_tool_calls\":5}", 422, "malformed_grant", "subagent"},
			{"POST", "/v1/grants", `{"subagent":"\ud800","expires_at":"2026-11-22T12:00:00+00:00","max_tool_calls":5}`, 422, "malformed_grant", "subagent"},
			{"POST", "/v1/grants", `{"subagent":"a","expires_at":"2026-11-26T11:00:00+24:00","max_tool_calls":5}`, 422, "malformed_grant", "expires_at"},
			{"POST", "/v1/grants", `{"SubAgent":"a","expires_at":"2026-11-22T12:00:00+00:00","max_tool_calls":5}`, 422, "malformed_grant", "subagent"},
			{"POST", "/v1/grants/g-00/use", "{\"subagent\":\"coll\xfe\",\"n\":1}", 422, "malformed_use", "subagent"},
			{"POST", "/v1/grants/g-00/use", `{"subagent":"\u0000","n":1}`, 422, "malformed_use", "subagent"},
			{"POST", "/v1/governance/proposals", `{"kind":"deny_scope","kind":"policy_note","evidence":{"blocked_attempts":3},"subject":{"subagent":"s"}}`, 422, "validation_error", "kind"},
			{"POST", "/v1/governance/proposals", `{"Kind":"deny_scope","evidence":{"blocked_attempts":3},"subject":{"subagent":"s"}}`, 422, "validation_error", "Kind"},
			{"POST", "/v1/governance/proposals", `{"kind":"deny_scope","note":"\u0000","evidence":{"blocked_attempts":3},"subject":{"subagent":"s"}}`, 422, "validation_error", "note"},
			{"POST", "/v1/governance/proposals", `{"kind":"deny_scope","evidence":{"blocked_attempts":3},"subject":{"subagent":"s\u0000"}}`, 422, "validation_error", "subject.subagent"},
			{"POST", "/v1/governance/proposals", `{"kind":"deny_scope","evidence":{"blocked_attempts":3},"subject":{"SubAgent":"s"}}`, 422, "validation_error", "subject.SubAgent"},
			{"POST", "/v1/keys", `{"scopes":["events:read"],"scopes":[]}`, 422, "validation_error", "scopes"},
			{"POST", "/v1/keys", `{"label":"\u0000"}`, 422, "validation_error", "label"},
			{"POST", "/v1/keys", `{"machine":"m\u0000"}`, 422, "validation_error", "machine"},
			{"POST", "/v1/keys", `{"expires_at":"2027-01-01T00:00:00-24:00"}`, 422, "validation_error", "expires_at"},
			{"POST", "/v1/events", `{"event_id":"evt-1","event_id":"evt-2","event_type":"t","sequence":0}`, 422, "validation_error", "event_id"},
			{"POST", "/v1/events", `{"Event_ID":"evt-1","event_type":"t","sequence":0}`, 422, "validation_error", "Event_ID"},
			{"POST", "/v1/events", `{"event_id":"evt-1","event_type":"t","sequence":0,"ts":"2026-11-26T11:00:00+24:00"}`, 422, "validation_error", "ts"},
			{"POST", "/v1/events", `{"event_id":"evt-1","event_type":"t","sequence":0,"raw":{"a":"\u0000"}}`, 422, "validation_error", "raw.a"},
			{"POST", "/v1/events", "{\"event_id\":\"evt-1\",\"event_type\":\"t\",\"sequence\":0,\"raw\":{\"a\":\"\xff\"}}", 422, "validation_error", "raw.a"},
			{"POST", "/v1/events/batch", `{"Events":[]}`, 422, "validation_error", "Events"},
			{"POST", "/v1/events/batch", `{"events":[{"event_id":"evt-1","event_type":"t","sequence":0,"tool":"\u0000"}]}`, 422, "validation_error", "events[0].tool"},
			{"POST", "/v1/events/search", `{"after":"2026-11-26T11:00:00+24:00"}`, 400, "invalid_after", "after"},
			{"POST", "/v1/events/search", `{"tool":"\u0000"}`, 422, "validation_error", "tool"},
		} {
			t.Run(c.method+" "+c.path, func(t *testing.T) {
				var body any
				if c.body != "" {
					body = c.body
				}
				m := wantProblem(t, e.do(c.method, c.path, key, body), c.status, c.code)
				if c.field != "" && !namesField(m, c.field) {
					t.Fatalf("the answer does not name %s: %v", c.field, m)
				}
			})
		}
		if e.fingerprint() != before {
			t.Fatal("a refused request wrote")
		}
		// The grant for "coll" is not matched by a sub-agent with other bytes.
		wantStatus(t, e.status(key, "subagent", "coll"), "authorized")
	})
}

// GET on the paths of POST routes is not an event id: 405 with Allow.
func TestMethodNotAllowedBesideAWildcard(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		for _, path := range []string{"/v1/events/search", "/v1/events/batch"} {
			r := e.do("GET", path, key, nil)
			wantProblem(t, r, 405, "method_not_allowed")
			if allow := r.Header.Get("Allow"); allow != "POST" {
				t.Fatalf("GET %s: Allow = %q, want POST", path, allow)
			}
		}
		// The wildcard still reads ids.
		wantProblem(t, e.do("GET", "/v1/events/evt-search", key, nil), 404, "event_not_found")
	})
}

// Answers are JSON written without HTML escaping: a detail reads
// sha256:<64 lowercase hex>, not sha256:\u003c64...
func TestAnswersAreNotHTMLEscaped(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		r := e.do("POST", "/v1/events", key, `{"event_id":"evt-1","event_type":"t","sequence":0,"prev_hash":"x"}`)
		wantProblem(t, r, 422, "validation_error")
		if !strings.Contains(string(r.Body), "sha256:<64 lowercase hex>") || strings.Contains(string(r.Body), `\u003c`) {
			t.Fatalf("body: %s", r.Body)
		}
		ok := e.do("POST", "/v1/events", key, `{"event_id":"evt-1","event_type":"a<b>&c","sequence":0}`)
		if ok.Status != 200 || !strings.Contains(string(ok.Body), `"event_type":"a<b>&c"`) {
			t.Fatalf("append: %d %s", ok.Status, ok.Body)
		}
		found := e.do("POST", "/v1/events/search", key, `{}`)
		if !strings.Contains(string(found.Body), `"event_type":"a<b>&c"`) {
			t.Fatalf("search: %s", found.Body)
		}
	})
}
