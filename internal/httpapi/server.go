// Package httpapi is auditchain's HTTP JSON API under /v1. routes.go lists every
// route with its capability; handlers return errors that writeError turns into
// RFC 9457 problems in one place.
package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/buildinfo"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/console"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/internal/metrics"
	"github.com/auditchain/auditchain/pkg/api"
)

// handlerFunc is a route handler; a non-nil error is answered by writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// Server is the http.Handler of the API.
type Server struct {
	app     *app.App
	cfg     config.Config
	log     *slog.Logger
	mux     *http.ServeMux
	openapi []byte
	// version is the build's, as GET /v1/health reports it.
	version string
	// done closes on shutdown so long-lived streams end (Shutdown waits for
	// handlers but does not cancel them).
	done      chan struct{}
	closeOnce sync.Once
	// crossOrigin refuses unsafe requests a browser marks cross-site; it
	// guards the session cookie, never an API key (CONTRACT.md "Credentials").
	crossOrigin *http.CrossOriginProtection
	// trustedProxies are the peers whose X-Forwarded-For names the client
	// (--trusted-proxies; client.go).
	trustedProxies []netip.Prefix

	// literal lists, for each path of a route without wildcards, its
	// methods: another method's wildcard route must not answer for it.
	literal map[string][]string

	requests *metrics.CounterVec
	latency  *metrics.HistogramVec
	registry *metrics.Registry

	// agents serves POST /v1/mcp.
	agents *mcpserver.HTTPHandler

	// console serves GET / and /console/ (HTML for people, not the API:
	// outside routes(); docs/decisions/console.md).
	console *console.Console
}

