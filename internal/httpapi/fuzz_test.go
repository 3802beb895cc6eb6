package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// FuzzRequestBodies sends arbitrary bodies to every route that reads one
// (every built POST, PUT and DELETE route of the route table but the cron and
// session ones, which answer before reading): input alone must never produce
// a 5xx or a panic, an error is a problem document, and a body breaking the
// text rule (invalid UTF-8, or U+0000 in any string) is never taken.
func FuzzRequestBodies(f *testing.F) {
	for _, s := range []string{`{}`, `{"event_id":"evt-1","event_type":"t","sequence":0,"raw":{"a":[1,{"b":null}]}}`,
		`{"events":[{"event_id":"evt-2","sequence":1,"event_type":"x"},7]}`, `{"limit":1e3}`, `{"tool":"read_file","tool_input":{"p":"\u0000"}}`,
		`{"public_key":"AAAA"}`, `[`, `{"a":1}{"b":2}`, "\xff\xfe", `{"subagent":"s","expires_at":"2026-11-22T12:00:00+00:00","max_tool_calls":5}`,
		`{"kind":"deny_scope","evidence":{"blocked_attempts":3},"subject":{"subagent":"s"}}`, `{"subagent":"s","n":1}`,
		`{"preferences":[{"type":"grant.revoked","channel":"email"}]}`, `{"url":"x","types":[]}`,
		`{"scopes":["events:read"],"scopes":[]}`, `{"Kind":"x"}`, "{\"label\":\"\xc3\"}"} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	st := storetest.Open(f, "sqlite:"+filepath.Join(dir, "fuzz.db"))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := apptest.Options{Log: log}
	a := apptest.New(f, st, o)
	_, key, err := a.CreateAccount(f.Context(), app.AccountRequest{Email: "fuzz@example.com", Admin: true})
	if err != nil {
		f.Fatal(err)
	}
	_, docJSON := loadDoc(f)
	h := httpapi.NewServer(a, o.AppConfig(f), log, docJSON)
	var routes []string
	for _, rt := range h.RouteTable() {
		method, _, _ := strings.Cut(rt.Pattern, " ")
		if rt.Built && method != "GET" && rt.Access != "cron" && rt.Access != "session" {
			routes = append(routes, rt.Pattern)
		}
	}
	if len(routes) < 25 {
		f.Fatalf("only %d routes read a body: %v", len(routes), routes)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		breaks := breaksTextRule(body)
		for _, rt := range routes {
			method, pattern, _ := strings.Cut(rt, " ")
			for _, name := range pathParamsOf(pattern) {
				pattern = strings.Replace(pattern, "{"+name+"}", "x", 1)
			}
			req := httptest.NewRequest(method, pattern, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-Key", key.APIKey)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s with %q answered %d: %s", rt, body, rec.Code, rec.Body)
			}
			if rec.Code >= 400 && rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s answered %d without a problem document", rt, rec.Code)
			}
			if breaks && rec.Code < 300 {
				t.Fatalf("%s took %q, which breaks the text rule: %d %s", rt, body, rec.Code, rec.Body)
			}
		}
	})
}

// breaksTextRule reports whether body holds invalid UTF-8, or U+0000 in a
// string (a key or a value), as encoding/json reads it.
func breaksTextRule(body []byte) bool {
	if !utf8.Valid(body) {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if s, ok := tok.(string); ok && strings.ContainsRune(s, 0) {
			return true
		}
	}
}
