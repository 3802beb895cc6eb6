package webhook

// Egress is the only way webhook requests leave the service. Receivers are
// URLs that API callers type in, so without a guard they could make the
// server call its own admin port, the database, or the cloud metadata
// address (server-side request forgery). The guard runs twice: CheckURL at
// registration, to give the caller a clear 422, and the dialer at connect
// time on the address actually dialed, because a name can resolve to a
// public address when registered and to 127.0.0.1 when delivered (DNS
// rebinding).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"code.dny.dev/ssrf"
)

// Defaults for the zero values of Options.
const (
	DefaultTimeout = 10 * time.Second
	DefaultMaxBody = 64 << 10
)

// maxIdleConnsPerHost lets a busy receiver keep this many warm connections:
// a thousand deliveries a second to one host cannot afford a TCP (and TLS)
// handshake each.
const maxIdleConnsPerHost = 64

// maxResponseHeaderBytes replaces the transport's 10 MB default: a
// receiver's headers are read and dropped, and the body is capped far lower.
const maxResponseHeaderBytes = 64 << 10

// Resolver looks up the addresses of a host name; *net.Resolver is one.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Options tune an Egress; the zero value of each field means its default.
type Options struct {
	// AllowPrivate (--webhook-allow-private) permits loopback, private,
	// link-local and reserved receivers, for deployments whose receivers sit
	// on the internal network, and for tests. The unspecified address stays
	// refused.
	AllowPrivate bool
	// Resolver looks up receiver host names, at registration and at each
	// new connection. Default net.DefaultResolver.
	Resolver Resolver
	// Timeout bounds one delivery attempt: resolve, connect, TLS, request
	// and response. Default DefaultTimeout.
	Timeout time.Duration
	// MaxBody bounds the bytes of a receiver's answer that are read (and
	// discarded). Default DefaultMaxBody.
	MaxBody int64
}

// Egress checks webhook URLs and delivers to them. It is safe for concurrent
// use and keeps idle connections to receivers for reuse.
type Egress struct {
	allowPrivate bool
	resolver     Resolver
	timeout      time.Duration
	maxBody      int64
	guardian     *ssrf.Guardian
	dialer       *net.Dialer
	client       *http.Client
}

// NewEgress returns an Egress with o's settings.
func NewEgress(o Options) *Egress {
	e := &Egress{
		allowPrivate: o.AllowPrivate,
		resolver:     o.Resolver,
		timeout:      o.Timeout,
		maxBody:      o.MaxBody,
		// The guardian denies the IANA special-purpose ranges; by default it
		// also denies every port but 80 and 443, yet receivers often listen
		// on others (:8080), and the port is not what makes a target internal.
		guardian: ssrf.New(ssrf.WithAnyPort()),
	}
	if e.resolver == nil {
		e.resolver = net.DefaultResolver
	}
	if e.timeout <= 0 {
		e.timeout = DefaultTimeout
	}
	if e.maxBody <= 0 {
		e.maxBody = DefaultMaxBody
	}
	e.dialer = &net.Dialer{}
	if !e.allowPrivate {
		// A second line behind dialContext's own check: the guardian sees the
		// socket address itself, whatever path led to it.
		e.dialer.Control = e.guardian.Safe
	}
	e.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil, // a proxy from the environment would dial on our behalf, unchecked
			DialContext:            e.dialContext,
			ForceAttemptHTTP2:      true,
			MaxIdleConnsPerHost:    maxIdleConnsPerHost,
			IdleConnTimeout:        90 * time.Second,
			MaxResponseHeaderBytes: maxResponseHeaderBytes,
			// The answer is discarded: do not ask for gzip, whose bombs
			// would cost CPU to inflate.
			DisableCompression: true,
		},
		// A redirect is the receiver choosing a new destination after the
		// check; the spec's receivers answer 2xx, so a 3xx is a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return e
}