// NewServer builds the handler over a, the App built with cfg, with every
// dependency it has; nothing of it changes afterwards. openapiJSON is the
// document served at /v1/openapi.json.
func NewServer(a *app.App, cfg config.Config, log *slog.Logger, openapiJSON []byte) *Server {
	s := &Server{app: a, cfg: cfg, log: log, mux: http.NewServeMux(), openapi: openapiJSON, done: make(chan struct{}),
		version:     buildinfo.Read().String(),
		crossOrigin: http.NewCrossOriginProtection()}
	// config.Parse refused a --trusted-proxies that does not parse; a
	// Config built by hand with one trusts nobody.
	if proxies, err := config.ParseTrustedProxies(cfg.TrustedProxies); err == nil {
		s.trustedProxies = proxies
	} else {
		log.Error("--trusted-proxies ignored: the TCP peer is every request's client", "err", err)
	}
	// A registry of our own: nothing global, so several servers (tests, replicas
	// in one process) never collide.
	s.registry = metrics.NewRegistry()
	s.requests = s.registry.NewCounterVec("auditchain_http_requests_total", "HTTP requests by route pattern and status.", "route", "status")
	s.latency = s.registry.NewHistogramVec("auditchain_http_request_duration_seconds", "HTTP request latency by route pattern.",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "route")
	s.registry.RegisterDomain()
	// counter is a counter read from the app when scraped; label, when not
	// empty, is "name=value".
	counter := func(name, help, label string, count func() int64) {
		var labels []metrics.Label
		if k, v, ok := strings.Cut(label, "="); ok {
			labels = []metrics.Label{{Name: k, Value: v}}
		}
		s.registry.CounterFunc(name, help, func() float64 { return float64(count()) }, labels...)
	}
	const (
		pgAppendsHelp      = "Client appends on PostgreSQL by path: optimistic (one statement) or locked (events of a machine, and fallbacks)."
		headCacheHelp      = "Optimistic appends on PostgreSQL against this replica's cached head: hit (stored without reading the head), stale (another replica or path had appended; read again)."
		webhookAttemptHelp = "Webhook delivery attempts by this replica: ok (2xx) or failed (anything else, refused targets and timeouts included)."
		webhookRowHelp     = "Webhook notification rows this replica's drains settled: sent (every endpoint took it) or failed (after three attempts)."
		rememberedHelp     = "Appends on SQLite placed against the head the writer remembered instead of reading it (hit), and remembered heads the head row did not match, read again (stale: a defect, reported so that it shows)."
		rollbackHelp       = "Batch statements of optimistic appends on PostgreSQL that rolled back, their appends then sent one by one, by reason: refusal (quota or event_id after the compare-and-set), deadlock, lock_timeout (a head held over 100 ms), other."
	)
	rollbacks := func(pick func(app.StoreStats) int64) func() int64 {
		return func() int64 { return pick(a.StoreStats()) }
	}
	counter("auditchain_store_io_faults_total",
		"SQLite connections given up after a storage fault (I/O error, full disk, corruption) and replaced.", "",
		func() int64 { return a.StoreStats().IOFaults })
	counter("auditchain_store_wal_checkpoints_total",
		"SQLite WAL checkpoints run in the background, off the writer (0 on PostgreSQL).", "",
		func() int64 { return a.StoreStats().WALCheckpoints })
	counter("auditchain_sqlite_wal_frames_total",
		"WAL frames written by the SQLite writer's commits: one per page a transaction dirtied (0 on PostgreSQL).", "",
		func() int64 { return a.StoreStats().WALFrames })
	counter("auditchain_pg_appends_total", pgAppendsHelp, "path=optimistic", func() int64 { return a.WriteStats().OptimisticAppends })
	counter("auditchain_pg_appends_total", pgAppendsHelp, "path=locked", func() int64 { return a.WriteStats().LockedAppends })
	counter("auditchain_pg_head_cache_total", headCacheHelp, "result=hit", func() int64 { return a.WriteStats().HeadCacheHits })
	counter("auditchain_pg_head_cache_total", headCacheHelp, "result=stale", func() int64 { return a.WriteStats().HeadCacheStale })
	counter("auditchain_sqlite_remembered_heads_total", rememberedHelp, "result=hit", func() int64 { return a.WriteStats().RememberedHeadHits })
	counter("auditchain_sqlite_remembered_heads_total", rememberedHelp, "result=stale", func() int64 { return a.WriteStats().RememberedHeadStale })
	counter("auditchain_pg_append_batches_total",
		"Statements that carried optimistic appends on PostgreSQL (several accounts' appends share one); with auditchain_pg_append_batched_total, the mean batch size.", "",
		func() int64 { return a.WriteStats().BatchStatements })
	counter("auditchain_pg_append_batched_total", "Optimistic appends sent in those statements on PostgreSQL.", "",
		func() int64 { return a.WriteStats().BatchedAppends })
	counter("auditchain_pg_append_batch_rollbacks_total", rollbackHelp, "reason=refusal", rollbacks(func(st app.StoreStats) int64 { return st.BatchRefusals }))
	counter("auditchain_pg_append_batch_rollbacks_total", rollbackHelp, "reason=deadlock", rollbacks(func(st app.StoreStats) int64 { return st.BatchDeadlocks }))
	counter("auditchain_pg_append_batch_rollbacks_total", rollbackHelp, "reason=lock_timeout", rollbacks(func(st app.StoreStats) int64 { return st.BatchLockTimeouts }))
	counter("auditchain_pg_append_batch_rollbacks_total", rollbackHelp, "reason=other", rollbacks(func(st app.StoreStats) int64 { return st.BatchOther }))
	counter("auditchain_mail_retries_total", "Mail delivery attempts repeated after a temporary failure.", "",
		mailStat(a, func(s mail.Stats) uint64 { return s.Retries }))
	counter("auditchain_webhook_attempts_total", webhookAttemptHelp, "outcome=ok", func() int64 { return a.NotifyStats().AttemptsOK })
	counter("auditchain_webhook_attempts_total", webhookAttemptHelp, "outcome=failed", func() int64 { return a.NotifyStats().AttemptsFailed })
	counter("auditchain_webhook_rows_total", webhookRowHelp, "outcome=sent", func() int64 { return a.NotifyStats().RowsSent })
	counter("auditchain_webhook_rows_total", webhookRowHelp, "outcome=failed", func() int64 { return a.NotifyStats().RowsFailed })
	// Witness lag (docs/integrity.md "Witnesses"), by witness name: read
	// from the store (at most every 10 s) when scraped; no series without
	// --witness.
	witnessLag := func(pick func(app.WitnessLag) int64) func() []metrics.Sample {
		return func() []metrics.Sample {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			lags, err := a.WitnessLags(ctx)
			if err != nil {
				log.Warn("witness lag not read for metrics", "err", err)
				return nil
			}
			var out []metrics.Sample
			for name, l := range lags {
				out = append(out, metrics.Sample{Labels: []metrics.Label{{Name: "witness", Value: name}}, Value: float64(pick(l))})
			}
			return out
		}
	}
	s.registry.Collector("auditchain_witness_lag_leaves",
		"Per witness: over every account, the newest sealed block's size (as the witness job last saw it) minus the size the witness last cosigned, summed.",
		"gauge", witnessLag(func(l app.WitnessLag) int64 { return l.Leaves }))
	s.registry.Collector("auditchain_witness_behind_accounts",
		"Per witness: accounts whose newest sealed block (as the witness job last saw it) the witness has not cosigned.",
		"gauge", witnessLag(func(l app.WitnessLag) int64 { return l.Accounts }))
	s.registry.RegisterRuntime(processStart)

	s.literal = map[string][]string{}
	for _, rt := range s.routes() {
		s.mux.Handle(rt.pattern, s.guard(rt))
		if method, path, _ := strings.Cut(rt.pattern, " "); !strings.Contains(path, "{") {
			s.literal[path] = append(s.literal[path], method)
		}
	}
	s.console = console.New(console.Deps{App: a, Config: cfg, Log: log, CrossOrigin: s.crossOrigin,
		SessionCookie: s.sessionCookie, ClientAddress: s.clientAddress, Status: statusOfCode,
		CheckText: checkText, CheckInput: checkInput})
	s.mux.Handle("GET /{$}", s.console)
	s.mux.Handle(console.Prefix, s.console)
	s.agents = mcpserver.NewHTTPHandler(s, func(r *http.Request) []domain.Scope { return principal(r).Scopes }, log)
	return s
}

