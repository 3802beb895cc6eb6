package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/buildinfo"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

func TestHealthOpenAPIAndMetricsArePublic(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		r := e.do("GET", "/v1/health", "", nil)
		if r.Status != 200 || r.JSON(t)["status"] != "ok" {
			t.Fatalf("health: %d %s", r.Status, r.Body)
		}
		r = e.do("GET", "/v1/openapi.json", "", nil)
		var doc map[string]any
		if err := json.Unmarshal(r.Body, &doc); err != nil || r.Status != 200 || doc["openapi"] != "3.1.0" {
			t.Fatalf("openapi.json: %d %v", r.Status, err)
		}
		r = e.do("GET", "/metrics", "", nil)
		if r.Status != 200 || r.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" ||
			!strings.Contains(string(r.Body), "# TYPE auditchain_http_requests_total counter") {
			t.Fatalf("metrics: %d %q %.200s", r.Status, r.Header.Get("Content-Type"), r.Body)
		}
	})
}

// Every route of routes.go is in the OpenAPI document, with the same method,
// and its operation has a unique lowerCamel
// operationId and tags the document declares with a description (client
// generators name methods and group them by these), and the document has
// no operation the server does not serve.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), nil)
	declared := map[string]bool{}
	for _, tag := range e.doc.Tags {
		if tag.Description == "" {
			t.Errorf("tag %q has no description", tag.Name)
		}
		declared[tag.Name] = true
	}
	lowerCamel := regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	ids := map[string]string{}
	served := map[string]bool{}
	for _, rt := range e.handler.RouteTable() {
		served[rt.Pattern] = true
		method, path, _ := strings.Cut(rt.Pattern, " ")
		item := e.doc.Paths.Find(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("%s is served but not documented in api/openapi.yaml", rt.Pattern)
			continue
		}
		op := item.GetOperation(method)
		switch id := op.OperationID; {
		case id == "":
			t.Errorf("%s has no operationId", rt.Pattern)
		case !lowerCamel.MatchString(id):
			t.Errorf("%s: operationId %q is not lowerCamel", rt.Pattern, id)
		case ids[id] != "":
			t.Errorf("operationId %q names both %s and %s", id, ids[id], rt.Pattern)
		default:
			ids[id] = rt.Pattern
		}
		if len(op.Tags) == 0 {
			t.Errorf("%s has no tags", rt.Pattern)
		}
		for _, tag := range op.Tags {
			if !declared[tag] {
				t.Errorf("%s: tag %q is not declared in the document's tags", rt.Pattern, tag)
			}
		}
	}
	for path, item := range e.doc.Paths.Map() {
		for method := range item.Operations() {
			if !served[method+" "+path] {
				t.Errorf("api/openapi.yaml documents %s %s, which routes.go does not serve", method, path)
			}
		}
	}
}

func TestKeyLifecycle(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, root := e.account("owner@example.com")

		r := e.do("POST", "/v1/keys", root, map[string]any{"scopes": []string{"grants", "events:read"}, "machine": "ci-1", "label": "deploy"})
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		created := r.JSON(t)
		token := created["api_key"].(string)
		if !strings.HasPrefix(token, app.TokenPrefix) || created["prefix"] != token[:len(created["prefix"].(string))] {
			t.Fatalf("token/prefix: %v", created)
		}

		// The new key works, within its scopes.
		if r := e.do("GET", "/v1/chain/tip", token, nil); r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden {
			t.Fatalf("events:read key refused on events:read route: %d", r.Status)
		}

		// Listings never show tokens.
		r = e.do("GET", "/v1/keys", root, nil)
		if r.Status != 200 || strings.Contains(string(r.Body), token) || strings.Contains(string(r.Body), root) {
			t.Fatalf("list leaked a token or failed: %d %s", r.Status, r.Body)
		}
		list := r.JSON(t)
		if list["count"].(float64) != 2 {
			t.Fatalf("count = %v", list["count"])
		}

		// Revoke: the key stops working at once; a second revoke keeps the first time.
		id := created["id"].(string)
		r = e.do("POST", "/v1/keys/"+id+"/revoke", root, nil)
		if r.Status != 200 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		first := r.JSON(t)["key"].(map[string]any)["revoked_at"]
		e.clock.Advance(time.Minute)
		if again := e.do("POST", "/v1/keys/"+id+"/revoke", root, nil).JSON(t)["key"].(map[string]any)["revoked_at"]; again != first {
			t.Fatalf("second revoke moved revoked_at %v -> %v", first, again)
		}
		wantProblem(t, e.do("GET", "/v1/chain/tip", token, nil), 401, "invalid_or_expired_api_key")

		// Unknown ids and another account's ids answer the same 404.
		wantProblem(t, e.do("POST", "/v1/keys/00000000-0000-0000-0000-000000000000/revoke", root, nil), 404, "key_not_found")
		wantProblem(t, e.do("POST", "/v1/keys/not-a-uuid/revoke", root, nil), 404, "key_not_found")
		_, other := e.account("other@example.com")
		otherMissing := e.do("POST", "/v1/keys/"+id+"/revoke", other, nil)
		wantProblem(t, otherMissing, 404, "key_not_found")
		_ = user
	})
}

