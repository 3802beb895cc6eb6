package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// mcpPost sends body to POST /v1/mcp as an MCP host does (both media types
// accepted), with version as MCP-Protocol-Version unless empty, and extra
// headers.
func (e *env) mcpPost(key, version, body string, headers ...string) response {
	e.t.Helper()
	h := append([]string{"Accept", "application/json, text/event-stream"}, headers...)
	if version != "" {
		h = append(h, "Mcp-Protocol-Version", version)
	}
	return e.do("POST", "/v1/mcp", key, body, h...)
}

// problemCode is the code of a problem answer with status.
func problemCode(t *testing.T, r response, status int) string {
	t.Helper()
	if r.Status != status || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("answer %d %s %s, want a %d problem", r.Status, r.Header.Get("Content-Type"), r.Body, status)
	}
	code, _ := r.JSON(t)["code"].(string)
	return code
}

// A 401 of /v1/mcp carries the Bearer challenge RFC 9110 requires (an MCP
// client without it takes the 401 for an OAuth server's), and its message
// names both ways to send the key.
func TestMCPUnauthorizedChallenges(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		r := e.mcpPost("", "", ping)
		if code := problemCode(t, r, 401); code != "missing_token" || r.Header.Get("WWW-Authenticate") != `Bearer realm="auditchain"` {
			t.Fatalf("no key: %s, WWW-Authenticate %q", code, r.Header.Get("WWW-Authenticate"))
		}
		if detail, _ := r.JSON(t)["detail"].(string); !strings.Contains(detail, "X-API-Key") || !strings.Contains(detail, "Bearer") {
			t.Fatalf("no key: detail %q names one way to send it", detail)
		}
		for _, h := range [][]string{{"Authorization", "Bearer ak_wrong"}, {"X-API-Key", "ak_wrong"}} {
			r := e.mcpPost("", "", ping, h...)
			if code := problemCode(t, r, 401); code != "invalid_or_expired_api_key" ||
				!strings.HasPrefix(r.Header.Get("WWW-Authenticate"), `Bearer realm="auditchain", error="invalid_token"`) {
				t.Fatalf("%v: %s, WWW-Authenticate %q", h, code, r.Header.Get("WWW-Authenticate"))
			}
		}
		_, token := e.account("challenge@example.com")
		if r := e.mcpPost("", "", ping, "Authorization", "Bearer "+token); r.Status != 200 || r.Header.Get("WWW-Authenticate") != "" {
			t.Fatalf("with the key as a bearer token: %d %s", r.Status, r.Body)
		}
	})
}

// JSON-RPC over /v1/mcp: ids come back byte for byte; a batch is answered
// as an array under 2025-03-26 (the default without a version header) and
// refused from 2025-06-18 on; each refusal of the transport has its own
// code.
func TestMCPJSONRPCOverHTTP(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, token := e.account("jsonrpc@example.com")
		for _, id := range []string{"9007199254740993", "123456789012345678901234567890", "1e3", `"a\u0041\""`} {
			r := e.mcpPost(token, "2025-06-18", `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"chain_tip","arguments":{}}}`)
			if r.Status != 200 || !strings.HasPrefix(string(r.Body), `{"jsonrpc":"2.0","id":`+id+`,"result":{`) {
				t.Fatalf("id %s: %d %s", id, r.Status, r.Body)
			}
		}
		batch := `[{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},` +
			`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"chain_tip","arguments":{}}}]`
		for _, version := range []string{"", "2025-03-26"} {
			r := e.mcpPost(token, version, batch)
			var answers []map[string]json.RawMessage
			if r.Status != 200 || json.Unmarshal(r.Body, &answers) != nil {
				t.Fatalf("a batch under %q: %d %s", version, r.Status, r.Body)
			}
			var ids []string
			for _, a := range answers {
				ids = append(ids, string(a["id"]))
			}
			slices.Sort(ids)
			if !slices.Equal(ids, []string{`"b"`, "9007199254740993"}) || !strings.Contains(string(r.Body), `"event_count"`) {
				t.Fatalf("a batch under %q is answered %s", version, r.Body)
			}
		}
		for _, c := range []struct {
			name, version, body string
			headers             []string
			status              int
			code                string
		}{
			{"a batch under 2025-06-18", "2025-06-18", batch, nil, 400, "batch_not_supported"},
			{"a batch under 2025-11-25", "2025-11-25", batch, nil, 400, "batch_not_supported"},
			{"an unknown protocol version", "1999-01-01", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil, 400, "unsupported_protocol_version"},
			{"Accept without the event stream", "2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Accept", "application/json"}, 406, "not_acceptable"},
			{"an empty batch", "2025-03-26", `[]`, nil, 400, "invalid_jsonrpc"},
			{"not JSON", "2025-06-18", `{"jsonrpc":`, nil, 400, "malformed_json"},
		} {
			r := e.mcpPost(token, c.version, c.body, c.headers...)
			if code := problemCode(t, r, c.status); code != c.code {
				t.Errorf("%s: code %s, want %s (%s)", c.name, code, c.code, r.Body)
			}
		}
	})
}

// Origin (MCP streamable HTTP, against DNS rebinding): a request without
// Origin passes, and so does one from the service's own origin; another
// origin is 403 before any credential is read — also when a rebinding page
// names its own host in Host, on a loopback listener.
func TestMCPOrigin(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, token := e.account("origin@example.com")
		ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		own := e.srv.URL // http://127.0.0.1:port
		if r := e.mcpPost(token, "", ping, "Origin", own); r.Status != 200 {
			t.Fatalf("the service's own origin: %d %s", r.Status, r.Body)
		}
		for _, origin := range []string{"http://evil.example", "null", strings.Replace(own, "127.0.0.1", "localhost", 1) + "0", "file://x"} {
			for _, key := range []string{token, ""} {
				if code := problemCode(t, e.mcpPost(key, "", ping, "Origin", origin), 403); code != "cross_origin_request" {
					t.Fatalf("origin %q: %s", origin, code)
				}
			}
		}
		// A rebinding: evil.example resolves to 127.0.0.1, so the browser
		// sends Host and Origin both naming it.
		port := own[strings.LastIndex(own, ":")+1:]
		req, _ := http.NewRequest("POST", own+"/v1/mcp", strings.NewReader(ping))
		req.Host = "evil.example:" + port
		req.Header.Set("Origin", "http://evil.example:"+port)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-API-Key", token)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Fatalf("a rebinding origin on a loopback listener: %d", resp.StatusCode)
		}
	})
}