// mailStat reads one of the mailer's counters (0 for a mailer without them).
func mailStat(a *app.App, pick func(mail.Stats) uint64) func() int64 {
	return func() int64 {
		st, _ := a.MailStats()
		return int64(pick(st))
	}
}

// Close ends open streams; register it with http.Server.RegisterOnShutdown.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.done) }) }

// ServeHTTP resolves the route once, so unknown paths and wrong methods answer
// as problems too, and every request is counted under its route pattern.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	_, pattern := s.mux.Handler(r)
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	reqID := requestID(r)
	sw.Header().Set("X-Request-Id", reqID)
	defer func() {
		if rec := recover(); rec != nil {
			if rec == http.ErrAbortHandler {
				panic(rec)
			}
			s.log.Error("handler panicked", "route", pattern, "panic", rec)
			if !sw.wrote {
				writeError(sw, r, s.log, &domain.Error{Code: domain.CodeInternal, Detail: "the server could not complete the request; it has been logged"})
			}
		}
		label := pattern
		if label == "" {
			label = "unmatched"
		}
		s.requests.Inc(label, strconv.Itoa(sw.status))
		s.latency.Observe(label, time.Since(start).Seconds())
		// One line per request at the default level: never the key, the
		// cookie, the query or a body (the route pattern, not the path, so no
		// ids either).
		s.log.Info("request", "method", r.Method, "route", label, "status", sw.status,
			"duration_ms", float64(time.Since(start).Microseconds())/1000, "request_id", reqID)
	}()
	sw.Header().Set("Cache-Control", "no-store")
	if pattern == "" {
		s.unmatched(sw, r)
		return
	}
	if methods, ok := s.literal[r.URL.Path]; ok && strings.Contains(pattern, "{") {
		// GET /v1/events/search is no event: POST /v1/events/search owns
		// the path, and only the wildcard of another route matched it.
		sw.Header().Set("Allow", strings.Join(methods, ", "))
		writeError(sw, r, s.log, &domain.Error{Code: domain.CodeMethodNotAllowed, Detail: "this route does not accept " + r.Method})
		return
	}
	s.mux.ServeHTTP(sw, r)
}

// unmatched answers 404 or 405 as a problem; the mux knows which.
func (s *Server) unmatched(w http.ResponseWriter, r *http.Request) {
	h, _ := s.mux.Handler(r)
	probe := &headerProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.header.Get("Allow"))
		writeError(w, r, s.log, &domain.Error{Code: domain.CodeMethodNotAllowed,
			Detail: "this route does not accept " + r.Method})
		return
	}
	writeError(w, r, s.log, &domain.Error{Code: domain.CodeNotFound, Detail: "no route matches " + r.URL.Path})
}