func TestAuthenticationFailures(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, root := e.account("a@example.com")
		exp := e.clock.Now().Add(time.Hour)
		expiring := e.key(user, api.CreateKeyRequest{ExpiresAt: new(domain.FormatTimestamp(exp))})

		wantProblem(t, e.do("GET", "/v1/keys", "", nil), 401, "missing_token")
		wantProblem(t, e.do("GET", "/v1/keys", "ac_unknownunknownunknownunknownunknownunknown", nil), 401, "invalid_or_expired_api_key")
		wantProblem(t, e.do("GET", "/v1/keys", "garbage", nil), 401, "invalid_or_expired_api_key")
		if r := e.do("GET", "/v1/keys", expiring, nil); r.Status != 200 {
			t.Fatalf("unexpired key refused: %d", r.Status)
		}
		e.clock.Advance(time.Hour)
		wantProblem(t, e.do("GET", "/v1/keys", expiring, nil), 401, "invalid_or_expired_api_key")
		if r := e.do("GET", "/v1/keys", root, nil); r.Status != 200 {
			t.Fatalf("root key refused: %d", r.Status)
		}
		// Keys never reach the logs.
		if strings.Contains(e.logs.String(), root) || strings.Contains(e.logs.String(), expiring) {
			t.Fatal("a key token was logged")
		}
	})
}

// Generated from the route table: a key lacking a route's capability gets 403
// scope_missing naming it, so a new route without a capability test cannot hide.
// (Every feature is on: a route behind one that is off answers before any
// credential; teams_test.go covers that.)
func TestScopeMissingOnEveryRoute(t *testing.T) {
	// Two keys a route: more than --max-keys-per-account's default.
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), func(c *config.Config) { c.CronSecret, c.MaxKeys, c.Teams = "s3cret", 1000, true })
	user, _ := e.account("a@example.com")
	for _, rt := range e.handler.RouteTable() {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		path = fillPath(path)
		t.Run(rt.Pattern, func(t *testing.T) {
			switch {
			case rt.Access == "public" || rt.Access == "cron":
				return
			case rt.Access == "session":
				k := e.key(user, api.CreateKeyRequest{})
				wantProblem(t, e.do(method, path, k, nil), 403, "session_required")
				return
			case rt.Access == "any":
				k := e.key(user, api.CreateKeyRequest{Scopes: []string{"orgs"}})
				if r := e.do(method, path, k, nil); r.Status == 401 || r.Status == 403 {
					t.Fatalf("any credential refused: %d %s", r.Status, r.Body)
				}
				return
			case rt.Access == "unscoped":
				k := e.key(user, api.CreateKeyRequest{Scopes: []string{"governance", "grants", "notifications", "events:write", "events:read", "orgs"}})
				m := wantProblem(t, e.do(method, path, k, nil), 403, "scope_missing")
				if m["scope"] != "unscoped" {
					t.Fatalf("scope member = %v", m["scope"])
				}
				return
			}
			// A route needing two scopes ("grants+events:write") is refused
			// to a key holding only one, naming the other.
			needs := strings.Split(strings.TrimPrefix(rt.Access, "admin:"), "+")
			for i, need := range needs {
				held := slices.Delete(slices.Clone(needs), i, i+1)
				if len(held) == 0 {
					for _, s := range []string{"governance", "grants", "notifications", "events:write", "events:read", "orgs"} {
						if s != need {
							held = []string{s}
							break
						}
					}
				}
				k := e.key(user, api.CreateKeyRequest{Scopes: held})
				m := wantProblem(t, e.do(method, path, k, nil), 403, "scope_missing")
				if m["scope"] != need {
					t.Fatalf("key holding %v: scope member = %v, want %s", held, m["scope"], need)
				}
			}
			if rt.Pattern == "GET /v1/events/stream" {
				return // a stream never ends by itself; stream_test.go covers it
			}
			// With the scope the route is reached (whatever it answers next).
			k := e.key(user, api.CreateKeyRequest{Scopes: needs})
			if r := e.do(method, path, k, nil); r.Status == 401 || (r.Status == 403 && r.JSON(t)["code"] == "scope_missing") {
				t.Fatalf("key holding %v refused: %d %s", needs, r.Status, r.Body)
			}
		})
	}
}

