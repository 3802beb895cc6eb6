// Package client is the Go client of auditchain's HTTP API (CONTRACT.md
// "Agent surfaces"). Beyond one method per route it does what every
// integrator would otherwise write again, and get subtly wrong:
//
//   - Append keeps the account's chain tip: it reads GET /v1/chain/tip once,
//     fills sequence and prev_hash, and follows the service's
//     expected_prev_hash when another writer (or the service itself:
//     governance.*, grant.*, chain_repair events) moved the tip;
//   - it computes payload_hash locally (pkg/verify) and refuses an answer
//     whose hash differs;
//   - it signs events with the machine's Ed25519 key when given one;
//   - it retries an append whose answer was lost with the very same event
//     (same event_id, ts and content): the service answers a resent event with
//     the stored one, so nothing is written twice;
//   - it honours Retry-After on 429 and 503, within a bound;
//   - it sends X-SVC-Surface (sdk unless told otherwise).
//
// Errors the service answers are *Error values carrying the problem's code
// and members. The package depends on the standard library, pkg/api and
// pkg/verify only: importing it does not pull in the server.
package client

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// Surfaces the client can name in X-SVC-Surface (SPEC.md "POST /v1/events").
const (
	SurfaceSDK      = "sdk"
	SurfaceCLI      = "cli"
	SurfaceMCP      = "mcp"
	SurfaceMCPStdio = "mcp_stdio"
	SurfaceHook     = "hook"
)

// Client talks to one auditchain service with one API key. It is safe for
// concurrent use; appends through one Client are serialised, so that its view
// of the chain tip stays exact.
type Client struct {
	base    string
	key     string
	hc      *http.Client
	surface string
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error
	// retries bounds the extra attempts of one call (lost answers, 429/503).
	retries int
	// maxWait bounds one Retry-After wait.
	maxWait time.Duration

	session    string // a signed-in session's token, sent as its cookie
	cronSecret string // X-Cron-Secret, for the operator cron routes

	signer      ed25519.PrivateKey
	machine     string
	fingerprint string

	appendMu sync.Mutex
	tip      *api.ChainTip // nil until read
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc (http.DefaultClient otherwise). An
// in-process server can be reached by an hc whose Transport calls its handler.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithSurface names the surface sent in X-SVC-Surface (default sdk).
func WithSurface(s string) Option { return func(c *Client) { c.surface = s } }

// WithSigner signs every appended event as machineID with key: the event
// carries machine_id, signature (Ed25519 over the RFC 8785 bytes of raw) and
// signature_key (the key's fingerprint). The machine's public key must be
// registered (RegisterSigningKey) for the service to check the signatures.
func WithSigner(machineID string, key ed25519.PrivateKey) Option {
	return func(c *Client) {
		c.machine, c.signer = machineID, key
		c.fingerprint = verify.Fingerprint(key.Public().(ed25519.PublicKey))
	}
}

// WithSession authenticates with a signed-in session (the token VerifyOTP
// returns) instead of, or beside, an API key: the session routes
// (Session, Logout) need it.
func WithSession(token string) Option { return func(c *Client) { c.session = token } }

// WithCronSecret sends the operator's X-Cron-Secret, which the cron routes
// (RunCron, Jobs) need instead of a key.
func WithCronSecret(secret string) Option { return func(c *Client) { c.cronSecret = secret } }

// WithClock sets the clock that stamps events' ts (time.Now otherwise).
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithRetries sets how many extra attempts one call may make after a lost
// answer or a 429/503 (default 4), and the longest Retry-After it waits
// (default 30 s; a longer one is returned as the error).
func WithRetries(n int, maxWait time.Duration) Option {
	return func(c *Client) { c.retries, c.maxWait = n, maxWait }
}

// WithSleep replaces the wait between attempts (tests make it instant and
// record it).
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = sleep }
}

// New returns a client of the service at baseURL (for example
// http://127.0.0.1:8080) authenticating with apiKey.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Named without its password, or not at all when it does not parse:
		// a URL may carry credentials, and errors reach logs.
		shown := "that does not parse"
		if err == nil {
			shown = strconv.Quote(u.Redacted())
		}
		return nil, fmt.Errorf("client: base URL %s is not an http(s) URL with a host", shown)
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), key: apiKey, hc: http.DefaultClient, surface: SurfaceSDK,
		now: time.Now, sleep: sleepCtx, retries: 4, maxWait: 30 * time.Second}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Error is a problem the service answered (RFC 9457 with the spec's code).
type Error struct {
	Status int
	Code   string
	Title  string
	Detail string
	// Errors lists the fields of a 422 validation_error.
	Errors []api.FieldError
	// Members holds every member of the problem, the ones above included
	// (expected_prev_hash, remaining, proposal_id, …).
	Members map[string]json.RawMessage
	// RetryAfter is the Retry-After header of a 429 or 503, if any.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("auditchain: %d %s", e.Status, e.Code)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	for _, f := range e.Errors {
		if !strings.Contains(msg, f.Message) {
			msg += "; " + f.Field + ": " + f.Message
		}
	}
	return msg
}

// Member decodes the problem's member name into v; it reports whether the
// member was present and decoded.
func (e *Error) Member(name string, v any) bool {
	raw, ok := e.Members[name]
	return ok && json.Unmarshal(raw, v) == nil
}

