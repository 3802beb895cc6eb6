package webhook_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/auditchain/auditchain/internal/notify/webhook"
)

// resolverFunc is a Resolver answering from a function, so tests choose
// what a name resolves to without DNS.
type resolverFunc func(host string) ([]net.IPAddr, error)

func (f resolverFunc) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	return f(host)
}

func answer(addrs ...string) resolverFunc {
	return func(string) ([]net.IPAddr, error) {
		var out []net.IPAddr
		for _, a := range addrs {
			out = append(out, net.IPAddr{IP: net.ParseIP(a)})
		}
		return out, nil
	}
}

func TestCheckURLRefuses(t *testing.T) {
	for _, tc := range []struct {
		url      string
		resolver webhook.Resolver
		wantErr  string
	}{
		{url: "ftp://hooks.example/x", wantErr: "webhook url must use http or https"},
		{url: "hooks.example/x", wantErr: "webhook url must use http or https"},
		{url: "http:///x", wantErr: "webhook url must have a host"},
		{url: "http://:8080/x", wantErr: "webhook url must have a host"},
		{url: "https://user:pass@hooks.example/x", wantErr: "must not contain a user name or password"},
		{url: "https://user@hooks.example/x", wantErr: "must not contain a user name or password"},
		{url: "http://hooks.example:0/x", wantErr: "port must be between 1 and 65535"},
		{url: "http://hooks.example:70000/x", wantErr: "port must be between 1 and 65535"},
		{url: "http://127.0.0.1/x", wantErr: "webhook url resolves to a loopback address (127.0.0.1)"},
		{url: "http://127.0.0.1:8080/x", wantErr: "loopback"},
		{url: "http://localhost:8080/x", wantErr: "webhook url host localhost resolves to a loopback address"}, // the system resolver
		{url: "http://10.0.0.1/x", wantErr: "webhook url resolves to a private address (10.0.0.1)"},
		{url: "http://192.168.1.1/x", wantErr: "private"},
		{url: "http://172.16.0.1/x", wantErr: "private"},
		{url: "http://[fc00::1]/x", wantErr: "private"},
		{url: "http://169.254.169.254/latest/meta-data/", wantErr: "link-local"},
		{url: "http://[fe80::1]/x", wantErr: "link-local"},
		{url: "http://[::1]/x", wantErr: "loopback"},
		{url: "http://[::ffff:127.0.0.1]/x", wantErr: "loopback"},
		{url: "http://[::ffff:169.254.169.254]/x", wantErr: "link-local"},
		{url: "http://0.0.0.0/x", wantErr: "unspecified"},
		{url: "http://[::]/x", wantErr: "unspecified"},
		{url: "http://224.0.0.1/x", wantErr: "multicast"},
		{url: "http://255.255.255.255/x", wantErr: "broadcast"},
		{url: "http://100.64.0.1/x", wantErr: "carrier-grade NAT"},
		{url: "http://198.18.0.1/x", wantErr: "reserved"},        // benchmarking, denied by the ssrf guardian
		{url: "http://[2001:db8::1]/x", wantErr: "reserved"},     // documentation
		{url: "http://[64:ff9b::7f00:1]/x", wantErr: "reserved"}, // NAT64 of 127.0.0.1
		{url: "http://internal.example/x", resolver: answer("10.1.2.3"),
			wantErr: "webhook url host internal.example resolves to a private address"},
		{url: "http://mixed.example/x", resolver: answer("93.184.215.14", "127.0.0.1"), wantErr: "loopback"},
		{url: "http://mapped.example/x", resolver: answer("::ffff:10.0.0.1"), wantErr: "private"},
		{url: "http://missing.example/x", resolver: resolverFunc(func(string) ([]net.IPAddr, error) {
			return nil, &net.DNSError{Err: "no such host", Name: "missing.example", IsNotFound: true}
		}), wantErr: "webhook url host missing.example could not be resolved"},
		{url: "http://empty.example/x", resolver: answer(), wantErr: "could not be resolved"},
	} {
		e := webhook.NewEgress(webhook.Options{Resolver: tc.resolver})
		err := e.CheckURL(context.Background(), tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("CheckURL(%q) = %v, want an error containing %q", tc.url, err, tc.wantErr)
		}
	}
}

