package bench

// The gate's workloads: gate-status, grant-use, mcp-gate and tool-call, each
// against one live grant per account.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

const benchSubagent = "bench-sub"

// What a grant workload's operation is.
type grantOp int

const (
	gateStatus grantOp = iota // GET /v1/grants/status
	grantUse                  // POST /v1/grants/{id}/use
	mcpGate                   // the gate_check tool over POST /v1/mcp
	toolCall                  // POST /v1/tool-calls: check, use and record
)

// benchGrants creates one live grant for benchSubagent per account (a large
// budget, two days to live) and returns their ids, by account.
func benchGrants(ctx context.Context, e *env) ([]string, error) {
	expires := time.Now().UTC().Add(48 * time.Hour).Format(time.RFC3339)
	ids := make([]string, len(e.accounts))
	var resp bytes.Buffer
	for i, a := range e.accounts {
		gid, err := createGrant(ctx, e, a.key, benchSubagent, 1000000000, expires, &resp)
		if err != nil {
			return nil, err
		}
		ids[i] = gid
	}
	return ids, nil
}

// createGrant creates a grant of subagent (tools bash, read_file, grep) with
// a random id and returns the id the service answers.
func createGrant(ctx context.Context, e *env, key, subagent string, max int64, expires string, resp *bytes.Buffer) (string, error) {
	var id [12]byte
	_, _ = rand.Read(id[:])
	gid := "g-" + hex.EncodeToString(id[:])
	body := []byte(`{"grant_id":"` + gid + `","subagent":"` + subagent + `","expires_at":"` + expires +
		`","max_tool_calls":` + strconv.FormatInt(max, 10) + `,"allowed_tools":["bash","read_file","grep"]}`)
	if _, err := e.c.do(ctx, "POST", "/v1/grants", key, body, resp); err != nil {
		if ab := notBuilt(err); ab != nil {
			return "", ab
		}
		return "", fmt.Errorf("create grant: %w: %s", err, resp.Bytes())
	}
	var r struct {
		Grant struct {
			ID string `json:"grant_id"`
		} `json:"grant"`
	}
	if json.Unmarshal(resp.Bytes(), &r) == nil && r.Grant.ID != "" {
		gid = r.Grant.ID
	}
	return gid, nil
}

// grantSetup creates one live grant per account (benchGrants); op is what
// each operation does with it.
func grantSetup(op grantOp) setupFunc {
	return func(ctx context.Context, e *env) (func(w *worker) opFunc, error) {
		ids, err := benchGrants(ctx, e)
		if err != nil {
			return nil, err
		}
		type grant struct{ statusURL, useURL string }
		grants := make([]grant, len(ids))
		for i, gid := range ids {
			grants[i] = grant{statusURL: "/v1/grants/status?subagent=" + benchSubagent + "&tool=bash",
				useURL: "/v1/grants/" + gid + "/use"}
		}
		useBody := []byte(`{"subagent":"` + benchSubagent + `","n":1}`)
		mcpBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"gate_check","arguments":{"subagent":"` +
			benchSubagent + `","tool":"bash"}}}`)
		authorized := []byte(`"authorized":true`)
		if op == toolCall {
			authorized = []byte(`"decision":"allow"`)
		}
		pool := newRawPool(nil)
		return func(w *worker) opFunc {
			s := newChainState(e, w.id)
			return func(ctx context.Context, w *worker) (int, error) {
				a, t := s.pick()
				var err error
				switch op {
				case toolCall:
					w.body = appendToolCall(w.body[:0], e.prefix, w.id, t.n, pool.raws[(t.n+int64(w.id)*31)%rawPoolSize])
					t.n++
					if _, err = w.c.do(ctx, "POST", "/v1/tool-calls", e.accounts[a].key, w.body, &w.resp); err == nil {
						e.stored.Add(1)
					}
				case grantUse:
					_, err = w.c.do(ctx, "POST", grants[a].useURL, e.accounts[a].key, useBody, &w.resp)
				case gateStatus:
					_, err = w.c.do(ctx, "GET", grants[a].statusURL, e.accounts[a].key, nil, &w.resp)
				case mcpGate:
					_, err = w.c.do(ctx, "POST", mcpPath, e.accounts[a].key, mcpBody, &w.resp)
				}
				if op != grantUse && err == nil && !bytes.Contains(w.resp.Bytes(), authorized) {
					err = fmt.Errorf("gate did not answer authorized: %.200s", w.resp.Bytes())
				}
				if ab := notBuilt(err); ab != nil {
					return 0, ab
				}
				return 1, err
			}
		}, nil
	}
}

// appendToolCall appends a tool call of benchSubagent running bash, its
// event id the worker's n-th.
func appendToolCall(b []byte, prefix string, worker int, n int64, raw []byte) []byte {
	b = append(b, `{"subagent":"`+benchSubagent+`","tool":"bash","event_id":"`...)
	b = appendEventID(b, prefix, worker, n)
	b = append(b, `","raw":`...)
	b = append(b, raw...)
	return append(b, '}')
}