func fillPath(p string) string {
	for _, name := range []string{"key_id", "event_id", "machine_id", "grant_id", "proposal_id", "document_id", "webhook_id", "org_id", "email"} {
		p = strings.ReplaceAll(p, "{"+name+"}", "x-"+name)
	}
	return p
}

func TestCronSecret(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		open := newEnv(t, dsn, nil)
		wantProblem(t, open.do("POST", "/v1/internal/cron/anchor", "", nil, "X-Cron-Secret", "anything"), 503, "cron_secret_unconfigured")
		wantProblem(t, open.do("POST", "/v1/internal/cron/anchor", "", nil), 503, "cron_secret_unconfigured")

		e := newEnv(t, storetest.DSN(t, storetest.SQLite), func(c *config.Config) { c.CronSecret = "s3cret" })
		wantProblem(t, e.do("POST", "/v1/internal/cron/webhooks", "", nil), 401, "unauthorized")
		wantProblem(t, e.do("POST", "/v1/internal/cron/webhooks", "", nil, "X-Cron-Secret", "s3cre"), 401, "unauthorized")
		wantProblem(t, e.do("POST", "/v1/internal/cron/webhooks", "", nil, "X-Cron-Secret", "s3cret!"), 401, "unauthorized")
		if r := e.do("POST", "/v1/internal/cron/webhooks", "", nil, "X-Cron-Secret", "s3cret"); r.Status == 401 || r.Status == 503 {
			t.Fatalf("right secret refused: %d", r.Status)
		}
		// Every cron route, the jobs' list included, keeps the rules.
		for _, rt := range e.handler.RouteTable() {
			if rt.Access != "cron" {
				continue
			}
			method, path, _ := strings.Cut(rt.Pattern, " ")
			wantProblem(t, open.do(method, path, "", nil, "X-Cron-Secret", "s3cret"), 503, "cron_secret_unconfigured")
			wantProblem(t, e.do(method, path, "", nil), 401, "unauthorized")
			wantProblem(t, e.do(method, path, "", nil, "X-Cron-Secret", "wrong"), 401, "unauthorized")
		}
		if strings.Contains(e.logs.String(), "s3cret") {
			t.Fatal("the cron secret was logged")
		}
	})
}

func TestMalformedRequestsWriteNothing(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, root := e.account("a@example.com")
		cases := []struct {
			name, body, contentType string
			status                  int
			code, field             string
		}{
			{"unknown field", `{"label":"x","machien":"m"}`, "application/json", 422, "validation_error", "machien"},
			{"wrong type", `{"label":7}`, "application/json", 422, "validation_error", "label"},
			{"wrong element type", `{"scopes":[1]}`, "application/json", 422, "validation_error", "scopes[0]"},
			{"unknown scope", `{"scopes":["root"]}`, "application/json", 422, "validation_error", "scopes"},
			{"past expiry", `{"expires_at":"2000-01-01T00:00:00Z"}`, "application/json", 422, "validation_error", "expires_at"},
			{"not an object", `[1,2]`, "application/json", 422, "validation_error", ""},
			{"malformed json", `{"label":`, "application/json", 400, "malformed_json", ""},
			{"trailing data", `{"label":"x"} {}`, "application/json", 400, "malformed_json", ""},
			{"wrong content type", `{"label":"x"}`, "text/plain", 415, "unsupported_media_type", ""},
			{"oversized", `{"label":"` + strings.Repeat("x", 2<<20) + `"}`, "application/json", 413, "body_too_large", ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := e.do("POST", "/v1/keys", root, c.body, "Content-Type", c.contentType)
				m := wantProblem(t, r, c.status, c.code)
				if c.field != "" {
					errs, _ := m["errors"].([]any)
					if len(errs) == 0 || errs[0].(map[string]any)["field"] != c.field {
						t.Fatalf("errors = %v, want field %q", m["errors"], c.field)
					}
				}
			})
		}
		if n := e.do("GET", "/v1/keys", root, nil).JSON(t)["count"]; n != float64(1) {
			t.Fatalf("a refused request wrote a key: count = %v", n)
		}
	})
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), nil)
	wantProblem(t, e.do("GET", "/v1/nothing-here", "", nil), 404, "not_found")
	r := e.do("DELETE", "/v1/health", "", nil)
	wantProblem(t, r, 405, "method_not_allowed")
	if !strings.Contains(r.Header.Get("Allow"), "GET") {
		t.Fatalf("Allow = %q", r.Header.Get("Allow"))
	}
}