// CheckURL reports whether raw may be registered as a webhook receiver: an
// http or https URL with a host and no user info, whose every address is
// allowed. Its errors are plain sentences fit for the caller (a 422 detail).
func (e *Egress) CheckURL(ctx context.Context, raw string) error {
	u, err := parseURL(raw)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if literal, err := netip.ParseAddr(host); err == nil {
		if kind := e.refusal(literal); kind != "" {
			return fmt.Errorf("webhook url resolves to %s (%s)", kind, literal)
		}
		return nil
	}
	addrs, err := e.lookup(ctx, host)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("webhook url host %s could not be resolved", host)
	}
	for _, addr := range addrs {
		// The address is left out: for a name only our resolver knows, it
		// would map the internal network for whoever registers URLs.
		if kind := e.refusal(addr); kind != "" {
			return fmt.Errorf("webhook url host %s resolves to %s", host, kind)
		}
	}
	return nil
}

// parseURL checks what can be checked without the network.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("webhook url is not a valid url")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("webhook url must use http or https")
	}
	if u.User != nil {
		// Credentials in the URL would be stored and shown in plain text;
		// receivers authenticate us by the signature instead.
		return nil, errors.New("webhook url must not contain a user name or password")
	}
	if u.Hostname() == "" {
		return nil, errors.New("webhook url must have a host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return nil, errors.New("webhook url port must be between 1 and 65535")
		}
	}
	return u, nil
}

// errLookup marks a failed resolution, to report it without the resolver's
// wording (which names our DNS server).
var errLookup = errors.New("dns lookup failed")

// lookup returns host's addresses: itself when it is a literal, else what the
// resolver answers, IPv4 unmapped.
func (e *Egress) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if literal, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{literal}, nil
	}
	answers, err := e.resolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errLookup, err)
	}
	addrs := make([]netip.Addr, 0, len(answers))
	for _, a := range answers {
		// net.IP holds IPv4 in its 16-byte mapped form, which netip would
		// keep as IPv6.
		addr, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		addrs = append(addrs, addr.Unmap().WithZone(a.Zone))
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: %s has no addresses", errLookup, host)
	}
	return addrs, nil
}

// refusedError is a connection not made because of where it would go.
type refusedError struct {
	kind string // as refusal names it
}

func (err *refusedError) Error() string { return "refused: resolves to " + err.kind }

// dialContext is the transport's only way to connect. It resolves the host
// itself and dials a checked IP literal, so the address checked is the
// address connected to: no second resolution in between for an attacker's
// DNS to answer differently.
func (e *Egress) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := e.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	// Any refused address refuses the host, as at registration: a name
	// that mixes public and internal answers is not one to trust.
	for _, addr := range addrs {
		if kind := e.refusal(addr); kind != "" {
			return nil, &refusedError{kind: kind}
		}
	}
	var firstErr error
	for _, addr := range addrs {
		conn, err := e.dialer.DialContext(ctx, network, net.JoinHostPort(addr.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// sharedAddressSpace is carrier-grade NAT (RFC 6598): not the internet, and
// inside some clouds it reaches internal services.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// refusal names the kind of address addr is when webhooks may not go there
// ("a loopback address"), or returns "" when they may. The named kinds come
// first so the caller reads a plain reason; the guardian then denies the
// rest of the special-purpose registry (documentation, benchmarking, 6to4,
// anything outside IPv6 global unicast, ...).
func (e *Egress) refusal(addr netip.Addr) string {
	// ::ffff:127.0.0.1 reaches 127.0.0.1: judge the IPv4 address.
	addr = addr.Unmap()
	if addr.IsUnspecified() {
		// Connecting to 0.0.0.0 or :: reaches this host; no operator means that.
		return "an unspecified address"
	}
	if e.allowPrivate {
		return ""
	}
	switch {
	case addr.IsLoopback():
		return "a loopback address"
	case addr.IsPrivate():
		return "a private address"
	case addr.IsLinkLocalUnicast():
		// 169.254.169.254, the cloud metadata service, is here.
		return "a link-local address"
	case addr.IsMulticast():
		return "a multicast address"
	case addr == limitedBroadcast:
		return "a broadcast address"
	case sharedAddressSpace.Contains(addr):
		return "a shared (carrier-grade NAT) address"
	case e.guardian.SafeAddr(addr) != nil:
		return "a reserved address"
	}
	return ""
}
