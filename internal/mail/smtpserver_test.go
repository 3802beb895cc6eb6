package mail_test

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

// arrival is one message as the test server received it.
type arrival struct {
	From string   // envelope sender (MAIL FROM)
	To   []string // envelope recipients (RCPT TO)
	Data []byte   // the message as transferred
	TLS  bool     // the session had switched to TLS
	User string   // who authenticated, "" for nobody
}

// testServer is a real SMTP server (go-smtp) on 127.0.0.1:0 whose backend
// records what arrives.
type testServer struct {
	// Set before start.
	mechanisms []string          // AUTH mechanisms offered: "PLAIN", "LOGIN"
	users      map[string]string // user → password the server accepts
	refuse     []error           // MAIL FROM of session i answers refuse[i] (nil accepts)
	rcptError  error             // every RCPT TO answers this, if set

	addr string

	mu           sync.Mutex
	arrivals     []arrival
	sessions     int
	authAttempts int
}

// start serves on 127.0.0.1:0 until the test ends. With tlsConfig the
// server offers STARTTLS and, as real servers do, AUTH only after it;
// without, it offers AUTH in clear (the client allows that to this machine).
func (s *testServer) start(t *testing.T, tlsConfig *tls.Config) {
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

func (s *testServer) received() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrival(nil), s.arrivals...)
}

func (s *testServer) counts() (sessions, authAttempts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions, s.authAttempts
}

func (s *testServer) newSession(c *smtp.Conn) (smtp.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions++
	return &testSession{server: s, conn: c, index: s.sessions - 1}, nil
}

type testSession struct {
	server *testServer
	conn   *smtp.Conn
	index  int
	user   string
	cur    arrival
}

func (ss *testSession) AuthMechanisms() []string { return ss.server.mechanisms }

func (ss *testSession) Auth(mech string) (sasl.Server, error) {
	check := func(user, password string) error {
		ss.server.mu.Lock()
		defer ss.server.mu.Unlock()
		ss.server.authAttempts++
		if want, ok := ss.server.users[user]; !ok || want != password {
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

func (ss *testSession) Mail(from string, _ *smtp.MailOptions) error {
	if len(ss.server.users) > 0 && ss.user == "" {
		return smtp.ErrAuthRequired
	}
	if ss.index < len(ss.server.refuse) && ss.server.refuse[ss.index] != nil {
		return ss.server.refuse[ss.index]
	}
	ss.cur = arrival{From: from, User: ss.user}
	_, ss.cur.TLS = ss.conn.TLSConnectionState()
	return nil
}

func (ss *testSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.server.rcptError != nil {
		return ss.server.rcptError
	}
	ss.cur.To = append(ss.cur.To, to)
	return nil
}

func (ss *testSession) Data(r io.Reader) error {
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

func (ss *testSession) Reset()        { ss.cur = arrival{} }
func (ss *testSession) Logout() error { return nil }

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

// selfSigned makes a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
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

// silentListener accepts connections and never says a word, like a server
// that hangs; accepted reports each connection it holds.
func silentListener(t *testing.T) (addr string, accepted <-chan net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan net.Conn, 16)
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			ch <- c
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	return l.Addr().String(), ch
}