func TestUnbuiltRoutesAnswerNotImplemented(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), func(c *config.Config) { c.CronSecret = "s" })
	_, root := e.adminAccount("a@example.com")
	for _, rt := range e.handler.RouteTable() {
		if rt.Built {
			continue
		}
		method, path, _ := strings.Cut(rt.Pattern, " ")
		r := e.do(method, fillPath(path), root, nil, "X-Cron-Secret", "s")
		wantProblem(t, r, 501, "not_implemented")
	}
}

func TestMetricsCountRoutesByPattern(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), nil)
	e.do("GET", "/v1/health", "", nil)
	e.do("GET", "/v1/nope", "", nil)
	resp, err := e.srv.Client().Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := new(strings.Builder)
	fmt.Fprint(buf, "")
	b := make([]byte, 1<<20)
	n, _ := readAll(resp, b)
	body := string(b[:n])
	for _, want := range []string{
		`auditchain_http_requests_total{route="GET /v1/health",status="200"} 1`,
		`auditchain_http_requests_total{route="unmatched",status="404"} 1`,
		`auditchain_http_request_duration_seconds_bucket{route="GET /v1/health"`,
		// The store's and the append paths' counters, labelled (0 on SQLite).
		"\nauditchain_store_io_faults_total 0",
		`auditchain_pg_appends_total{path="locked"} 0`,
		`auditchain_pg_head_cache_total{result="stale"} 0`,
		"\nauditchain_pg_append_batches_total 0",
		`auditchain_pg_append_batch_rollbacks_total{reason="lock_timeout"} 0`,
		// The domain's families, before any of their actions.
		"# TYPE auditchain_mail_messages_total counter",
		"# TYPE auditchain_events_appended_total counter",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func readAll(resp *http.Response, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := resp.Body.Read(b[n:])
		n += m
		if err != nil {
			return n, nil
		}
	}
	return n, nil
}

func TestAdministratorRoutesRefuseOthers(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), nil)
	_, plain := e.account("user@example.com")
	wantProblem(t, e.do("POST", "/v1/notifications/digest/run", plain, map[string]any{"user_id": "x"}), 403, "admin_only")
}

// GET /v1/health names the build (the same word `auditchain version` starts
// with), so an operator can see which binary a replica runs.
func TestHealthCarriesTheVersion(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), nil)
	r := e.do("GET", "/v1/health", "", nil)
	if v, _ := r.JSON(t)["version"].(string); r.Status != 200 || v != buildinfo.Read().String() || v == "" {
		t.Fatalf("health: %d %s, want version %q", r.Status, r.Body, buildinfo.Read().String())
	}
}

// Every request leaves one line at the default level (info): method, route
// pattern, status, duration and request id, and never the API key, the
// path's ids or a body. A caller's X-Request-Id is kept; otherwise one is made.
func TestRequestLogAtTheDefaultLevel(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), nil)
	_, key := e.account("log@example.com")
	r := e.do("POST", "/v1/keys", key, map[string]any{"label": "body-marker-7f3a"}, "X-Request-Id", "proxy-id-42")
	if r.Status != 201 {
		t.Fatalf("create key: %d %s", r.Status, r.Body)
	}
	if got := r.Header.Get("X-Request-Id"); got != "proxy-id-42" {
		t.Fatalf("X-Request-Id = %q, want the caller's", got)
	}
	keyID, _ := r.JSON(t)["id"].(string)
	r = e.do("POST", "/v1/keys/"+keyID+"/revoke", key, nil, "X-Request-Id", "bad id with spaces")
	made := r.Header.Get("X-Request-Id")
	if r.Status != 200 || len(made) != 16 {
		t.Fatalf("revoke: %d, X-Request-Id %q (want a new 16-digit id for a malformed one)", r.Status, made)
	}
	var lines []map[string]any
	for _, l := range strings.Split(e.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == "request" {
			lines = append(lines, rec)
		}
	}
	want := []struct{ method, route, id string }{
		{"POST", "POST /v1/keys", "proxy-id-42"},
		{"POST", "POST /v1/keys/{key_id}/revoke", made},
	}
	if len(lines) != len(want) {
		t.Fatalf("request lines = %d, want %d:\n%s", len(lines), len(want), e.logs.String())
	}
	for i, w := range want {
		l := lines[i]
		if l["level"] != "INFO" || l["method"] != w.method || l["route"] != w.route || l["request_id"] != w.id || l["status"] == nil || l["duration_ms"] == nil {
			t.Errorf("line %d = %v, want level INFO, %s %s, request_id %s, status and duration_ms", i, l, w.method, w.route, w.id)
		}
	}
	for _, secret := range []string{key, "body-marker-7f3a", keyID} {
		if strings.Contains(e.logs.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}
