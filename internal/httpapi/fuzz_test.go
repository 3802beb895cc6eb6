package httpapi_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// FuzzRequestBodies sends arbitrary bodies to every JSON route: input alone
// must never produce a 5xx or a panic.
func FuzzRequestBodies(f *testing.F) {
	for _, s := range []string{`{}`, `{"event_id":"evt-1","event_type":"t","sequence":0,"raw":{"a":[1,{"b":null}]}}`,
		`{"events":[{"event_id":"evt-2","sequence":1,"event_type":"x"},7]}`, `{"limit":1e3}`, `{"tool":"read_file","tool_input":{"p":"\u0000"}}`,
		`{"public_key":"AAAA"}`, `[`, `{"a":1}{"b":2}`, "\xff\xfe"} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	st := storetest.Open(f, "sqlite:"+filepath.Join(dir, "fuzz.db"))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := apptest.New(f, st, apptest.Options{Log: log})
	_, key, err := a.CreateAccount(f.Context(), app.AccountRequest{Email: "fuzz@example.com"})
	if err != nil {
		f.Fatal(err)
	}
	_, docJSON := loadDoc(f)
	h := httpapi.NewServer(a, log, docJSON)
	routes := []string{"POST /v1/events", "POST /v1/events/batch", "POST /v1/events/search", "POST /v1/policy/test",
		"PUT /v1/machines/m1/signing-key", "POST /v1/keys"}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, rt := range routes {
			method, path, _ := cut(rt)
			req := httptest.NewRequest(method, path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-Key", key.Token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s with %q answered %d: %s", rt, body, rec.Code, rec.Body)
			}
			if rec.Code >= 400 && rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s answered %d without a problem document", rt, rec.Code)
			}
		}
	})
}

func cut(rt string) (string, string, bool) {
	i := bytes.IndexByte([]byte(rt), ' ')
	return rt[:i], rt[i+1:], true
}

var _ = http.MethodPost
