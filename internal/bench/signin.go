package bench

// Sign-in by one-time code, as a client does it: the code is requested with
// POST /v1/auth/otp/request, the server mails it — to an SMTP sink inside the
// generator (the started server gets --mail smtp://SINK) — and the code is
// verified with POST /v1/auth/otp/verify, whose answer sets the session
// cookie. otp-verify measures the verification; --session signs every bench
// account in before the run.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/auditchain/auditchain/pkg/api"
)

// LiftedOTPLimits are the serve flags that let one client request as many
// sign-in codes as a run needs (the per-email limit, 5 an hour, never bites:
// every code is for an account of its own).
var LiftedOTPLimits = []string{"--otp-limit-per-client", "1000000000", "--otp-limit-global", "1000000000"}

// mailSink is an SMTP server on loopback that keeps the one-time code of
// each sign-in message, by recipient, instead of delivering it.
type mailSink struct {
	srv  *smtp.Server
	addr string

	mu    sync.Mutex
	codes map[string]string
}

// startMailSink listens on addr ("127.0.0.1:0": a free port).
func startMailSink(addr string) (*mailSink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mail sink: %w", err)
	}
	s := &mailSink{addr: ln.Addr().String(), codes: map[string]string{}}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &sinkSession{sink: s}, nil }))
	s.srv.Domain = "localhost"
	s.srv.ReadTimeout = 30 * time.Second
	s.srv.WriteTimeout = 30 * time.Second
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *mailSink) close() { _ = s.srv.Close() }

// serverArgs make a started server mail to the sink, with the code limits lifted.
func (s *mailSink) serverArgs() []string {
	return append([]string{"--mail", "smtp://" + s.addr}, LiftedOTPLimits...)
}

// code is the last code mailed to email. The server mails a code before its
// request answers, and the sink keeps it before it acknowledges the message,
// so it is here once the request has answered.
func (s *mailSink) code(email string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	code, ok := s.codes[email]
	if !ok {
		return "", fmt.Errorf("bench: no sign-in code was mailed to %s", email)
	}
	return code, nil
}

// sinkSession is one SMTP connection to the sink.
type sinkSession struct {
	sink *mailSink
	to   []string
}

func (*sinkSession) Mail(string, *smtp.MailOptions) error { return nil }

func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}

// Data keeps the code of the subject ("Your auditchain sign-in code: 123456").
func (ss *sinkSession) Data(r io.Reader) error {
	m, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, m.Body)
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		return err
	}
	i := strings.LastIndex(subject, ": ")
	if i < 0 {
		return nil // not a sign-in code
	}
	ss.sink.mu.Lock()
	defer ss.sink.mu.Unlock()
	for _, to := range ss.to {
		ss.sink.codes[strings.ToLower(to)] = subject[i+2:]
	}
	return nil
}

func (ss *sinkSession) Reset()        { ss.to = nil }
func (ss *sinkSession) Logout() error { return nil }

// benchEmail is the email of bench account i of the run with prefix.
func benchEmail(prefix string, i int) string {
	return fmt.Sprintf("%s-%d@bench.example", prefix, i)
}

// requestCode asks the server to mail a sign-in code to email and returns
// the verify request's body with the code the sink received.
func requestCode(ctx context.Context, c *client, sink *mailSink, email string, resp *bytes.Buffer) ([]byte, error) {
	if _, err := c.do(ctx, "POST", "/v1/auth/otp/request", "", []byte(`{"email":"`+email+`"}`), resp); err != nil {
		if ab := notBuilt(err); ab != nil {
			return nil, ab
		}
		return nil, fmt.Errorf("request a sign-in code: %w: %s", err, resp.Bytes())
	}
	code, err := sink.code(email)
	if err != nil {
		return nil, err
	}
	return []byte(`{"email":"` + email + `","code":"` + code + `"}`), nil
}

// signIn requests a code for email, verifies it, and returns the session
// token the answer's cookie carries.
func signIn(ctx context.Context, c *client, sink *mailSink, email string) (string, error) {
	var resp bytes.Buffer
	body, err := requestCode(ctx, c, sink, email, &resp)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/v1/auth/otp/verify", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("verify the sign-in code of %s: %d", email, res.StatusCode)
	}
	for _, ck := range res.Cookies() {
		if ck.Name == api.SessionCookie && ck.Value != "" {
			return ck.Value, nil
		}
	}
	return "", fmt.Errorf("verify the sign-in code of %s: no %s cookie", email, api.SessionCookie)
}

// signInAll replaces every account's key by a session token (--session).
func signInAll(ctx context.Context, e *env) error {
	for i := range e.accounts {
		a := &e.accounts[i]
		token, err := signIn(ctx, e.c, e.sink, a.email)
		if err != nil {
			return fmt.Errorf("sign in %s: %w", a.email, err)
		}
		a.key = token
	}
	return nil
}

// otpVerifySetup prepares one live code per verification the run will make
// (rate × (warmup + duration), and a margin), each for an account of its own
// (made by admin create-account with an email) so the per-email request
// limit never bites, then verifies one code per operation. It needs an open
// loop: a closed one has no bound on the codes it would spend.
func otpVerifySetup(ctx context.Context, e *env) (func(w *worker) opFunc, error) {
	if e.rate <= 0 {
		return nil, errors.New("otp-verify spends one prepared code per operation: it runs in an open loop (--rate, default 200)")
	}
	n := int(e.rate*(e.o.Warmup+e.o.Duration).Seconds()) + e.clients + 64
	fmt.Fprintf(e.progress, "bench: creating %d accounts with an email\n", n)
	prefix := e.prefix + "v"
	if _, err := createAccounts(ctx, e.o.Exe, e.db, n, func(i int) string { return benchEmail(prefix, i) }); err != nil {
		return nil, err
	}
	codes := make([][]byte, n) // the verify request bodies
	err := parallelPrep(ctx, e, "otp-verify: sign-in codes", n, func(ctx context.Context, i int, resp *bytes.Buffer) error {
		body, err := requestCode(ctx, e.c, e.sink, benchEmail(prefix, i), resp)
		codes[i] = body
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("prepare sign-in codes: %w", err)
	}
	var taken atomic.Int64
	signedIn := []byte(`"user_id"`)
	return func(w *worker) opFunc {
		return func(ctx context.Context, w *worker) (int, error) {
			i := taken.Add(1) - 1
			if i >= int64(len(codes)) {
				return 0, errAbort{errors.New("otp-verify ran out of prepared codes")}
			}
			_, err := w.c.do(ctx, "POST", "/v1/auth/otp/verify", "", codes[i], &w.resp)
			if ab := notBuilt(err); ab != nil {
				return 0, ab
			}
			if err == nil && !bytes.Contains(w.resp.Bytes(), signedIn) {
				err = fmt.Errorf("verify answered without a user_id: %s", w.resp.String())
			}
			return 1, err
		}
	}, nil
}
