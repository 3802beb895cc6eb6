package mail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
	gosmtp "github.com/wneessen/go-mail/smtp"
)

// DefaultSMTPPort is the submission port (RFC 6409), where a relay expects
// authenticated clients and offers STARTTLS.
const DefaultSMTPPort = 587

// smtpTransport submits mail to one relay, a new connection per attempt.
type smtpTransport struct {
	host     string
	port     int
	user     string
	password string
	timeout  time.Duration
	tls      *tls.Config
	log      *slog.Logger
}

// newSMTP parses smtp://[user[:pass]@]host[:port]. Its errors never quote
// spec: it may hold a password.
func newSMTP(spec string, timeout time.Duration, roots *x509.CertPool, log *slog.Logger) (*smtpTransport, error) {
	const form = "smtp://[user[:pass]@]host[:port]"
	u, err := url.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("mail: the smtp URL does not parse (percent-encode reserved characters in user and password): use %s", form)
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("mail: the smtp URL names no host: use %s", form)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("mail: the smtp URL has a path, query or fragment, which mean nothing here: use %s", form)
	}
	t := &smtpTransport{host: u.Hostname(), port: DefaultSMTPPort, timeout: timeout, log: log}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("mail: the smtp URL's port %q is not a port number", p)
		}
		t.port = n
	}
	if u.User != nil {
		t.user = u.User.Username()
		t.password, _ = u.User.Password()
		if t.user == "" {
			return nil, fmt.Errorf("mail: the smtp URL has a password but no user: use %s", form)
		}
	}
	t.tls = &tls.Config{ServerName: t.host, RootCAs: roots, MinVersion: tls.VersionTLS12}
	return t, nil
}

// deliver makes one attempt: connect, EHLO, STARTTLS if offered, AUTH if a
// user is configured, MAIL, RCPT, DATA, QUIT. ctx bounds the whole attempt:
// the library's own timeout restarts with every command, so a server that
// answers slowly enough could otherwise hold an attempt open indefinitely.
func (t *smtpTransport) deliver(ctx context.Context, l *letter) error {
	// Keep every connection the library dials, so ending ctx can cut it and
	// so none outlives the attempt: the library leaves a connection open
	// when the exchange fails before it gets to QUIT.
	var (
		mu    sync.Mutex
		conns []net.Conn
		ended bool
	)
	closeAll := func() {
		mu.Lock()
		defer mu.Unlock()
		ended = true
		for _, c := range conns {
			_ = c.Close()
		}
	}
	dial := func(dctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(dctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if ended {
			_ = c.Close()
			return nil, ctx.Err()
		}
		conns = append(conns, c)
		return c, nil
	}
	stop := context.AfterFunc(ctx, closeAll)
	defer func() {
		stop()
		closeAll()
	}()

	opts := []gomail.Option{
		gomail.WithPort(t.port),
		gomail.WithTimeout(t.timeout),
		gomail.WithTLSPolicy(gomail.TLSOpportunistic),
		gomail.WithTLSConfig(t.tls.Clone()),
		gomail.WithDialContextFunc(dial),
	}
	if t.user != "" {
		opts = append(opts, gomail.WithSMTPAuthCustom(&plainOrLogin{host: t.host, user: t.user, password: t.password}))
	}
	client, err := gomail.NewClient(t.host, opts...)
	if err != nil {
		return &permanentError{fmt.Errorf("smtp client: %w", err)}
	}
	err = client.DialAndSendWithContext(ctx, l.rfc5322)
	if l.rfc5322.IsDelivered() {
		// The server accepted the message; what failed came after (RSET or
		// QUIT). Trying again would deliver it twice.
		if err != nil {
			t.log.Warn("smtp: message accepted, then the session failed", "message_id", l.messageID, "error", err)
		}
		return nil
	}
	if err == nil {
		return errors.New("smtp: the server did not confirm delivery")
	}
	if permanent(err) {
		return &permanentError{err}
	}
	return err
}

// permanent reports a failure another attempt would repeat: a 5xx reply
// (RFC 5321 §4.2.1: the client should not repeat the request as it was), a
// certificate we do not trust, or credentials we will not send in clear.
// Everything else (4xx replies, network errors, timeouts) is worth retrying.
func permanent(err error) bool {
	var sendErr *gomail.SendError
	if errors.As(err, &sendErr) && sendErr.ErrorCode() >= 500 {
		return true
	}
	var reply *textproto.Error
	if errors.As(err, &reply) && reply.Code >= 500 {
		return true
	}
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return true
	}
	return errors.Is(err, errCleartextAuth)
}

// errCleartextAuth refuses to send credentials over a connection that is
// neither encrypted nor to this machine.
var errCleartextAuth = errors.New("the server offered no STARTTLS; not sending the password unencrypted to a host other than this machine")

// plainOrLogin authenticates with PLAIN, or LOGIN when the server does not
// offer PLAIN: the two mechanisms every submission server has, and the only
// ones that need nothing beyond a user and password. Both send the password
// as it is, so the library's implementations refuse an unencrypted
// connection unless the server is this machine.
type plainOrLogin struct {
	host, user, password string
	chosen               gosmtp.Auth
}

func (a *plainOrLogin) Start(server *gosmtp.ServerInfo) (string, []byte, error) {
	switch {
	case slices.Contains(server.Auth, "PLAIN"):
		a.chosen = gosmtp.PlainAuth("", a.user, a.password, a.host, false)
	case slices.Contains(server.Auth, "LOGIN"):
		a.chosen = gosmtp.LoginAuth(a.user, a.password, a.host, false)
	default:
		return "", nil, &permanentError{fmt.Errorf("the server offers neither PLAIN nor LOGIN authentication (it offers %v)", server.Auth)}
	}
	mech, resp, err := a.chosen.Start(server)
	if errors.Is(err, gosmtp.ErrUnencrypted) {
		err = errCleartextAuth
	}
	return mech, resp, err
}

func (a *plainOrLogin) Next(fromServer []byte, more bool) ([]byte, error) {
	return a.chosen.Next(fromServer, more)
}
