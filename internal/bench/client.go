package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
)

// client is the generator's one HTTP client: a single Transport keeps enough
// idle connections for every worker, so requests reuse connections.
type client struct {
	hc   *http.Client
	base string // http://host:port, no trailing slash
}

func newClient(base string, conns int) *client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		WriteBufferSize:     32 << 10,
		ReadBufferSize:      32 << 10,
	}
	return &client{hc: &http.Client{Transport: tr}, base: base}
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// statusError is a non-2xx answer; code is the problem's "code" member.
type statusError struct {
	status int
	code   string
	method string
	path   string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.path, e.status, e.code)
}

// key is how errors are counted in reports: "409 prev_hash_mismatch".
func (e *statusError) key() string {
	if e.code == "" {
		return strconv.Itoa(e.status)
	}
	return strconv.Itoa(e.status) + " " + e.code
}

// do sends one request, authenticated by key (an API key, or a session
// token sent as the session cookie), and leaves the response body in resp. A non-2xx answer
// is a *statusError; anything else non-nil is a transport error.
func (c *client) do(ctx context.Context, method, path, key string, body []byte, resp *bytes.Buffer) (int, error) {
	var rd *bytes.Reader
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return 0, err
	}
	if body != nil {
		rd = bytes.NewReader(body)
		req.Body = readCloser{rd}
		req.ContentLength = int64(len(body))
		req.Header["Content-Type"] = jsonType
	}
	if path == mcpPath {
		// Streamable HTTP wants both; the stateless server answers JSON. A
		// host sends the protocol version it negotiated at initialize on
		// every later request (MCP 2025-06-18, "Protocol Version Header").
		req.Header["Accept"] = mcpAccept
		req.Header["Mcp-Protocol-Version"] = mcpVersion
	}
	switch {
	case strings.HasPrefix(key, api.SessionTokenPrefix):
		req.Header["Cookie"] = []string{api.SessionCookie + "=" + key}
	case key != "":
		req.Header["X-Api-Key"] = []string{key}
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Reset()
	_, err = resp.ReadFrom(res.Body)
	res.Body.Close()
	if err != nil {
		return res.StatusCode, err
	}
	if res.StatusCode >= 300 {
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(resp.Bytes(), &p)
		return res.StatusCode, &statusError{status: res.StatusCode, code: p.Code, method: method, path: path}
	}
	return res.StatusCode, nil
}

var (
	jsonType   = []string{"application/json"}
	mcpAccept  = []string{"application/json, text/event-stream"}
	mcpVersion = []string{"2025-06-18"}
)

// mcpPath is the MCP server's route (streamable HTTP).
const mcpPath = "/v1/mcp"

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
