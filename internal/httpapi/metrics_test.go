package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/metrics"
	"github.com/auditchain/auditchain/internal/notify/webhook"
	"github.com/auditchain/auditchain/internal/schedule"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// exposition is one scrape of GET /metrics.
type exposition struct {
	text    string
	samples map[string]float64 // `name{labels}` as written → value
	types   map[string]string  // family → counter, gauge, histogram, summary
	labels  []metricLabel
}

type metricLabel struct{ series, name, value string }

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrape reads GET /metrics through the harness, which checks the answer
// against the OpenAPI document.
func (e *env) scrape(t *testing.T) exposition {
	t.Helper()
	r := e.do("GET", "/metrics", "", nil)
	if r.Status != 200 {
		t.Fatalf("metrics: %d %s", r.Status, r.Body)
	}
	x := exposition{text: string(r.Body), samples: map[string]float64{}, types: map[string]string{}}
	for line := range strings.Lines(x.text) {
		line = strings.TrimSuffix(line, "\n")
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(rest, " ")
			x.types[name] = kind
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series := line[:i]
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		x.samples[series] = v
		if j := strings.IndexByte(series, '{'); j >= 0 {
			for _, m := range labelPair.FindAllStringSubmatch(series[j:], -1) {
				x.labels = append(x.labels, metricLabel{series, m[1], m[2]})
			}
		}
	}
	return x
}

// idLike matches what an account, key, grant, proposal, webhook or event id,
// a token or an email looks like: values no label may hold.
var idLike = []*regexp.Regexp{
	regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), // UUID
	regexp.MustCompile(`(?i)[0-9a-f]{12,}`),                                                // a long hex id or hash
	regexp.MustCompile(`^[a-z]+[-_][0-9a-f]{6,}`),                                          // prefixed ids: evt-…, prop-…
	regexp.MustCompile(`^ac_`),                                                             // API key tokens
	regexp.MustCompile(`@`),                                                                // emails
}