// unboundedRoutes are not cut by --request-timeout: they stream, or their work
// grows with the chain (a scan of millions of events) or with the accounts.
var unboundedRoutes = map[string]bool{
	"GET /v1/events/stream": true,
	"GET /v1/chain/export":  true,
	"GET /v1/chain/verify":  true,
	"POST /v1/heal/scan":    true,
	"POST /v1/heal/run":     true,
	// A tunnel: each tool call it carries is a request of its own route,
	// bounded (or not) there.
	"POST /v1/mcp": true,
}

// guard applies a route's authentication and capability, then runs its handler.
// Every other route's context ends after --request-timeout, so a store that
// stopped answering (a PostgreSQL behind a silent network partition, say) gets
// 503 service_unavailable instead of requests that hang and hold connections.
func (s *Server) guard(rt route) http.Handler {
	bounded := !unboundedRoutes[rt.pattern] && rt.auth.kind != accessCron
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bounded {
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		if f := rt.auth.feature; f != "" && !s.enabled(f) {
			writeError(w, r, s.log, &domain.Error{Code: domain.CodeFeatureDisabled,
				Detail: f + " are not enabled on this deployment (serve --" + f + ")"})
			return
		}
		r, err := s.authorize(rt, r)
		if err != nil {
			if rt.auth.agent {
				challenge(w, r, err)
			}
			writeError(w, r, s.log, err)
			return
		}
		if p := principal(r); p.UserID != "" && !rt.auth.agent {
			s.app.CountCall(p.UserID, capabilityOf(rt.auth), surfaceOf(r))
		}
		if rt.handler == nil {
			writeError(w, r, s.log, &domain.Error{Code: domain.CodeNotImplemented,
				Detail: rt.pattern + " is part of the interface but is not built yet"})
			return
		}
		if err := checkText(rt.pattern, r); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		if err := rt.handler(w, r); err != nil {
			writeError(w, r, s.log, err)
		}
	})
}

// enabled reports whether the serve flag feature is on.
func (s *Server) enabled(feature string) bool {
	switch feature {
	case featureTeams:
		return s.cfg.Teams
	}
	return false
}

// capabilityOf names a route's capability for the usage meter.
func capabilityOf(a access) string {
	if a.kind == accessScope || a.kind == accessAdmin {
		return string(a.scope)
	}
	return app.CapabilityNone
}

// surfaceOf is the X-SVC-Surface a call declares ("rest" when absent or not
// one of the surfaces: the meter counts the call either way).
func surfaceOf(r *http.Request) string {
	if h := surfaceHeader(r); h != "" && slices.Contains(domain.Surfaces, h) {
		return h
	}
	return "rest"
}

// surfaceHeaderKey is X-SVC-Surface as net/http keeps a received header's
// name (http.CanonicalHeaderKey): read by that key, the header costs no
// canonicalisation, which Header.Get does on every call with "X-SVC-Surface"
// — on every credentialed call, for the usage meter.
const surfaceHeaderKey = "X-Svc-Surface"

// surfaceHeader is the request's X-SVC-Surface header ("" when absent).
func surfaceHeader(r *http.Request) string {
	if v := r.Header[surfaceHeaderKey]; len(v) > 0 {
		return v[0]
	}
	return ""
}

type ctxKey struct{}

// principal returns the authenticated caller of a credentialed route.
func principal(r *http.Request) app.Principal {
	p, _ := r.Context().Value(ctxKey{}).(app.Principal)
	return p
}

// authorize checks a route's access rule and returns the request carrying the
// authenticated principal. The credential is the X-API-Key header, or else
// the session cookie; an unsafe request carrying only the cookie is refused
// when a browser marks it cross-site. With --legal-enforce every credentialed
// route but auth, keys and legal waits for the required documents.
func (s *Server) authorize(rt route, r *http.Request) (*http.Request, error) {
	a := rt.auth
	switch a.kind {
	case accessPublic:
		return r, nil
	case accessCron:
		return r, s.checkCronSecret(r)
	}
	authenticate := s.authenticate
	if a.agent {
		if err := checkAgentOrigin(r); err != nil {
			return r, err
		}
		authenticate = s.authenticateAgent
	}
	p, err := authenticate(r)
	if err != nil {
		return r, err
	}
	if err := checkAccess(a, p); err != nil {
		return r, err
	}
	if !legalExempt(rt.pattern) {
		if err := s.app.RequireAcceptances(r.Context(), p); err != nil {
			return r, err
		}
	}
	return r.WithContext(context.WithValue(r.Context(), ctxKey{}, p)), nil
}

