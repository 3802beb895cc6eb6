package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	openapi "github.com/auditchain/auditchain/api"
	"github.com/auditchain/auditchain/api/openapidoc"
	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/httpapi"
	"github.com/auditchain/auditchain/internal/legal"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/notify/webhook"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// clock is a settable time source shared by a test and the server it drives.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is one running API over one real store.
type env struct {
	t     *testing.T
	app   *app.App
	store *store.Store
	srv   *httptest.Server
	clock *clock
	doc   *openapi3.T
	rtr   routers.Router
	logs  *syncBuffer
	// cfg is the configuration the App and the handler were built with.
	cfg config.Config
	// outbox is the directory the App mails into (the outbox transport),
	// unless a test put another transport in its place (mail).
	outbox string
	mail   *mailSwitch

	handler *httpapi.Server
	// dsn and opts are what the API was last started with (restart).
	dsn  string
	opts envOptions
}

var (
	docOnce sync.Once
	docT    *openapi3.T
	docJSON []byte
	docErr  error
)

func loadDoc(t testing.TB) (*openapi3.T, []byte) {
	docOnce.Do(func() {
		docT, docErr = openapidoc.Load()
		docJSON = openapi.OpenAPIJSON()
	})
	if docErr != nil {
		t.Fatalf("openapi: %v", docErr)
	}
	return docT, docJSON
}

func testConfig() config.Config {
	cfg, err := config.Parse(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		panic(err)
	}
	return cfg
}

// newEnv starts the API on dsn with cfg (nil: defaults).
func newEnv(t *testing.T, dsn string, mutate func(*config.Config)) *env {
	t.Helper()
	return newEnvWith(t, dsn, envOptions{config: mutate})
}

// envOptions adjust the env newEnvWith starts: its configuration, and the
// App's dependencies beyond it.
type envOptions struct {
	// config adjusts the configuration (nil: defaults).
	config func(*config.Config)
	// webhookBackoff is the wait before webhook attempt n+2 within a drain
	// (nil: the service's).
	webhookBackoff func(n int) time.Duration
	// egress delivers webhooks (nil: as config says).
	egress *webhook.Egress
}