// Each domain metric moves when its action happens, through the API on both
// stores, and no label value names an object.
func TestDomainMetricsMoveWithTheirActions(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("ops@example.com")
		before := e.scrape(t)
		ids := []string{user}

		// Appends, by kind.
		if r := e.do("POST", "/v1/events", key, ev("evt-m-1", 0, nil)); r.Status != 200 {
			t.Fatalf("append: %d %s", r.Status, r.Body)
		}
		if r := e.do("POST", "/v1/events/append", key, map[string]any{"event_id": "evt-m-2", "event_type": "tool_call"}); r.Status != 200 {
			t.Fatalf("append next: %d %s", r.Status, r.Body)
		}
		if r := e.do("POST", "/v1/events/batch", key, map[string]any{"events": []any{ev("evt-m-3", 10, nil), ev("evt-m-4", 11, nil)}}); r.Status != 200 || r.JSON(t)["ingested"] != float64(2) {
			t.Fatalf("batch: %d %s", r.Status, r.Body)
		}
		// A grant (grant.created: a service event), a gate check and a tool
		// call through the gate (the call: tool_call).
		gid := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 5, "allowed_tools": []string{"bash"}}))
		ids = append(ids, gid)
		if r := e.do("GET", "/v1/grants/status?subagent=s&tool=curl", key, nil); r.Status != 200 || r.JSON(t)["status"] != "tool_not_allowed" {
			t.Fatalf("grant status: %d %s", r.Status, r.Body)
		}
		if got := e.toolCall(key, toolCallBody("evt-m-5", "s", "bash")); got["gate_status"] != "authorized" {
			t.Fatalf("tool call: %v", got)
		}
		// A refusal.
		wantProblem(t, e.do("GET", "/v1/keys", "", nil), 401, "missing_token")
		// Proposals: proposed (a service event), ratified by another identity,
		// and another rejected.
		proposer, ratifier := e.govIdentity(user, "m-a"), e.govIdentity(user, "m-b")
		pid := e.govPropose(proposer.token, govDenyBody("s", "curl"))["proposal_id"].(string)
		enactsBefore := e.scrape(t).samples[`auditchain_proposal_transitions_total{transition="enact"}`]
		// Refused (409 not_ratified): nothing committed, nothing counted.
		wantProblem(t, e.do("POST", govProposalsPath+"/"+pid+"/enact", proposer.token, nil), 409, "not_ratified")
		e.govTransition(ratifier.token, pid, "ratify")
		if got := e.govTransition(proposer.token, pid, "enact"); got["status"] != "enacted" {
			t.Fatalf("enact: %v", got)
		}
		if got := e.scrape(t).samples[`auditchain_proposal_transitions_total{transition="enact"}`] - enactsBefore; got != 1 {
			t.Errorf("a refused enact and an enactment moved the enact transitions by %v, want 1", got)
		}
		other := e.govPropose(proposer.token, govDenyBody("s", "wget"))["proposal_id"].(string)
		e.govTransition(ratifier.token, other, "reject")
		ids = append(ids, pid, other, proposer.id, ratifier.id)
		// A webhook delivered (grant.revoked; the revoke is a service event).
		rc := newReceiver(t, always(204))
		wh := e.register(key, rc, []string{"grant.revoked"})
		ids = append(ids, wh["id"].(string), e.revoke(t, key, "r"))
		if res := e.drain(t); res["sent"] != float64(1) {
			t.Fatalf("drain: %v", res)
		}
		// A sign-in code mailed.
		if r := e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": "new@example.com", "acceptances": e.acceptAll()}); r.Status != 202 {
			t.Fatalf("otp request: %d %s", r.Status, r.Body)
		}
		// A run of a job by the scheduler (RunNow: no timers to wait for).
		runner := schedule.New(e.app.Jobs(), schedule.Options{})
		if err := runner.RunNow(context.Background(), "anchor"); err != nil {
			t.Fatal(err)
		}

		after := e.scrape(t)
		// Each series moved by at least this much (other tests of the
		// package may add to the same process-wide counters meanwhile).
		for series, want := range map[string]float64{
			`auditchain_events_appended_total{kind="single"}`:                      1,
			`auditchain_events_appended_total{kind="append_next"}`:                 1,
			`auditchain_events_appended_total{kind="batch"}`:                       2,
			`auditchain_events_appended_total{kind="tool_call"}`:                   1,
			`auditchain_events_appended_total{kind="service"}`:                     8, // grant ×2, revoke, propose ×2, ratify, enact, reject
			`auditchain_gate_decisions_total{status="tool_not_allowed"}`:           1,
			`auditchain_gate_decisions_total{status="authorized"}`:                 1,
			`auditchain_refusals_total{code="missing_token"}`:                      1,
			`auditchain_proposal_transitions_total{transition="propose"}`:          2,
			`auditchain_proposal_transitions_total{transition="ratify"}`:           1,
			`auditchain_proposal_transitions_total{transition="enact"}`:            1,
			`auditchain_proposal_transitions_total{transition="reject"}`:           1,
			`auditchain_webhook_deliveries_total{outcome="ok"}`:                    1,
			`auditchain_webhook_delivery_duration_seconds_count{outcome="ok"}`:     1,
			`auditchain_mail_messages_total{kind="sign_in_code",outcome="sent"}`:   1,
			`auditchain_job_runs_total{job="anchor",outcome="ok"}`:                 1,
			`auditchain_job_duration_seconds_count{job="anchor"}`:                  1,
			`auditchain_http_requests_total{route="POST /v1/events",status="200"}`: 1,
		} {
			if got := after.samples[series] - before.samples[series]; got < want {
				t.Errorf("%s moved by %v, want at least %v", series, got, want)
			}
		}
		for _, l := range after.labels {
			for _, re := range idLike {
				if l.name != "le" && l.name != "quantile" && re.MatchString(l.value) {
					t.Errorf("%s: label %s=%q looks like an id (%s)", l.series, l.name, l.value, re)
				}
			}
		}
		for _, id := range ids {
			if strings.Contains(after.text, id) {
				t.Errorf("the exposition names %s", id)
			}
		}
	})
}

// The dashboard under deploy/grafana queries only metrics the service
// exposes, and every domain metric; docs/operations.md's table lists every
// auditchain_ metric exposed, each with its type, and nothing else.
func TestDashboardAndDocsNameExposedMetrics(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), nil)
	x := e.scrape(t)
	family := func(name string) (string, bool) {
		if _, ok := x.types[name]; ok {
			return name, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				if k := x.types[base]; k == "histogram" || k == "summary" {
					return base, true
				}
			}
		}
		return name, false
	}

	raw, err := os.ReadFile("../../deploy/grafana/auditchain.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/auditchain.json: %v", err)
	}
	metricName := regexp.MustCompile(`\b(?:auditchain|go|process)_[a-z0-9_]+`)
	queried := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range metricName.FindAllString(tg.Expr, -1) {
				f, ok := family(name)
				if !ok {
					t.Errorf("panel %q queries %s, which GET /metrics does not expose", p.Title, name)
				}
				queried[f] = true
			}
		}
	}
	domain := metrics.NewRegistry()
	domain.RegisterDomain()
	for line := range strings.Lines(string(domain.Expose())) {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if name, _, _ := strings.Cut(rest, " "); !queried[name] {
				t.Errorf("no dashboard panel queries %s", name)
			}
		}
	}

	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^ *\\| `([a-z_:][a-z0-9_:]*)` \\| (counter|gauge|histogram|summary) \\|([^\n]*)$")
	documented := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		name, kind, rest := m[1], m[2], m[3]
		documented[name] = true
		if (strings.Contains(rest, "Linux only") || strings.Contains(rest, "Unix only")) && runtime.GOOS != "linux" {
			continue
		}
		if got, ok := x.types[name]; !ok || got != kind {
			t.Errorf("docs/operations.md lists %s as a %s; GET /metrics has it as %q", name, kind, got)
		}
	}
	if len(documented) < 20 {
		t.Fatalf("docs/operations.md's metrics table lists %d metrics", len(documented))
	}
	for name := range x.types {
		if !documented[name] {
			t.Errorf("%s is exposed but not in docs/operations.md's metrics table", name)
		}
	}
}

