package httpapi_test

import (
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/config"

	"github.com/auditchain/auditchain/internal/store/storetest"
)

// tcpProxy stands between the service and PostgreSQL, so a test can take the
// database away (every connection cut, new ones refused) and bring it back on
// the same address.
type tcpProxy struct {
	addr   string
	target string

	mu    sync.Mutex
	conns map[net.Conn]bool
	// silent makes the proxy a black hole: connections stay open, bytes in
	// either direction are dropped (a network partition nobody reports).
	silent atomic.Bool
	// refusing closes every connection as it arrives (a database that is
	// down). The listener itself stays open, so no other process can take
	// the port while the test waits to bring the database back.
	refusing atomic.Bool
}

func startProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.down()
		ln.Close()
	})
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.refusing.Load() {
				c.Close()
				continue
			}
			go p.pipe(c)
		}
	}()
}

func (p *tcpProxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.refusing.Load() { // went down meanwhile
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[client], p.conns[server] = true, true
	p.mu.Unlock()
	go func() { p.copy(server, client); server.Close() }()
	p.copy(client, server)
	client.Close()
}

// copy forwards src to dst, dropping what arrives while the proxy is silent.
func (p *tcpProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down refuses new connections and cuts every open one.
func (p *tcpProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing.Store(true)
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// up accepts connections again.
func (p *tcpProxy) up() { p.refusing.Store(false) }

// While PostgreSQL is unreachable every request that needs it fails fast with
// 503 and Retry-After (never a 500, never a hang) and nothing is acknowledged;
// once it is back, the pools recover without a restart and every write
// acknowledged before the outage is still there.
func TestPostgresOutageAnswers503AndRecovers(t *testing.T) {
	e, proxy := proxiedPostgresEnv(t, nil)
	_, key := e.account("outage@example.com")

	var tip any
	hashes := map[string]string{}
	for i := range 5 {
		r := e.appendOK(key, ev(evID(i), int64(i), tip, "raw", map[string]any{"i": i}))
		tip = hashOf(r)
		hashes[evID(i)] = tip.(string)
	}

	proxy.down()
	for _, call := range []struct{ method, path string }{
		{"GET", "/v1/chain/tip"},
		{"POST", "/v1/events"},
		{"GET", "/v1/grants/status?subagent=worker"},
		{"GET", "/v1/health"},
	} {
		var body any
		if call.method == "POST" {
			body = ev(evID(5), 5, tip, "raw", map[string]any{"i": 5})
		}
		r := e.do(call.method, call.path, key, body)
		if r.Status != 503 {
			t.Fatalf("%s %s with the database down: %d %s, want 503", call.method, call.path, r.Status, r.Body)
		}
		if call.path != "/v1/health" {
			wantProblem(t, r, 503, "service_unavailable")
			if r.Header.Get("Retry-After") == "" {
				t.Fatalf("%s %s: 503 without Retry-After", call.method, call.path)
			}
		}
	}

	proxy.up()
	if r := e.do("GET", "/v1/health", "", nil); r.Status != 200 {
		t.Fatalf("health once the database is back: %d %s", r.Status, r.Body)
	}
	// The append refused during the outage was not stored: the tip is where
	// the acknowledged writes left it, and the same event is accepted now.
	r := e.appendOK(key, ev(evID(5), 5, tip, "raw", map[string]any{"i": 5}))
	if r["status"] != "appended" {
		t.Fatalf("append after recovery: %v", r)
	}
	for id, h := range hashes {
		got := e.do("GET", "/v1/events/"+id, key, nil)
		if got.Status != 200 || hashOf(got.JSON(t)) != h {
			t.Fatalf("acknowledged event %s after the outage: %d %s", id, got.Status, got.Body)
		}
	}
}

// proxiedPostgresEnv is an API on a fresh PostgreSQL database reached through
// a tcpProxy the test controls.
func proxiedPostgresEnv(t *testing.T, mutate func(*config.Config)) (*env, *tcpProxy) {
	t.Helper()
	u, err := url.Parse(storetest.DSN(t, storetest.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, u.Host)
	u.Host = proxy.addr
	return newEnv(t, u.String(), mutate), proxy
}

func evID(i int) string { return "evt-outage-" + string(rune('a'+i)) }

// A PostgreSQL that stops answering without closing anything (a silent
// partition) must not hang requests: after --request-timeout they answer 503
// service_unavailable, and once the network is back the pools recover.
func TestPostgresSilentPartitionAnswers503AfterTheRequestTimeout(t *testing.T) {
	e, proxy := proxiedPostgresEnv(t, func(c *config.Config) { c.RequestTimeout = time.Second })
	_, key := e.account("partition@example.com")
	h0 := hashOf(e.appendOK(key, ev(evID(0), 0, nil)))

	proxy.silent.Store(true)
	for _, call := range []struct{ method, path string }{
		{"GET", "/v1/chain/tip"},
		{"POST", "/v1/events"},
	} {
		var body any
		if call.method == "POST" {
			body = ev(evID(1), 1, h0)
		}
		answered := make(chan response, 1)
		go func() { answered <- e.do(call.method, call.path, key, body) }()
		select {
		case r := <-answered:
			wantProblem(t, r, 503, "service_unavailable")
		case <-time.After(30 * time.Second): // 30× the request timeout: a hang, not a slow answer
			t.Fatalf("%s %s hangs while the database is partitioned", call.method, call.path)
		}
	}

	proxy.silent.Store(false)
	// The append cut by the timeout may or may not have landed (its outcome is
	// unknown); the tip says which, and the chain continues from it.
	tip := e.tip(key)
	seq := int64(tip["sequence"].(float64)) + 1
	e.appendOK(key, ev(evID(2), seq, tip["payload_hash"]))
}