// authenticate resolves the request's credential: an API key, or a session
// cookie.
func (s *Server) authenticate(r *http.Request) (app.Principal, error) {
	if key := r.Header.Get("X-API-Key"); key != "" {
		return s.app.Authenticate(r.Context(), key)
	}
	c, err := r.Cookie(api.SessionCookie)
	if err != nil || c.Value == "" {
		return s.app.Authenticate(r.Context(), "") // missing_token
	}
	if err := s.crossOrigin.Check(r); err != nil {
		return app.Principal{}, &domain.Error{Code: domain.CodeCrossOrigin,
			Detail: "a cross-site request may not use the session cookie for " + r.Method + "; send an API key instead"}
	}
	return s.app.AuthenticateSession(r.Context(), c.Value)
}

// authenticateAgent resolves the API key of an agent surface's request:
// X-API-Key, or else a bearer token.
func (s *Server) authenticateAgent(r *http.Request) (app.Principal, error) {
	key := mcpserver.APIKey(r.Header)
	if key == "" {
		return app.Principal{}, errAgentMissingKey
	}
	return s.app.Authenticate(r.Context(), key)
}

// legalExempt reports whether a route works while required legal documents
// are unmet (CONTRACT.md "Legal agreements": auth, keys and legal).
func legalExempt(pattern string) bool {
	_, path, _ := strings.Cut(pattern, " ")
	for _, prefix := range []string{"/v1/auth/", "/v1/keys", "/v1/legal/"} {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// checkAccess applies a route's capability rule to an authenticated caller.
func checkAccess(a access, p app.Principal) error {
	switch a.kind {
	case accessScope:
		for _, s := range []domain.Scope{a.scope, a.also} {
			if s != "" && !domain.Allows(p.Scopes, s) {
				return (&domain.Error{Code: domain.CodeScopeMissing,
					Detail: "this key lacks the " + string(s) + " scope"}).With("scope", string(s))
			}
		}
	case accessUnscoped:
		if !p.Unscoped() {
			return (&domain.Error{Code: domain.CodeScopeMissing,
				Detail: "key management needs an unscoped key"}).With("scope", "unscoped")
		}
	case accessSession:
		if p.Kind != app.KindSession {
			return &domain.Error{Code: domain.CodeSessionRequired,
				Detail: "this route describes or ends a signed-in session: send the session cookie"}
		}
	case accessAdmin:
		if !domain.Allows(p.Scopes, a.scope) {
			return (&domain.Error{Code: domain.CodeScopeMissing,
				Detail: "this key lacks the " + string(a.scope) + " scope"}).With("scope", string(a.scope))
		}
		if !p.IsAdmin {
			return &domain.Error{Code: domain.CodeAdminOnly, Detail: "only an administrator may call this route"}
		}
	}
	return nil
}

// checkCronSecret guards the operator cron routes (SPEC.md "Authentication" 4):
// never open when no secret is configured, compared in constant time, never logged.
func (s *Server) checkCronSecret(r *http.Request) error {
	want := s.cfg.CronSecret
	if want == "" {
		return &domain.Error{Code: domain.CodeCronUnconfigured, Detail: "no cron secret is configured on this deployment"}
	}
	got := r.Header.Get("X-Cron-Secret")
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return &domain.Error{Code: domain.CodeUnauthorized, Detail: "the X-Cron-Secret header is absent or wrong"}
	}
	return nil
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and SetWriteDeadline (SSE).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// headerProbe captures what the mux's fallback handler would answer.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header         { return p.header }
func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *headerProbe) WriteHeader(code int)        { p.status = code }

// processStart is when this process started, for process_start_time_seconds.
var processStart = time.Now()

// requestID is the caller's X-Request-Id when it is a short token (a proxy's
// id, kept so logs on both sides match), else a new random one. It is echoed
// in the answer's X-Request-Id and logged with the request.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 64 && strings.Trim(id,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == "" {
		return id
	}
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
