// Package mailtest is a real SMTP server (go-smtp) for tests: it listens on
// 127.0.0.1, records every message it accepts, and can be told to refuse, to
// require AUTH or to offer STARTTLS. It lives outside internal/mail's tests
// so that any package's tests (the serve command's end-to-end sign-in, for
// one) can deliver through the production SMTP transport and read back what
// arrived, rather than trusting a fake transport.
package mailtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Arrival is one message as the server received it.
type Arrival struct {
	From string   // envelope sender (MAIL FROM)
	To   []string // envelope recipients (RCPT TO)
	Data []byte   // the message as transferred
	TLS  bool     // the session had switched to TLS
	User string   // who authenticated, "" for nobody
}

// Server is a real SMTP server on 127.0.0.1:0 whose backend records what
// arrives. Set the exported fields before Start; they are read, never
// written, while it serves. The zero value accepts every message without
// AUTH.
//
// A message is recorded before the server answers the end of its DATA, so
// once a client's send has returned successfully the message is already in
// Received: callers need not wait or poll.
type Server struct {
	// Mechanisms are the AUTH mechanisms offered: "PLAIN", "LOGIN" (others
	// are advertised but refused, to test a client that speaks none).
	Mechanisms []string
	// Users maps user → password the server accepts. When non-empty, MAIL
	// FROM is refused until the session has authenticated.
	Users map[string]string
	// Refuse[i], when non-nil, is the answer to MAIL FROM in session i
	// (counting from 0): a scripted temporary or permanent refusal.
	Refuse []error
	// RcptError, when set, is the answer to every RCPT TO.
	RcptError error

	addr string

	mu           sync.Mutex
	arrivals     []Arrival
	sessions     int
	authAttempts int
}

// Start serves on 127.0.0.1:0 until the test ends (the server is closed,
// and its goroutine waited for, in t's cleanup). With tlsConfig the server
// offers STARTTLS and, as real servers do, AUTH only after it; without, it
// offers AUTH in clear (the mail client allows that to this machine only).
func (s *Server) Start(t testing.TB, tlsConfig *tls.Config) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = "localhost"
	srv.TLSConfig = tlsConfig
	srv.AllowInsecureAuth = tlsConfig == nil
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	s.addr = l.Addr().String()
}

// Addr is the host:port the server listens on, once Start has returned.
func (s *Server) Addr() string { return s.addr }

// Received returns a copy of the messages accepted so far, in the order
// their DATA completed.
func (s *Server) Received() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Arrival(nil), s.arrivals...)
}

// Counts reports how many SMTP sessions were opened and how many AUTH
// exchanges were checked, successful or not: what retries and refusals
// are asserted with.
func (s *Server) Counts() (sessions, authAttempts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions, s.authAttempts
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions++
	return &session{server: s, conn: c, index: s.sessions - 1}, nil
}

// session is one SMTP connection; go-smtp drives it from one goroutine.
type session struct {
	server *Server
	conn   *smtp.Conn
	index  int
	user   string
	cur    Arrival
}

func (ss *session) AuthMechanisms() []string { return ss.server.Mechanisms }

func (ss *session) Auth(mech string) (sasl.Server, error) {
	check := func(user, password string) error {
		ss.server.mu.Lock()
		defer ss.server.mu.Unlock()
		ss.server.authAttempts++
		if want, ok := ss.server.Users[user]; !ok || want != password {
			return smtp.ErrAuthFailed
		}
		ss.user = user
		return nil
	}
	switch mech {
	case "PLAIN":
		return sasl.NewPlainServer(func(_, user, password string) error { return check(user, password) }), nil
	case "LOGIN":
		return &loginServer{check: check}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if len(ss.server.Users) > 0 && ss.user == "" {
		return smtp.ErrAuthRequired
	}
	if ss.index < len(ss.server.Refuse) && ss.server.Refuse[ss.index] != nil {
		return ss.server.Refuse[ss.index]
	}
	ss.cur = Arrival{From: from, User: ss.user}
	_, ss.cur.TLS = ss.conn.TLSConnectionState()
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.server.RcptError != nil {
		return ss.server.RcptError
	}
	ss.cur.To = append(ss.cur.To, to)
	return nil
}

// Data records the message before go-smtp answers 250, so a client that saw
// its message accepted finds it in Received.
func (ss *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.cur.Data = b
	ss.server.mu.Lock()
	defer ss.server.mu.Unlock()
	ss.server.arrivals = append(ss.server.arrivals, ss.cur)
	return nil
}

func (ss *session) Reset()        { ss.cur = Arrival{} }
func (ss *session) Logout() error { return nil }

// loginServer is the server side of SASL LOGIN, which go-sasl does not
// provide: ask for the user, then the password.
type loginServer struct {
	step  int
	user  string
	check func(user, password string) error
}

func (l *loginServer) Next(response []byte) ([]byte, bool, error) {
	l.step++
	switch l.step {
	case 1:
		return []byte("Username:"), false, nil
	case 2:
		l.user = string(response)
		return []byte("Password:"), false, nil
	case 3:
		return nil, true, l.check(l.user, string(response))
	}
	return nil, false, errors.New("unexpected LOGIN step")
}

// SelfSigned makes a certificate for 127.0.0.1 and localhost, valid for an
// hour either side of now, and returns a server config presenting it and a
// pool that trusts it (for the client's RootCAs): STARTTLS can then be
// tested with verification on, as in production.
func SelfSigned(t testing.TB) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "auditchain test smtp"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool
}
