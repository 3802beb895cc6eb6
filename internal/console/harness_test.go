package console_test

// The console's test harness: a real server over a real store, mailing
// through a real SMTP server whose messages the tests read; and one headless
// Chromium per test binary (Debian's), shared by the tests, each in a
// browser context of its own (its own cookies).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	imail "github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/mail/mailtest"
	"github.com/auditchain/auditchain/internal/realprog"
)

// env is one running service with its mail server.
type env struct {
	t    testing.TB
	srv  *httpapitest.Server
	smtp *mailtest.Server
}

func newEnv(t testing.TB, dsn string) *env {
	t.Helper()
	return newEnvConfig(t, dsn, nil)
}

// newEnvConfig is newEnv with the configuration adjusted by cfg (nil: as
// serve with no flags).
func newEnvConfig(t testing.TB, dsn string, cfg func(*config.Config)) *env {
	t.Helper()
	smtpd := &mailtest.Server{}
	smtpd.Start(t, nil)
	mailer, err := imail.New("smtp://"+smtpd.Addr(), imail.Options{Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	// Webhook retries without waiting, so a test drains them at once.
	o := apptest.Options{Mail: mailer, Config: cfg, WebhookBackoff: func(int) time.Duration { return 0 }}
	return &env{t: t, srv: httpapitest.Start(t, dsn, o), smtp: smtpd}
}

var codeInSubject = regexp.MustCompile(`sign-in code: ([0-9]{8})`)

// lastCode is the code of the last sign-in mail to email.
func (e *env) lastCode(email string) string {
	e.t.Helper()
	got := e.smtp.Received()
	for i := len(got) - 1; i >= 0; i-- {
		if len(got[i].To) == 1 && got[i].To[0] == email {
			if m := codeInSubject.FindSubmatch(got[i].Data); m != nil {
				return string(m[1])
			}
		}
	}
	e.t.Fatalf("no sign-in code was mailed to %s (%d messages)", email, len(got))
	return ""
}

// api calls the API with key and decodes the answer into out (when not nil).
func (e *env) api(method, path, key string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	req.Header.Set("X-API-Key", key)
	req.Header.Set("X-SVC-Surface", "hook")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
	}
	if resp.StatusCode >= 300 {
		e.t.Logf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode
}

// appendEvent appends an event at the tip through the API.
func (e *env) appendEvent(key string, ev map[string]any) {
	e.t.Helper()
	if st := e.api("POST", "/v1/events/append", key, ev, nil); st != http.StatusCreated && st != http.StatusOK {
		e.t.Fatalf("append: %d", st)
	}
}

// The browser: started by the first test that needs one, ended by TestMain.
var (
	browserOnce   sync.Once
	browserCtx    context.Context
	browserCancel = func() {}
	browserErr    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	browserCancel()
	os.Exit(code)
}

// chromiumPath is Debian's chromium, or whatever PATH has.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is the shared headless Chromium; without one the test is skipped,
// saying so, except under AUDITCHAIN_REQUIRE_REAL_PROGRAMS=1 (CI), where it
// fails.
func browser(t testing.TB) context.Context {
	t.Helper()
	browserOnce.Do(func() {
		path := chromiumPath()
		if path == "" {
			browserErr = "no chromium on PATH (apt-get install chromium)"
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless,
			chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		if err := chromedp.Do(ctx); err != nil {
			cancel()
			cancelAlloc()
			browserErr = "chromium at " + path + " did not start: " + err.Error()
			return
		}
		browserCtx, browserCancel = ctx, func() { cancel(); cancelAlloc() }
	})
	if browserErr != "" {
		if os.Getenv(realprog.RequireEnv) == "1" {
			t.Fatalf("browser tests need chromium: %s", browserErr)
		}
		t.Skipf("browser tests skipped: %s", browserErr)
	}
	return browserCtx
}

// tab is a page in a browser context of its own, for one test; it watches
// what the page does that hostile data must never make it do: open a dialog,
// or send a request to another origin.
type tab struct {
	ctx    context.Context
	origin string

	mu       sync.Mutex
	requests []string
	dialogs  []string
}

func newTab(t *testing.T, e *env) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser(t), chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tb := &tab{ctx: ctx, origin: e.srv.URL}
	if err := chromedp.Listen(ctx, tb.watch); err != nil {
		t.Fatal(err)
	}
	return tb
}

// run runs steps with a deadline. A step that fails says where the page
// was, so that a failure in CI can be read without rerunning it.
func (tb *tab) run(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v\n%s", err, tb.where())
	}
}

// where describes the page now: its address, its load state and the start of
// its main text.
func (tb *tab) where() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`location.href + " (" + document.readyState + "): " + (document.querySelector("main") || document.body).innerText.slice(0, 600)`))
	if err != nil {
		return "the page could not be read: " + err.Error()
	}
	return "the page: " + s
}

