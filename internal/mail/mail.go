// Package mail is the service's one mailer: sign-in one-time codes now,
// notifications and digests later. The operator picks the transport with
// --mail (docs/decisions/mail.md):
//
//   - log: one log line per message, naming its recipient and kind only;
//   - outbox:DIR: one RFC 5322 .eml file per message, written atomically;
//   - smtp://[user[:pass]@]host[:port]: real delivery, STARTTLS when offered.
//
// Every transport gets the same checked message: a recipient and subject that
// cannot smuggle headers, a Date and a Message-ID, text/plain UTF-8. Send
// retries a bounded number of times with backoff, each attempt bounded by a
// timeout, and counts what happened for metrics.
package mail

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/auditchain/auditchain/internal/metrics"
)

// Provider names, as the admin digest reports them.
const (
	ProviderLog    = "log"
	ProviderOutbox = "outbox"
	ProviderSMTP   = "smtp"
)

// Defaults for the zero values of Options.
const (
	DefaultFrom     = "auditchain <auditchain@localhost>"
	DefaultTimeout  = 10 * time.Second
	DefaultAttempts = 3
)

// Message is one mail to one recipient.
type Message struct {
	To string // one address as net/mail parses it: "a@b" or "Name <a@b>"
	// Kind says what the message is ("sign_in_code", a notice type,
	// "digest", …) where it is logged: unlike Subject and Body, it never
	// carries a code or a secret.
	Kind    string
	Subject string
	Body    string // text/plain, UTF-8
}

// Options tune a Mailer; the zero value of each field means its default.
type Options struct {
	// From is the sender address, also the envelope sender. Default
	// DefaultFrom.
	From string
	// Log receives the log transport's lines and retry warnings; nil
	// discards them.
	Log *slog.Logger
	// Timeout bounds one attempt (connect, TLS, auth and transfer
	// together). Default DefaultTimeout.
	Timeout time.Duration
	// Attempts bounds the tries per message, the first included. Default
	// DefaultAttempts.
	Attempts int
	// Backoff is the wait after failed attempt n (0 for the first) before
	// the next one. Default 200ms·2ⁿ; tests pass a func returning 0.
	Backoff func(attempt int) time.Duration
	// Now stamps the Date header and outbox file names. Default time.Now.
	Now func() time.Time
	// RootCAs verifies the SMTP server's certificate after STARTTLS; nil
	// means the system pool. Tests set it to trust a certificate they made.
	RootCAs *x509.CertPool
}

// Stats counts messages since New, for metrics.
type Stats struct {
	Sent    uint64 // delivered (or logged, or written)
	Failed  uint64 // Sends that returned an error: refused, out of attempts, or cancelled
	Retries uint64 // attempts after the first, made because one before failed
}

// Mailer sends messages through one transport. It is safe for concurrent use.
type Mailer struct {
	provider  string
	transport transport
	from      *netmail.Address
	idDomain  string // right-hand side of Message-IDs: the sender's domain
	log       *slog.Logger
	timeout   time.Duration
	attempts  int
	backoff   func(int) time.Duration
	now       func() time.Time

	sent, failed, retries atomic.Uint64
}

// transport delivers one composed letter. An error that wraps a
// *permanentError is not retried.
type transport interface {
	deliver(ctx context.Context, l *letter) error
}

// letter is a checked Message with its RFC 5322 form, built once so every
// attempt sends the same Date and Message-ID.
type letter struct {
	Message
	date      time.Time
	messageID string
	rfc5322   *gomail.Msg
}

// New returns the mailer spec names: "log", "outbox:DIR" or
// "smtp://[user[:pass]@]host[:port]" (user and password percent-encoded;
// port 587 by default). Errors never repeat an smtp password.
func New(spec string, o Options) (*Mailer, error) {
	m := &Mailer{
		log:      o.Log,
		timeout:  o.Timeout,
		attempts: o.Attempts,
		backoff:  o.Backoff,
		now:      o.Now,
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.timeout < 0 || m.attempts < 0 {
		return nil, fmt.Errorf("mail: timeout %s and attempts %d must not be negative", o.Timeout, o.Attempts)
	}
	if m.timeout == 0 {
		m.timeout = DefaultTimeout
	}
	if m.attempts == 0 {
		m.attempts = DefaultAttempts
	}
	if m.backoff == nil {
		m.backoff = func(n int) time.Duration { return 200 * time.Millisecond << min(n, 10) }
	}
	if m.now == nil {
		m.now = time.Now
	}
	from := o.From
	if from == "" {
		from = DefaultFrom
	}
	if strings.ContainsAny(from, "\r\n") {
		return nil, errors.New("mail: the From address contains a line break")
	}
	addr, err := netmail.ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("mail: From %q is not one address: %w", from, err)
	}
	m.from = addr
	m.idDomain = addr.Address[strings.LastIndexByte(addr.Address, '@')+1:]

	switch {
	case spec == ProviderLog:
		m.provider, m.transport = ProviderLog, &logTransport{log: m.log}
	case strings.HasPrefix(spec, ProviderOutbox+":"):
		t, err := newOutbox(strings.TrimPrefix(spec, ProviderOutbox+":"), m.log)
		if err != nil {
			return nil, err
		}
		m.provider, m.transport = ProviderOutbox, t
	case strings.HasPrefix(spec, ProviderSMTP+":"):
		t, err := newSMTP(spec, m.timeout, o.RootCAs, m.log)
		if err != nil {
			return nil, err
		}
		m.provider, m.transport = ProviderSMTP, t
	default:
		// Name only what precedes the first colon: an unknown scheme may
		// still carry a password after it (smtps://user:pass@…).
		name, _, _ := strings.Cut(spec, ":")
		return nil, fmt.Errorf("mail: unknown transport %q: use log, outbox:DIR or smtp://[user[:pass]@]host[:port]", name)
	}
	return m, nil
}

