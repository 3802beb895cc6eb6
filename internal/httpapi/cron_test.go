package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/digitorus/timestamp"

	"github.com/auditchain/auditchain/internal/anchor/anchortest"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

func (e *env) sweepAnchor(t *testing.T) api.AnchorSweep {
	t.Helper()
	var out struct {
		Swept api.AnchorSweep `json:"swept"`
	}
	r := e.do("POST", "/v1/internal/cron/anchor", "", nil, "X-Cron-Secret", "s")
	if r.Status != 200 {
		t.Fatalf("anchor sweep: %d %s", r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Swept
}

func anchorEnv(t *testing.T, dsn, provider, url string) *env {
	return newEnv(t, dsn, func(c *config.Config) {
		c.CronSecret, c.AnchorProvider, c.AnchorTSAURL = "s", provider, url
	})
}

func TestCronAnchorSecret(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := anchorEnv(t, dsn, "none", "")
		wantProblem(t, e.do("POST", "/v1/internal/cron/anchor", "", nil), 401, "unauthorized")
		wantProblem(t, e.do("POST", "/v1/internal/cron/anchor", "", nil, "X-Cron-Secret", "S"), 401, "unauthorized")
		_, key := e.account("k@example.com")
		wantProblem(t, e.do("POST", "/v1/internal/cron/anchor", key, nil), 401, "unauthorized") // an API key is no cron secret
		wantProblem(t, e.do("POST", "/v1/internal/cron/anchor", "", map[string]any{"x": 1}, "X-Cron-Secret", "s"), 422, "validation_error")
	})
}

func TestCronAnchorProviderConfiguration(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		for _, tc := range []struct {
			provider, url, status, errPart string
		}{
			{"none", "", "anchoring_disabled", ""},
			{"bogus", "http://127.0.0.1:1/", "provider_misconfigured", `unknown anchor provider "bogus"`},
			{"rfc3161", "", "provider_misconfigured", "--anchor-tsa-url"},
		} {
			t.Run(tc.provider, func(t *testing.T) {
				e := anchorEnv(t, dsn, tc.provider, tc.url)
				c := newIntegChain(e, tc.provider+"@example.com")
				c.addN(t, 2)
				s := e.sweepAnchor(t)
				if s.Status != tc.status || s.Provider != tc.provider || s.Users != 0 || s.Anchored != 0 || s.Unchanged != 0 || s.NoRoot != 0 || s.AnchorFailed != 0 {
					t.Fatalf("sweep: %+v", s)
				}
				if (tc.errPart == "") != (s.Error == nil) || (s.Error != nil && !strings.Contains(*s.Error, tc.errPart)) {
					t.Fatalf("error %v, want %q", s.Error, tc.errPart)
				}
				if num(e.tip(c.token)["event_count"]) != 2 {
					t.Fatal("a disabled sweep wrote to a chain")
				}
			})
		}
	})
}

func TestCronAnchorRFC3161(t *testing.T) {
	tsa, err := anchortest.NewTSA()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(tsa)
	defer ts.Close()
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := anchorEnv(t, dsn, "rfc3161", ts.URL)
		a, b := newIntegChain(e, "a@example.com"), newIntegChain(e, "b@example.com")
		newIntegChain(e, "empty@example.com")
		a.addN(t, 3)
		b.addN(t, 2)
		start := tsa.Requests()

		s := e.sweepAnchor(t)
		if s.Status != "completed" || s.Provider != "rfc3161" || s.Users != 3 || s.Anchored != 2 || s.NoRoot != 1 || s.Unchanged != 0 || s.AnchorFailed != 0 || s.Error != nil {
			t.Fatalf("first sweep: %+v", s)
		}
		if tsa.Requests()-start != 2 {
			t.Fatalf("TSA asked %d times", tsa.Requests()-start)
		}
		// The receipt is on the chain: an anchor event at the tip whose token
		// stamps the hash of the block sealed over the 3 events.
		tip := e.tip(a.token)
		if num(tip["sequence"]) != 3 {
			t.Fatalf("tip after anchoring: %v", tip)
		}
		ev, err := e.store.EventByID(context.Background(), nil, a.user, tip["event_id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		var raw struct {
			Provider   string `json:"provider"`
			BlockIndex int64  `json:"block_index"`
			TreeSize   int64  `json:"tree_size"`
			BlockHash  string `json:"block_hash"`
			Token      string `json:"token"`
		}
		if err := json.Unmarshal(ev.Raw, &raw); err != nil || ev.EventType != "anchor" || ev.APIKeyID != nil {
			t.Fatalf("anchor event %+v raw %s", ev, ev.Raw)
		}
		blocks := e.do("GET", "/v1/chain/blocks", a.token, nil).JSON(t)["blocks"].([]any)
		block := blocks[0].(map[string]any)
		if raw.Provider != "rfc3161" || raw.TreeSize != 3 || raw.BlockIndex != 0 || raw.BlockHash != block["block_hash"] || num(block["tree_size"]) != 3 {
			t.Fatalf("anchor raw %+v, block %v", raw, block)
		}
		der, _ := base64.StdEncoding.DecodeString(raw.Token)
		tok, err := timestamp.Parse(der)
		if err != nil || !bytes.Equal(tok.HashedMessage, b64(t, block["block_hash"])) {
			t.Fatalf("token: %v, imprint %x", err, tok.HashedMessage)
		}
		var stored int
		if err := e.store.DB().QueryRow(`SELECT count(*) FROM anchors WHERE user_id = $1 AND block_index = 0 AND chain_size = 4`, a.user).Scan(&stored); err != nil || stored != 1 {
			t.Fatalf("anchors row: %d %v", stored, err)
		}

		// Nothing appended since: unchanged, and the TSA is not asked.
		s = e.sweepAnchor(t)
		if s.Anchored != 0 || s.Unchanged != 2 || s.NoRoot != 1 || s.Users != 3 || tsa.Requests()-start != 2 {
			t.Fatalf("second sweep: %+v", s)
		}

		// Only the account that changed is anchored again.
		a.tip = ptr(tip["payload_hash"].(string))
		a.n = 4
		a.addN(t, 1)
		s = e.sweepAnchor(t)
		if s.Anchored != 1 || s.Unchanged != 1 || s.NoRoot != 1 {
			t.Fatalf("third sweep: %+v", s)
		}
		if v := a.verifyChain(t); v["valid"] != true {
			t.Fatalf("chain after anchoring: %v", v)
		}

		// A failing TSA is counted; nothing is recorded for that account.
		b.tip = ptr(e.tip(b.token)["payload_hash"].(string))
		b.n = 3
		b.addN(t, 1)
		before := e.tip(b.token)
		tsa.Fail.Store(true)
		defer tsa.Fail.Store(false)
		s = e.sweepAnchor(t)
		if s.Status != "completed_with_failures" || s.AnchorFailed != 1 || s.Unchanged != 1 || s.Anchored != 0 {
			t.Fatalf("sweep with a failing TSA: %+v", s)
		}
		if after := e.tip(b.token); after["event_id"] != before["event_id"] {
			t.Fatalf("a failed anchor wrote: %v", after)
		}
		tsa.Fail.Store(false)
		if s = e.sweepAnchor(t); s.Anchored != 1 || s.AnchorFailed != 0 {
			t.Fatalf("retry sweep: %+v", s)
		}
	})
}
