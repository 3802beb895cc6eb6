package webhook

import (
	"context"
	"errors"
	"net"
	"testing"

	"code.dny.dev/ssrf"
)

// The ssrf guardian on the dialer is the second line: it refuses loopback
// even if dialContext's own check were bypassed.
func TestDialerGuardianRefusesLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	e := NewEgress(Options{})
	conn, err := e.dialer.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err == nil {
		conn.Close()
		t.Fatal("guarded dialer connected to loopback")
	}
	if !errors.Is(err, ssrf.ErrProhibitedIP) {
		t.Errorf("dial error = %v, want ssrf.ErrProhibitedIP", err)
	}

	// Receivers listen on any port; the guardian's default allows only 80
	// and 443.
	if err := e.guardian.Safe("tcp4", "93.184.215.14:8080", nil); err != nil {
		t.Errorf("guardian refuses a public address on port 8080: %v", err)
	}
	if err := e.guardian.Safe("tcp6", "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:9443", nil); err != nil {
		t.Errorf("guardian refuses a public address on port 9443: %v", err)
	}
}
