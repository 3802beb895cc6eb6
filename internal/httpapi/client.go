package httpapi

// Which client a request comes from, for the per-client throttle of sign-in
// codes (docs/decisions/throttles.md "Client address").

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// clientAddress names the client of r: the TCP peer's address; or, when
// the peer is a trusted proxy (--trusted-proxies), the address the proxies
// saw, read from X-Forwarded-For from the right past every trusted hop.
// Without trusted proxies the header is ignored: any client can write it.
// An IPv6 client is named by its /64, the block one subscriber is given,
// so that walking a subscriber's addresses does not make new clients.
func (s *Server) clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return r.RemoteAddr // not an IP peer (a test's or a unix socket's): itself
	}
	addr = addr.WithZone("").Unmap()
	if s.trusted(addr) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0 && s.trusted(addr); i-- {
			hop, ok := forwardedAddr(hops[i])
			if !ok {
				break // garbage a trusted proxy passed on: the proxy stands for it
			}
			addr = hop
		}
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

// trusted reports whether addr is one of the trusted proxies.
func (s *Server) trusted(addr netip.Addr) bool {
	for _, p := range s.trustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// forwardedAddr reads one X-Forwarded-For entry: an address, bracketed or
// with a port as some proxies write it.
func forwardedAddr(hop string) (netip.Addr, bool) {
	hop = strings.TrimSpace(hop)
	if ap, err := netip.ParseAddrPort(hop); err == nil {
		return ap.Addr().WithZone("").Unmap(), true
	}
	a, err := netip.ParseAddr(strings.Trim(hop, "[]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}