// newEnvWith starts the API on dsn as o says.
func newEnvWith(t *testing.T, dsn string, o envOptions) *env {
	t.Helper()
	st := storetest.Open(t, dsn)
	doc, _ := loadDoc(t)
	// Servers are matched by path only.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	rtr, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("openapi router: %v", err)
	}
	e := &env{t: t, store: st, doc: doc, rtr: rtr, logs: &syncBuffer{}, outbox: t.TempDir(),
		clock: &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}}
	outbox, err := mail.New("outbox:"+e.outbox, mail.Options{Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.mail = &mailSwitch{m: outbox}
	e.serve(dsn, o, nil)
	return e
}

// serve builds e's App over e.store as o says, with docs as its legal
// documents (nil: the built-in set), and starts the API on it.
func (e *env) serve(dsn string, o envOptions, docs *legal.Set) {
	e.t.Helper()
	e.dsn, e.opts = dsn, o
	e.cfg = testConfig()
	if o.config != nil {
		o.config(&e.cfg)
	}
	_, docBytes := loadDoc(e.t)
	log := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.app = apptest.New(e.t, e.store, apptest.Options{Config: func(c *config.Config) { *c = e.cfg }, Now: e.clock.Now, Log: log,
		Bus: dsn, Mail: e.mail, Legal: docs, WebhookBackoff: o.webhookBackoff, Egress: o.egress})
	e.handler = httpapi.NewServer(e.app, e.cfg, log, docBytes)
	e.srv = httptest.NewServer(e.handler)
	e.t.Cleanup(e.srv.Close)
}

// restart is the operator restarting the service on e's store with
// another configuration or other legal documents (--legal-dir): the same
// store, clock and outbox, a new App and API.
func (e *env) restart(dsn string, o envOptions, docs *legal.Set) {
	e.t.Helper()
	e.srv.Close()
	e.serve(dsn, o, docs)
}

// mailSwitch is the App's mail transport in tests: the outbox, or another
// transport a test puts in its place for a while (a mail outage).
type mailSwitch struct {
	mu sync.Mutex
	m  app.Mailer
}

func (s *mailSwitch) current() app.Mailer { s.mu.Lock(); defer s.mu.Unlock(); return s.m }

// use makes m the transport and returns the one it replaces.
func (s *mailSwitch) use(m app.Mailer) app.Mailer {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m
	s.m = m
	return old
}

func (s *mailSwitch) Send(ctx context.Context, msg mail.Message) error {
	return s.current().Send(ctx, msg)
}

// Provider names the current transport, as the operator digest reports it.
func (s *mailSwitch) Provider() string {
	if m, ok := s.current().(interface{ Provider() string }); ok {
		return m.Provider()
	}
	return "custom"
}

// Stats are the current transport's counters, as the metrics read them.
func (s *mailSwitch) Stats() mail.Stats {
	if m, ok := s.current().(interface{ Stats() mail.Stats }); ok {
		return m.Stats()
	}
	return mail.Stats{}
}

// syncBuffer collects log output from concurrent handlers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.buf.String() }

// eachEnv runs fn against a fresh API on every backend.
func eachEnv(t *testing.T, fn func(t *testing.T, e *env)) {
	storetest.Each(t, func(t *testing.T, dsn string) { fn(t, newEnv(t, dsn, nil)) })
}

// account creates an account with an unscoped key and returns (user_id, token).
func (e *env) account(email string) (string, string) {
	e.t.Helper()
	return e.newAccount(app.AccountRequest{Email: email, NoEmail: email == ""})
}

// adminAccount creates an administrator account.
func (e *env) adminAccount(email string) (string, string) {
	e.t.Helper()
	return e.newAccount(app.AccountRequest{Email: email, Admin: true})
}

func (e *env) newAccount(req app.AccountRequest) (string, string) {
	e.t.Helper()
	acct, key, err := e.app.CreateAccount(context.Background(), req)
	if err != nil {
		e.t.Fatalf("create account: %v", err)
	}
	return acct.UserID, key.APIKey
}

// key creates a key for userID with the given scopes.
func (e *env) key(userID string, req api.CreateKeyRequest) string {
	e.t.Helper()
	k, err := e.app.CreateKey(context.Background(), userID, req)
	if err != nil {
		e.t.Fatalf("create key: %v", err)
	}
	return k.APIKey
}

// response is a received answer, already checked against the OpenAPI document.
type response struct {
	Status  int
	Header  http.Header
	Body    []byte
	Cookies []*http.Cookie
}

// JSON decodes the body into a generic map.
func (r response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

// do sends a request. body may be nil, a string (sent verbatim) or any value
// (JSON-encoded); headers are alternating name, value pairs.
func (e *env) do(method, path, apiKey string, body any, headers ...string) response {
	e.t.Helper()
	var rdr io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rdr = strings.NewReader(b)
	case []byte:
		rdr = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rdr = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rdr)
	if err != nil {
		e.t.Fatal(err)
	}
	if rdr != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if apiKey != "" {
		req.Header.Set("X-API-Key", apiKey)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	reqBody := []byte(nil)
	if rdr != nil {
		reqBody, _ = io.ReadAll(rdr)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := response{Status: resp.StatusCode, Header: resp.Header, Body: got, Cookies: resp.Cookies()}
	e.checkOpenAPI(req, reqBody, r)
	return r
}

// checkOpenAPI fails the test when a response does not match the document, so
// the document cannot drift from what the server answers.
func (e *env) checkOpenAPI(req *http.Request, reqBody []byte, r response) {
	e.t.Helper()
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := e.rtr.FindRoute(vreq)
	if err != nil {
		if r.Status == http.StatusNotFound || r.Status == http.StatusMethodNotAllowed {
			return // no such operation: nothing to check against
		}
		e.t.Fatalf("%s %s is not in the OpenAPI document: %v", req.Method, req.URL.Path, err)
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: vreq, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status:  r.Status,
		Header:  r.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	input.SetBodyBytes(r.Body)
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		e.t.Fatalf("%s %s answered %d, which the OpenAPI document does not allow:\n%v\nbody: %s", req.Method, req.URL.Path, r.Status, err, r.Body)
	}
}

// wantProblem asserts an RFC 9457 problem with status and code.
func wantProblem(t testing.TB, r response, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body: %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	m := r.JSON(t)
	if m["code"] != code {
		t.Fatalf("code = %v, want %s; body: %s", m["code"], code, r.Body)
	}
	for _, f := range []string{"type", "title", "status", "detail"} {
		if _, ok := m[f]; !ok {
			t.Fatalf("problem lacks %q: %s", f, r.Body)
		}
	}
	if int(m["status"].(float64)) != status {
		t.Fatalf("problem status member %v != %d", m["status"], status)
	}
	return m
}