// Each failed outcome of a webhook delivery is counted under its own label,
// attempt by attempt, with its latency observed: a receiver answering 500
// (http_error), one that never answers within the attempt's timeout
// (timeout), a loopback receiver that a deployment without
// --webhook-allow-private refuses to dial (refused), and a port nothing
// listens on (error). Through the drain route, on both stores.
func TestWebhookDeliveryOutcomesAreCounted(t *testing.T) {
	const attemptTimeout = 50 * time.Millisecond
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		closedPort := func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			return "http://" + addr + "/hook"
		}
		hanging := func(t *testing.T) string {
			// Holds every request until the client hangs up, which the server
			// notices only once the body is read, or the test ends.
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) })
			return srv.URL + "/hook"
		}
		for _, c := range []struct {
			outcome   string
			url       func(t *testing.T) string
			egress    *webhook.Egress // at delivery (nil: loopback allowed); the URL is registered with loopback allowed
			wantError string          // each attempt's error in GET /v1/webhooks/{id}/deliveries
		}{
			{metrics.WebhookHTTPError, func(t *testing.T) string { return newReceiver(t, always(500)).srv.URL + "/hook" },
				nil, "status 500"},
			{metrics.WebhookTimeout, hanging,
				webhook.NewEgress(webhook.Options{AllowPrivate: true, Timeout: attemptTimeout}), "timeout after " + attemptTimeout.String()},
			{metrics.WebhookRefused, func(t *testing.T) string { return newReceiver(t, always(204)).srv.URL + "/hook" },
				webhook.NewEgress(webhook.Options{}), "refused: resolves to a loopback address"},
			{metrics.WebhookError, closedPort,
				nil, "connection refused"},
		} {
			t.Run(c.outcome, func(t *testing.T) {
				_, key := e.account(c.outcome + "@example.com")
				r := e.do("POST", "/v1/webhooks", key, map[string]any{"url": c.url(t), "types": []string{"grant.revoked"}})
				if r.Status != 201 {
					t.Fatalf("POST /v1/webhooks: %d %s", r.Status, r.Body)
				}
				hook := r.JSON(t)["id"].(string)
				// The operator restarts the service with this egress (a
				// deployment without --webhook-allow-private, a shorter
				// attempt timeout), and back when the case ends.
				registered := e.opts
				delivering := registered
				delivering.egress = c.egress
				e.restart(e.dsn, delivering, nil)
				defer e.restart(e.dsn, registered, nil)
				e.revoke(t, key, "r")

				before := e.scrape(t)
				if res := e.drain(t); res["sent"] != float64(0) || res["failed"] != float64(1) {
					t.Fatalf("drain: %v, want the one row failed", res)
				}
				after := e.scrape(t)

				r = e.do("GET", "/v1/webhooks/"+hook+"/deliveries", key, nil)
				if r.Status != 200 {
					t.Fatalf("deliveries: %d %s", r.Status, r.Body)
				}
				var got struct {
					Deliveries []struct{ Error *string } `json:"deliveries"`
				}
				if err := json.Unmarshal(r.Body, &got); err != nil {
					t.Fatal(err)
				}
				if len(got.Deliveries) == 0 {
					t.Fatal("no delivery attempts recorded")
				}
				for _, d := range got.Deliveries {
					if d.Error == nil || *d.Error != c.wantError {
						t.Errorf("attempt error %v, want %q", d.Error, c.wantError)
					}
				}
				attempts := float64(len(got.Deliveries))
				// The tests of this package run one at a time and nothing
				// else delivers meanwhile: every outcome moved exactly.
				for _, outcome := range []string{metrics.WebhookOK, metrics.WebhookHTTPError, metrics.WebhookTimeout, metrics.WebhookRefused, metrics.WebhookError} {
					want := 0.0
					if outcome == c.outcome {
						want = attempts
					}
					for _, series := range []string{
						`auditchain_webhook_deliveries_total{outcome="` + outcome + `"}`,
						`auditchain_webhook_delivery_duration_seconds_count{outcome="` + outcome + `"}`,
					} {
						if moved := after.samples[series] - before.samples[series]; moved != want {
							t.Errorf("%s moved by %v, want %v", series, moved, want)
						}
					}
				}
				if c.outcome == metrics.WebhookTimeout {
					series := `auditchain_webhook_delivery_duration_seconds_sum{outcome="timeout"}`
					if waited := after.samples[series] - before.samples[series]; waited < attempts*attemptTimeout.Seconds() {
						t.Errorf("%s moved by %vs, want at least %v attempts × %v", series, waited, attempts, attemptTimeout)
					}
				}
			})
		}
	})
}
