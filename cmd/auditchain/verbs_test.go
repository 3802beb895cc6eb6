package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// cliEnv is the environment of a client verb: the service and a key.
func cliEnv(url, key string) func(string) string {
	env := map[string]string{"AUDITCHAIN_URL": url, "AUDITCHAIN_API_KEY": key}
	return func(k string) string { return env[k] }
}

// runJSON runs a verb with --json, requires exit code want, and decodes stdout.
func runJSON(t *testing.T, getenv func(string) string, want int, args ...string) map[string]any {
	t.Helper()
	out, errOut, err := runOut(t, getenv, append(args, "--json")...)
	if got := exitCode(err, os.Stderr); got != want {
		t.Fatalf("%v: exit %d (%v; stderr %q), want %d", args, got, err, errOut, want)
	}
	var v map[string]any
	if out != "" {
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v --json printed %q", args, out)
		}
	}
	return v
}

// The client verbs end to end through run() against the real API on both
// stores: append (and signed), search, get, tip, grants with the gate's no
// as exit 3, governance with two keys, export verified offline, keys.
func TestClientVerbs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := httpapitest.Start(t, dsn, apptest.Options{})
		userID, token := s.Account(t, "cli@example.com")
		env := cliEnv(s.URL, token)
		dir := t.TempDir()

		// Human output by default: one "member: value" line each.
		out, _, err := runOut(t, env, "events", "append", "--type", "tool_call", "--tool", "search", "--raw", `{"query_sha256":"ab"}`)
		if err != nil || !strings.Contains(out, "status: appended\n") {
			t.Fatalf("events append: %v %q", err, out)
		}
		var last map[string]any
		for range 2 {
			last = runJSON(t, env, 0, "events", "append", "--type", "tool_call")
		}
		ev := last["event"].(map[string]any)
		if ev["sequence"] != float64(2) || ev["surface"] != "cli" {
			t.Fatalf("third append: %v", last)
		}
		// Signed: a key made offline, registered (the registration is the
		// machine.signing_key event at 3), then used at 4.
		keyFile := filepath.Join(dir, "m1.key")
		if out, _, err := runOut(t, env, "machines", "keygen", keyFile); err != nil || !strings.HasPrefix(out, "public_key: ") {
			t.Fatalf("keygen: %v %q", err, out)
		}
		runJSON(t, env, 0, "machines", "register", "--machine", "m1", "--sign-key", keyFile)
		signed := runJSON(t, env, 0, "events", "append", "--type", "tool_call", "--machine", "m1", "--sign-key", keyFile)["event"].(map[string]any)
		if signed["signature"] == nil || signed["machine_id"] != "m1" {
			t.Fatalf("signed append: %v", signed)
		}
		if found := runJSON(t, env, 0, "events", "search", "--tool", "search"); found["count"] != float64(1) {
			t.Fatalf("search: %v", found)
		}
		if got := runJSON(t, env, 0, "events", "get", signed["event_id"].(string)); got["event"].(map[string]any)["event_id"] != signed["event_id"] {
			t.Fatalf("get: %v", got)
		}
		if tip := runJSON(t, env, 0, "chain", "tip"); tip["sequence"] != float64(4) || tip["payload_hash"] != signed["payload_hash"] {
			t.Fatalf("tip: %v, signed %v", tip, signed)
		}

		// The gate: authorized exits 0, its no exits 3 (answer still printed).
		g := runJSON(t, env, 0, "grants", "create", "--subagent", "researcher", "--tools", "search,fetch", "--max-calls", "3")
		grantID := g["grant"].(map[string]any)["grant_id"].(string)
		if st := runJSON(t, env, 0, "grants", "status", "--subagent", "researcher", "--tool", "search"); st["authorized"] != true {
			t.Fatalf("status: %v", st)
		}
		if st := runJSON(t, env, exitGateNo, "grants", "status", "--subagent", "researcher", "--tool", "shell"); st["authorized"] != false {
			t.Fatalf("status of a tool not granted: %v", st)
		}
		if u := runJSON(t, env, 0, "grants", "use", grantID, "--subagent", "researcher", "--n", "2"); u["remaining"] != float64(1) {
			t.Fatalf("use: %v", u)
		}
		if u := runJSON(t, env, exitGateNo, "grants", "use", grantID, "--subagent", "researcher", "--n", "2"); u["code"] != "budget_exhausted" {
			t.Fatalf("use over budget: %v", u)
		}
		if l := runJSON(t, env, 0, "grants", "list", "--subagent", "researcher"); l["count"] != float64(1) {
			t.Fatalf("list: %v", l)
		}
		// A list's human form: one line per item, its scalar members.
		if out, _, err := runOut(t, env, "grants", "list"); err != nil || !strings.Contains(out, "grants: 1\n  - ") || !strings.Contains(out, "grant_id="+grantID) {
			t.Fatalf("grants list (human): %v %q", err, out)
		}
		if r := runJSON(t, env, 0, "grants", "revoke", grantID, "--subagent", "researcher"); r["outcome"] != "revoked" {
			t.Fatalf("revoke: %v", r)
		}

		// Governance: proposed by one key, ratified and enacted by another.
		p := runJSON(t, env, 0, "proposals", "create", "--kind", "allow_scope", "--subagent", "researcher", "--tool", "shell", "--blocked-attempts", "3")
		pid := p["proposal_id"].(string)
		if p := runJSON(t, env, 1, "proposals", "ratify", pid); p["status"] != float64(409) && p["status"] != float64(403) || p["code"] == nil {
			t.Fatalf("ratify by the proposer: %v, want the problem on stdout with --json", p)
		}
		other := cliEnv(s.URL, s.Key(t, userID, api.CreateKeyRequest{Label: new("reviewer")}))
		if p := runJSON(t, other, 0, "proposals", "ratify", pid, "--reason", "looked at it"); p["status"] != "ratified" {
			t.Fatalf("ratify: %v", p)
		}
		if p := runJSON(t, other, 0, "proposals", "enact", pid); p["status"] != "enacted" {
			t.Fatalf("enact: %v", p)
		}
		if l := runJSON(t, env, 0, "proposals", "list", "--status", "enacted"); l["count"] != float64(1) {
			t.Fatalf("proposals list: %v", l)
		}

		// Export and verify offline with the published key.
		export, _, err := runOut(t, env, "chain", "export")
		if err != nil || !strings.Contains(export, `"event"`) {
			t.Fatalf("export: %v", err)
		}
		pubDoc, _, err := runOut(t, env, "chain", "public-key")
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "export.ndjson"), []byte(export), 0o600)
		os.WriteFile(filepath.Join(dir, "key.json"), []byte(pubDoc), 0o600)
		if rep := runJSON(t, noEnv, 0, "verify", "export", filepath.Join(dir, "export.ndjson"), "--service-key", filepath.Join(dir, "key.json")); rep["valid"] != true {
			t.Fatalf("verify export: %v", rep)
		}
		if v := runJSON(t, env, 0, "chain", "verify"); v["valid"] != true {
			t.Fatalf("chain verify: %v", v)
		}
		// The signed event's inclusion, checked here against the signed
		// checkpoint and the service key.
		if p := runJSON(t, env, 0, "chain", "proof", signed["event_id"].(string)); p["event_id"] != signed["event_id"] || p["leaf_index"] != float64(4) {
			t.Fatalf("chain proof: %v", p)
		}

		// Keys; flags win over the environment.
		k := runJSON(t, env, 0, "keys", "create", "--label", "ci", "--scopes", "events:read")
		if k["id"] == nil || k["api_key"] == nil {
			t.Fatalf("keys create: %v", k)
		}
		if _, _, err := runOut(t, env, "events", "append", "--type", "x", "--api-key", k["api_key"].(string)); exitCode(err, os.Stderr) != 1 || !strings.Contains(err.Error(), "scope_missing") {
			t.Fatalf("a read-only --api-key over the environment's: %v", err)
		}
		if l := runJSON(t, env, 0, "keys", "list"); l["count"] != float64(3) {
			t.Fatalf("keys list: %v", l)
		}

		// A client's batch row takes the tip to 2^52, the highest sequence a
		// client may choose: events append goes on above it, signed and
		// linked, since the service numbers it (POST /v1/events/append).
		top := pushTipTo2To52(t, s.URL, token)
		above := runJSON(t, env, 0, "events", "append", "--type", "tool_call", "--machine", "m1", "--sign-key", keyFile)["event"].(map[string]any)
		if above["sequence"] != float64(domain.MaxClientSequence+1) || above["prev_hash"] != *top.PayloadHash || above["signature"] == nil {
			t.Fatalf("events append above 2^52: %v, want sequence %d after %s", above, domain.MaxClientSequence+1, *top.PayloadHash)
		}
	})
}