// settledClick clicks the first node sel matches once the page has loaded
// and the node is visible. The click is the element's own (HTMLElement.click:
// the activation a user's click runs, a form submitted with its button as
// the submitter), not a mouse event at coordinates: a page whose scripts
// still move nodes after it loaded (console.js rewrites every time into the
// viewer's zone) made a mouse click measured before the move land beside
// the button, one run in many (TestGateGovernanceInBrowser, twice). A
// disabled button does nothing, as under a mouse.
func settledClick(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if _, err := chromedp.Poll[chromedp.Void](`document.readyState === "complete"`)(ctx, t); err != nil {
			return err
		}
		if _, err := chromedp.WaitVisible(chromedp.CSS(sel))(ctx, t); err != nil {
			return err
		}
		found, err := chromedp.Evaluate[bool](`(el => { if (!el) return false; el.click(); return true })(document.querySelector(`+jsString(sel)+`))`)(ctx, t)
		if err == nil && !found {
			err = fmt.Errorf("click: no node matches %s", sel)
		}
		return err
	})
}

// text is the text of the first node sel matches.
func (tb *tab) text(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, tb *tab, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// signIn signs email in by the sign-in pages, with the code the mail server
// received, starting from GET /.
func (tb *tab) signIn(t *testing.T, e *env, email string) {
	t.Helper()
	tb.run(t,
		chromedp.Navigate(e.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/console/signin"] #email`)),
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		settledClick(`form[action="/console/signin"] button`),
		chromedp.WaitVisible(chromedp.CSS("#code")),
	)
	tb.run(t,
		chromedp.SendKeys(chromedp.CSS("#code"), e.lastCode(email)),
		settledClick(`form[action="/console/signin/code"] button`),
		chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Panels"]`)),
	)
}

// checkInert asserts that nothing hostile ran: no flag a payload sets, no
// dialog, no request to another origin.
func (tb *tab) checkInert(t *testing.T) {
	t.Helper()
	if pwned := eval[bool](t, tb, `window.__pwned !== undefined`); pwned {
		t.Error("a hostile payload ran script in the page (window.__pwned is set)")
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.dialogs) > 0 {
		t.Errorf("the page opened dialogs: %q", tb.dialogs)
	}
	for _, u := range tb.requests {
		// data: URLs leave nothing: Chromium draws its own form controls'
		// icons (the date picker's) with them.
		if !strings.HasPrefix(u, tb.origin+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page sent a request to another origin: %s", u)
		}
	}
}

// axe runs axe-core (pinned in .ci/npm/package.json; read from the
// node_modules realprog finds and evaluated in the page through DevTools,
// never served by the console) on the page and fails the test on every
// serious or critical violation.
func (tb *tab) axe(t *testing.T) {
	t.Helper()
	axeOnce.Do(func() {
		src, err := os.ReadFile(filepath.Join(realprog.NodeModules(t), "axe-core", "axe.min.js"))
		if err != nil {
			axeErr = err.Error()
			return
		}
		axeSource = string(src)
	})
	if axeErr != "" {
		t.Fatalf("axe-core: %s", axeErr)
	}
	if axeSource == "" {
		realprog.NodeModules(t) // skips (or fails in CI), saying why
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](axeSource)); err != nil {
		t.Fatalf("loading axe-core: %v", err)
	}
	type violation struct {
		ID     string `json:"id"`
		Impact string `json:"impact"`
		Help   string `json:"help"`
		Nodes  []struct {
			Target []any `json:"target"`
		} `json:"nodes"`
	}
	vs, err := chromedp.Run(ctx, chromedp.Evaluate[[]violation](`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations)`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe.run: %v", err)
	}
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("axe: %s (%s): %s, at %v", v.ID, v.Impact, v.Help, v.Nodes)
		}
	}
}

var (
	axeOnce   sync.Once
	axeSource string
	axeErr    string
)