// Provider names the transport: "log", "outbox" or "smtp".
func (m *Mailer) Provider() string { return m.provider }

// Stats returns the counters so far.
func (m *Mailer) Stats() Stats {
	return Stats{Sent: m.sent.Load(), Failed: m.failed.Load(), Retries: m.retries.Load()}
}

// Send delivers msg, trying up to Attempts times with Backoff between tries,
// each try bounded by Timeout. It stops early on a permanent refusal (an SMTP
// 5xx reply, an untrusted certificate) and when ctx ends. A message whose To
// or Subject could inject headers is refused before anything is sent.
func (m *Mailer) Send(ctx context.Context, msg Message) error {
	l, err := m.compose(msg)
	if err != nil {
		m.count(msg.Kind, false)
		return err
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			m.retries.Add(1)
		}
		err = m.attempt(ctx, l)
		if err == nil {
			m.count(msg.Kind, true)
			return nil
		}
		switch {
		case ctx.Err() != nil:
			m.count(msg.Kind, false)
			return fmt.Errorf("mail: sending via %s stopped: %w (last attempt: %w)", m.provider, ctx.Err(), err)
		case errors.As(err, new(*permanentError)):
			m.count(msg.Kind, false)
			return fmt.Errorf("mail: sending via %s refused (not retried): %w", m.provider, err)
		case attempt+1 >= m.attempts:
			m.count(msg.Kind, false)
			return fmt.Errorf("mail: sending via %s failed after %s: %w", m.provider, attemptsText(m.attempts), err)
		}
		wait := m.backoff(attempt)
		m.log.Warn("mail attempt failed; retrying", "provider", m.provider,
			"attempt", attempt+1, "of", m.attempts, "retry_in", wait, "message_id", l.messageID, "error", err)
		if cerr := sleep(ctx, wait); cerr != nil {
			m.count(msg.Kind, false)
			return fmt.Errorf("mail: sending via %s stopped: %w (last attempt: %w)", m.provider, cerr, err)
		}
	}
}

// count adds a message sent, or failed, to the mailer's Stats and to the
// process's auditchain_mail_messages_total under its kind.
func (m *Mailer) count(kind string, sent bool) {
	outcome := "failed"
	if sent {
		m.sent.Add(1)
		outcome = "sent"
	} else {
		m.failed.Add(1)
	}
	metrics.MailMessages.Inc(cmp.Or(kind, "other"), outcome)
}

// attempt is one bounded try.
func (m *Mailer) attempt(ctx context.Context, l *letter) error {
	actx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	err := m.transport.deliver(actx, l)
	if err == nil || ctx.Err() != nil {
		return err
	}
	// Either our deadline cut the attempt, or the connection's own deadline
	// (the same Timeout, per command) fired first.
	var netErr net.Error
	if errors.Is(actx.Err(), context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return fmt.Errorf("attempt timed out after %s: %w", m.timeout, err)
	}
	return err
}

// sleep waits d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// compose checks msg and builds its RFC 5322 form.
func (m *Mailer) compose(msg Message) (*letter, error) {
	to, err := checkHeaders(msg)
	if err != nil {
		return nil, err
	}
	l := &letter{Message: msg, date: m.now(), messageID: randomHex(16) + "@" + m.idDomain}
	// No User-Agent: the library's default names its version, which tells
	// a reader of the mail nothing they need.
	r := gomail.NewMsg(gomail.WithNoDefaultUserAgent(),
		gomail.WithCharset(gomail.CharsetUTF8),
		// Quoted-printable keeps ASCII text readable in the .eml files and
		// lines within SMTP's 998-octet limit whatever the body holds.
		gomail.WithEncoding(gomail.EncodingQP))
	r.FromMailAddress(m.from)
	r.ToMailAddress(to)
	r.Subject(msg.Subject)
	r.SetDateWithValue(l.date)
	r.SetMessageIDWithValue(l.messageID)
	r.SetBodyString(gomail.TypeTextPlain, msg.Body)
	l.rfc5322 = r
	return l, nil
}

// ErrHeaderInjection is returned (wrapped) for a To or Subject that holds a
// line break: written into a header, it would start a header of its own.
var ErrHeaderInjection = errors.New("line break in a header field")

// checkHeaders refuses what could add headers or recipients: a line break in
// To or Subject, or a To that is not exactly one address.
func checkHeaders(msg Message) (*netmail.Address, error) {
	if strings.ContainsAny(msg.To, "\r\n") {
		return nil, fmt.Errorf("mail: To refused: %w", ErrHeaderInjection)
	}
	if strings.ContainsAny(msg.Subject, "\r\n") {
		return nil, fmt.Errorf("mail: Subject refused: %w", ErrHeaderInjection)
	}
	to, err := netmail.ParseAddress(msg.To)
	if err != nil {
		return nil, fmt.Errorf("mail: To %q is not one address: %w", msg.To, err)
	}
	return to, nil
}

// permanentError marks a failure that another attempt would only repeat.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func attemptsText(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return strconv.Itoa(n) + " attempts"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return hex.EncodeToString(b)
}