// Without a service, or with a bad line, a verb is a usage error (exit 2).
func TestClientVerbUsage(t *testing.T) {
	for _, args := range [][]string{
		{"events", "append", "--type", "x"}, // no URL nor key
		{"events"},
		{"events", "bogus"},
		{"grants", "use", "--subagent", "a"},
	} {
		getenv := noEnv
		if len(args) == 4 && args[0] == "grants" {
			getenv = cliEnv("http://127.0.0.1:1", "ac_x")
		}
		if _, _, err := runOut(t, getenv, args...); exitCode(err, os.Stderr) != exitUsage {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// events tail prints each event appended after it is listening as one JSON
// line, and ends after --count events.
func TestEventsTail(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := httpapitest.Start(t, dsn, apptest.Options{})
		_, token := s.Account(t, "tail@example.com")
		env := cliEnv(s.URL, token)
		pr, pw := io.Pipe()
		var out bytes.Buffer
		done := make(chan error, 1)
		go func() {
			done <- run(context.Background(), []string{"events", "tail", "--count", "2"}, env, &out, pw)
			pw.Close()
		}()
		lines := bufio.NewScanner(pr)
		if !lines.Scan() || lines.Text() != "auditchain events tail: listening" {
			t.Fatalf("tail's first stderr line: %q", lines.Text())
		}
		go io.Copy(io.Discard, pr)
		var ids []string
		for range 2 {
			ids = append(ids, runJSON(t, env, 0, "events", "append", "--type", "tool_call")["event"].(map[string]any)["event_id"].(string))
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(got) != 2 {
			t.Fatalf("tail printed %q", out.String())
		}
		for i, l := range got {
			var ev map[string]any
			if err := json.Unmarshal([]byte(l), &ev); err != nil || !strings.Contains(l, ids[i]) {
				t.Fatalf("line %d = %q, want event %s", i, l, ids[i])
			}
		}
	})
}
