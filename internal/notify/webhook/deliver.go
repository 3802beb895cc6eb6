// Package webhook sends signed webhook requests to URLs that API callers
// register: signing per Standard Webhooks (sign.go), a guard against
// server-side request forgery at registration and at connect time
// (egress.go), and one delivery attempt (deliver.go). Retries, backoff and
// the queue belong to the caller.
package webhook

// One delivery attempt: a signed POST, bounded in time and in what is read
// back, summarised as an Attempt that is safe to store and show to the
// webhook's owner.

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"code.dny.dev/ssrf"

	"github.com/auditchain/auditchain/internal/metrics"
)

// userAgent names us to receivers, which often log or filter by it.
const userAgent = "auditchain-webhooks"

// Delivery is one message to one receiver.
type Delivery struct {
	URL       string
	MsgID     string    // webhook-id; the same for every attempt, so receivers can drop duplicates
	Timestamp time.Time // webhook-timestamp, signed; the time of this attempt
	Body      []byte    // JSON, sent and signed as is
	Secret    string    // "whsec_…", as NewSecret returns
}

// Attempt is what one try at a Delivery came to.
type Attempt struct {
	StatusCode int           // the receiver's status; 0 when it gave none
	Err        string        // "" when OK; else a short reason without internals ("status 500", "timeout after 10s")
	Duration   time.Duration // from start to the answer read (or the failure)
	OK         bool          // the receiver answered 2xx
	// Outcome classes the attempt for metrics: metrics.WebhookOK,
	// WebhookHTTPError, WebhookTimeout, WebhookRefused or WebhookError.
	Outcome string
}

// errAttemptTimeout tells the attempt's own deadline from the caller's
// cancellation.
var errAttemptTimeout = errors.New("webhook attempt timed out")

// Deliver makes one attempt at d: a POST of d.Body with the Standard
// Webhooks headers, bounded by the Egress timeout. Redirects are not
// followed, and at most MaxBody bytes of the answer are read.
func (e *Egress) Deliver(ctx context.Context, d Delivery) Attempt {
	start := time.Now()
	a := e.attempt(ctx, d)
	a.Duration = time.Since(start)
	metrics.WebhookDeliveries.Inc(a.Outcome)
	metrics.WebhookDeliveryDuration.Observe(a.Outcome, a.Duration.Seconds())
	return a
}

func (e *Egress) attempt(ctx context.Context, d Delivery) Attempt {
	u, err := parseURL(d.URL)
	if err != nil {
		return Attempt{Err: err.Error(), Outcome: metrics.WebhookRefused}
	}
	signature, err := Sign(d.Secret, d.MsgID, d.Timestamp, d.Body)
	if err != nil {
		return Attempt{Err: err.Error(), Outcome: metrics.WebhookError}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, e.timeout, errAttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(d.Body))
	if err != nil {
		return Attempt{Err: "webhook url is not a valid url", Outcome: metrics.WebhookRefused}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Webhook-Id", d.MsgID)
	req.Header.Set("Webhook-Timestamp", strconv.FormatInt(d.Timestamp.Unix(), 10))
	req.Header.Set("Webhook-Signature", signature)

	resp, err := e.client.Do(req)
	if err != nil {
		return Attempt{Err: e.reason(ctx, err), Outcome: failureOutcome(ctx, err)}
	}
	// The status is the answer. The body is read only so that the connection
	// can be reused, and never past MaxBody: closing with more unread drops
	// the connection instead of draining a receiver that never stops.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, e.maxBody))
	resp.Body.Close()

	a := Attempt{StatusCode: resp.StatusCode, Outcome: metrics.WebhookHTTPError}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		a.OK, a.Outcome = true, metrics.WebhookOK
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		a.Err = fmt.Sprintf("redirect not followed (status %d)", resp.StatusCode)
	default:
		a.Err = fmt.Sprintf("status %d", resp.StatusCode)
	}
	return a
}

// failureOutcome classes a failed request as reason words it: the guard's
// refusal, the attempt's own timeout, or any other transport failure.
func failureOutcome(ctx context.Context, err error) string {
	var refused *refusedError
	switch {
	case errors.As(err, &refused), errors.Is(err, ssrf.ErrProhibitedIP):
		return metrics.WebhookRefused
	case errors.Is(context.Cause(ctx), errAttemptTimeout):
		return metrics.WebhookTimeout
	}
	return metrics.WebhookError
}

// reason turns a failed request into an Attempt.Err: short, and without
// the resolver's, dialer's or TLS stack's wording, which would tell the
// webhook's owner about our network.
func (e *Egress) reason(ctx context.Context, err error) string {
	var refused *refusedError
	var certErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	switch {
	case errors.As(err, &refused):
		return refused.Error()
	case errors.Is(err, ssrf.ErrProhibitedIP):
		return "refused: resolves to a reserved address"
	case errors.Is(context.Cause(ctx), errAttemptTimeout):
		return "timeout after " + e.timeout.String()
	case ctx.Err() != nil:
		return "canceled"
	case errors.Is(err, errLookup):
		return "dns lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &certErr):
		return "tls certificate not valid"
	case errors.As(err, &recordErr):
		return "tls handshake failed"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed without a response"
	}
	return "request failed"
}