func TestCheckURLAccepts(t *testing.T) {
	unreachable := resolverFunc(func(host string) ([]net.IPAddr, error) {
		return nil, errors.New("resolver called for " + host)
	})
	for _, tc := range []struct {
		url      string
		resolver webhook.Resolver
	}{
		{url: "https://93.184.215.14/hooks", resolver: unreachable}, // a literal needs no lookup
		{url: "http://93.184.215.14:8080/hooks", resolver: unreachable},
		{url: "https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/hooks", resolver: unreachable},
		{url: "HTTPS://hooks.example/x?token=1", resolver: answer("93.184.215.14")},
		{url: "https://hooks.example:9443/x", resolver: answer("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c")},
	} {
		e := webhook.NewEgress(webhook.Options{Resolver: tc.resolver})
		if err := e.CheckURL(context.Background(), tc.url); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", tc.url, err)
		}
	}
}

func TestCheckURLAllowPrivate(t *testing.T) {
	e := webhook.NewEgress(webhook.Options{AllowPrivate: true, Resolver: answer("10.1.2.3")})
	for _, raw := range []string{
		"http://127.0.0.1:8080/x",
		"http://[::1]/x",
		"http://10.0.0.1/x",
		"http://169.254.169.254/x",
		"http://internal.example/x",
	} {
		if err := e.CheckURL(context.Background(), raw); err != nil {
			t.Errorf("with AllowPrivate, CheckURL(%q) = %v, want nil", raw, err)
		}
	}
	for _, raw := range []string{"http://0.0.0.0/x", "http://[::]/x", "ftp://10.0.0.1/x"} {
		if err := e.CheckURL(context.Background(), raw); err == nil {
			t.Errorf("with AllowPrivate, CheckURL(%q) = nil, want an error", raw)
		}
	}
}

// countingServer is a receiver on 127.0.0.1 that counts the requests it gets.
func countingServer(t *testing.T, status int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// A name that answers a public address at registration and 127.0.0.1 at
// delivery must not reach 127.0.0.1.
func TestDeliverRefusesDNSRebinding(t *testing.T) {
	srv, hits := countingServer(t, http.StatusNoContent)
	var lookups atomic.Int64
	rebinding := resolverFunc(func(string) ([]net.IPAddr, error) {
		if lookups.Add(1) == 1 {
			return []net.IPAddr{{IP: net.ParseIP("93.184.215.14")}}, nil
		}
		return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}}, nil
	})
	e := webhook.NewEgress(webhook.Options{Resolver: rebinding})
	u, _ := url.Parse(srv.URL)
	hookURL := "http://rebind.example:" + u.Port() + "/hooks"

	if err := e.CheckURL(context.Background(), hookURL); err != nil {
		t.Fatalf("CheckURL at registration = %v, want nil", err)
	}
	a := e.Deliver(context.Background(), testDelivery(t, hookURL))
	if a.OK || a.StatusCode != 0 || a.Err != "refused: resolves to a loopback address" {
		t.Errorf("Deliver = %+v, want a refusal naming loopback", a)
	}
	if n := lookups.Load(); n != 2 {
		t.Errorf("resolver asked %d times, want 2 (registration, connect)", n)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("loopback receiver got %d requests, want 0", n)
	}
}

func TestDeliverRefusesLoopbackLiteral(t *testing.T) {
	srv, hits := countingServer(t, http.StatusNoContent)
	e := webhook.NewEgress(webhook.Options{})
	a := e.Deliver(context.Background(), testDelivery(t, srv.URL))
	if a.OK || a.Err != "refused: resolves to a loopback address" {
		t.Errorf("Deliver = %+v, want a refusal naming loopback", a)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("loopback receiver got %d requests, want 0", n)
	}
}