// IsCode reports whether err is an *Error with code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// request is one API call.
type request struct {
	method string
	path   string
	query  url.Values
	body   any // JSON-encoded when not nil
	// idempotent: a lost answer may be retried (reads, and writes the
	// service answers idempotently).
	idempotent bool
	// duplicate, when set, is the code with which the service refuses a
	// resent write that the lost attempt had carried out (409
	// grant_id_exists): such a refusal is answered ErrAnswerLost.
	duplicate string
}

// ErrAnswerLost is returned (wrapping the service's refusal) when a write
// whose answer was lost was sent again and the service refused the resend
// as a duplicate: the first attempt was, most likely, carried out, but its
// answer (for a grant, its delegation token) is gone. Read the state back
// (Grants) rather than writing again.
var ErrAnswerLost = errors.New("client: the answer to the first attempt was lost and the resend was refused as a duplicate: the first attempt was most likely carried out")

// do sends r and decodes a 2xx answer into out (when not nil). A 429 or 503
// with Retry-After is waited and retried; a transport error (the request
// failed, or its answer was cut) is retried when r is idempotent. Any other
// non-2xx answer is an *Error.
func (c *Client) do(ctx context.Context, r request, out any) error {
	return c.send(ctx, r, func(resp *http.Response) error {
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			return fmt.Errorf("client: read the answer to %s %s: %w", r.method, r.path, err)
		}
		if out == nil || len(data) == 0 {
			return nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return &decodeError{fmt.Errorf("client: decode the answer to %s %s: %w", r.method, r.path, err)}
		}
		return nil
	})
}

// open sends r as do does and returns the 2xx response with its body unread;
// the caller closes it. Nothing is retried once the body is handed over.
func (c *Client) open(ctx context.Context, r request) (*http.Response, error) {
	var out *http.Response
	err := c.send(ctx, r, func(resp *http.Response) error { out = resp; return nil })
	return out, err
}

// decodeError is an answer that arrived whole but could not be decoded:
// resending the request would not help.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// send runs the attempts of r; each 2xx response goes to handle, which owns
// its body.
func (c *Client) send(ctx context.Context, r request, handle func(*http.Response) error) error {
	var body []byte
	if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return fmt.Errorf("client: encode %s %s: %w", r.method, r.path, err)
		}
	}
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	resent := false // after a lost answer
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, r.method, target, body, handle)
		if err == nil {
			return nil
		}
		var dup *Error
		if resent && r.duplicate != "" && errors.As(err, &dup) && dup.Code == r.duplicate {
			return fmt.Errorf("%w: %w", ErrAnswerLost, err)
		}
		if attempt >= c.retries || ctx.Err() != nil {
			return err
		}
		var pe *Error
		var de *decodeError
		switch {
		case errors.As(err, &pe):
			if (pe.Status != http.StatusTooManyRequests && pe.Status != http.StatusServiceUnavailable) ||
				pe.RetryAfter <= 0 || pe.RetryAfter > c.maxWait {
				return err
			}
			if serr := c.sleep(ctx, pe.RetryAfter); serr != nil {
				return err
			}
		case errors.As(err, &de):
			return err
		case r.idempotent:
			// The answer was lost: the request may or may not have been
			// carried out; resending it is safe.
			if serr := c.sleep(ctx, backoff(attempt)); serr != nil {
				return err
			}
			resent = true
		default:
			return err
		}
	}
}

func backoff(attempt int) time.Duration {
	return min(100*time.Millisecond<<attempt, 2*time.Second)
}

func (c *Client) once(ctx context.Context, method, target string, body []byte, handle func(*http.Response) error) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return err
	}
	c.authorize(req)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return fmt.Errorf("client: read the problem answering %s %s: %w", method, req.URL.Path, err)
		}
		return problemOf(resp, data, c.now())
	}
	return handle(resp)
}

func (c *Client) authorize(req *http.Request) {
	if c.key != "" {
		req.Header.Set("X-API-Key", c.key)
	}
	if c.session != "" {
		req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: c.session})
	}
	if c.cronSecret != "" {
		req.Header.Set("X-Cron-Secret", c.cronSecret)
	}
	req.Header.Set("X-SVC-Surface", c.surface)
	req.Header.Set("Accept", "application/json")
}

// problemOf reads a non-2xx answer; now reads a Retry-After given as an
// HTTP date (RFC 9110 allows seconds or a date; the service sends seconds).
func problemOf(resp *http.Response, data []byte, now time.Time) *Error {
	e := &Error{Status: resp.StatusCode}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		} else if at, err := http.ParseTime(ra); err == nil && at.After(now) {
			e.RetryAfter = at.Sub(now)
		}
	}
	var p api.Problem
	if json.Unmarshal(data, &p) != nil || json.Unmarshal(data, &e.Members) != nil {
		e.Code = "unreadable_problem"
		e.Detail = strings.TrimSpace(string(data[:min(len(data), 200)]))
		return e
	}
	e.Code, e.Title, e.Detail, e.Errors = p.Code, p.Title, p.Detail, p.Errors
	return e
}

func escape(s string) string { return url.PathEscape(s) }

// call sends r and decodes a 2xx answer into a new T.
func call[T any](ctx context.Context, c *Client, r request) (*T, error) {
	var out T
	if err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// get is an idempotent GET of path decoded into a new T.
func get[T any](ctx context.Context, c *Client, path string, query url.Values) (*T, error) {
	return call[T](ctx, c, request{method: http.MethodGet, path: path, query: query, idempotent: true})
}
