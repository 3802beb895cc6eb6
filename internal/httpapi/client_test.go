package httpapi

import (
	"net/http/httptest"
	"testing"

	"github.com/auditchain/auditchain/internal/config"
)

// The client of a request: the TCP peer, unless the peer is a trusted proxy,
// and then the first address from the right of X-Forwarded-For that is not
// one; an IPv6 client is its /64.
func TestClientAddress(t *testing.T) {
	proxies, err := config.ParseTrustedProxies("127.0.0.1, 10.0.0.0/8, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, peer string
		xff        []string
		trust      bool
		want       string
	}{
		{"no proxy trusted: the peer, whatever the header says", "127.0.0.1:5000", []string{"203.0.113.9"}, false, "127.0.0.1"},
		{"an untrusted peer's header is ignored", "198.51.100.4:5000", []string{"203.0.113.9"}, true, "198.51.100.4"},
		{"a trusted proxy: the address it saw", "127.0.0.1:5000", []string{"203.0.113.9"}, true, "203.0.113.9"},
		{"a chain of trusted proxies is skipped", "127.0.0.1:5000", []string{"203.0.113.9, 10.1.2.3", "10.4.5.6"}, true, "203.0.113.9"},
		{"what the client wrote left of its own address is not read", "127.0.0.1:5000", []string{"1.2.3.4, 203.0.113.9"}, true, "203.0.113.9"},
		{"a proxy that sent no header is the client", "10.0.0.1:5000", nil, true, "10.0.0.1"},
		{"garbage behind a trusted hop: the hop", "127.0.0.1:5000", []string{"not-an-ip, 10.1.2.3"}, true, "10.1.2.3"},
		{"an entry with a port", "127.0.0.1:5000", []string{"203.0.113.9:4711"}, true, "203.0.113.9"},
		{"a bracketed IPv6 entry", "127.0.0.1:5000", []string{"[2001:db8:1:2::7]"}, true, "2001:db8:1:2::/64"},
		{"IPv6 peers of one /64 are one client", "[2001:db8:1:2:aaaa::1]:5000", nil, false, "2001:db8:1:2::/64"},
		{"IPv4-mapped IPv6 is the IPv4 address", "[::ffff:203.0.113.9]:5000", nil, false, "203.0.113.9"},
		{"a trusted IPv6 proxy", "[fd00::1]:5000", []string{"2001:db8:9::1"}, true, "2001:db8:9::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{}
			if tc.trust {
				s.trustedProxies = proxies
			}
			r := httptest.NewRequest("POST", "/v1/auth/otp/request", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := s.clientAddress(r); got != tc.want {
				t.Fatalf("clientAddress = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	for _, bad := range []string{"nope", "10.0.0.0/33", "fe80::1%eth0", ",", "10.0.0.1,example.com"} {
		if _, err := config.ParseTrustedProxies(bad); err == nil {
			t.Errorf("ParseTrustedProxies(%q) accepted", bad)
		}
	}
	got, err := config.ParseTrustedProxies(" 10.0.0.1 , 192.168.0.0/16,::1")
	if err != nil || len(got) != 3 || got[0].String() != "10.0.0.1/32" || got[1].String() != "192.168.0.0/16" || got[2].String() != "::1/128" {
		t.Fatalf("ParseTrustedProxies: %v %v", got, err)
	}
}
