package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// vxClient drives a running `auditchain serve` over HTTP.
type vxClient struct {
	t     *testing.T
	base  string
	token string
	n     int64
	tip   any
}

func (c *vxClient) call(method, path string, body any) []byte {
	c.t.Helper()
	var rdr io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rdr = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rdr)
	req.Header.Set("X-API-Key", c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		c.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
	}
	return out
}

func (c *vxClient) add(machine string, key ed25519.PrivateKey) {
	c.t.Helper()
	raw := json.RawMessage(fmt.Sprintf(`{"step":%d}`, c.n))
	body := map[string]any{"event_id": fmt.Sprintf("evt-cli-%d", c.n), "event_type": "tool_call", "sequence": c.n, "prev_hash": c.tip, "raw": raw}
	if machine != "" {
		body["machine_id"] = machine
	}
	if key != nil {
		canon, _ := jcs.Transform(raw)
		body["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(key, canon))
	}
	var resp struct {
		Event struct {
			PayloadHash string `json:"payload_hash"`
		}
	}
	json.Unmarshal(c.call("POST", "/v1/events", body), &resp)
	c.tip = resp.Event.PayloadHash
	c.n++
}

// key registers a key of machine: a machine.signing_key event on the chain.
func (c *vxClient) key(machine string) ed25519.PrivateKey {
	pub, priv, _ := ed25519.GenerateKey(nil)
	c.call("PUT", "/v1/machines/"+machine+"/signing-key", map[string]any{"public_key": base64.StdEncoding.EncodeToString(pub)})
	var tip struct {
		PayloadHash string `json:"payload_hash"`
	}
	json.Unmarshal(c.call("GET", "/v1/chain/tip", nil), &tip)
	c.tip = tip.PayloadHash
	c.n++
	return priv
}

// emptyArray reports whether v decoded from an empty JSON array (not null).
func emptyArray(v any) bool {
	a, ok := v.([]any)
	return ok && len(a) == 0
}

// runVerifyExport runs `auditchain verify export` and decodes its report.
func runVerifyExport(t *testing.T, args ...string) (map[string]any, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"verify", "export"}, args...), func(string) string { return "" }, &out, &errOut)
	var rep map[string]any
	if out.Len() > 0 {
		if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
			t.Fatalf("verify export printed non-JSON: %s", out.String())
		}
	}
	return rep, err
}

func TestVerifyExportCommand(t *testing.T) {
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "ac.db")
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	seedFile := filepath.Join(dir, "service.key")
	os.WriteFile(seedFile, []byte(base64.StdEncoding.EncodeToString(seed)), 0o600)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	pubB64 := base64.StdEncoding.EncodeToString(pub)
	pubFile := filepath.Join(dir, "service.pub")
	os.WriteFile(pubFile, []byte(pubB64+"\n"), 0o600)

	base, _ := startServe(t, map[string]string{"AUDITCHAIN_DB": dsn, "AUDITCHAIN_SERVICE_KEY_FILE": seedFile})
	var out strings.Builder
	if err := run(context.Background(), []string{"admin", "create-account", "--db", dsn, "--email", "cli@example.com"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var acct map[string]any
	json.Unmarshal([]byte(out.String()), &acct)
	c := &vxClient{t: t, base: base, token: acct["api_key"].(string)}

	// Unsigned events, a machine key (its event at 2), signed events, a
	// block, a rotation (its event at 6), more: sequences 0–8.
	for range 2 {
		c.add("", nil)
	}
	k1 := c.key("m1")
	for range 3 {
		c.add("m1", k1)
	}
	c.call("GET", "/v1/chain/verify", nil)
	k2 := c.key("m1")
	for range 2 {
		c.add("m1", k2)
	}
	export := c.call("GET", "/v1/chain/export", nil)
	full := filepath.Join(dir, "full.ndjson")
	os.WriteFile(full, export, 0o600)

	// The GET /v1/delegation/public-key answer, saved as is, is a key file
	// for verify export as it is for verify token.
	docFile := filepath.Join(dir, "public-key.json")
	os.WriteFile(docFile, c.call("GET", "/v1/delegation/public-key", nil), 0o600)
	for _, keyArg := range []string{pubB64, pubFile, docFile} {
		rep, err := runVerifyExport(t, full, "--service-key", keyArg)
		if err != nil || rep["valid"] != true || rep["events"] != float64(9) || rep["signatures_verified"] != float64(5) ||
			rep["signed_size"] != float64(9) || rep["failure"] != nil || !emptyArray(rep["gaps"]) || !emptyArray(rep["breaks"]) {
			t.Fatalf("verify export with %s: %v %v", keyArg, rep, err)
		}
	}
	// Flags may also come first.
	if rep, err := runVerifyExport(t, "--service-key", pubB64, full); err != nil || rep["valid"] != true {
		t.Fatalf("flag first: %v %v", rep, err)
	}

	frag := filepath.Join(dir, "fragment.ndjson")
	os.WriteFile(frag, c.call("GET", "/v1/chain/export?from=4&to=8", nil), 0o600)
	if rep, err := runVerifyExport(t, frag, "--service-key", pubB64); err != nil || rep["first_sequence"] != float64(4) || rep["last_sequence"] != float64(7) {
		t.Fatalf("fragment: %v %v", rep, err)
	}

	// Mutated copies fail at the right place, with a non-zero exit.
	for _, tc := range []struct {
		name, old, new string
		kind           string
		seq, block     any
	}{
		{"raw byte", `{"step":4}`, `{"step":5}`, "payload_hash", float64(4), nil},
		{"checkpoint size", "\\n6\\n", "\\n5\\n", "checkpoint_signature", nil, float64(0)},
	} {
		if !bytes.Contains(export, []byte(tc.old)) {
			t.Fatalf("%s: export lacks %q", tc.name, tc.old)
		}
		bad := filepath.Join(dir, "bad.ndjson")
		os.WriteFile(bad, bytes.Replace(export, []byte(tc.old), []byte(tc.new), 1), 0o600)
		rep, err := runVerifyExport(t, bad, "--service-key", pubB64)
		if err == nil || rep["valid"] != false {
			t.Fatalf("%s: accepted: %v", tc.name, rep)
		}
		f := rep["failure"].(map[string]any)
		if f["kind"] != tc.kind || f["sequence"] != tc.seq || f["block"] != tc.block {
			t.Fatalf("%s: failure %v", tc.name, f)
		}
		if !emptyArray(rep["gaps"]) || !emptyArray(rep["breaks"]) {
			t.Fatalf("%s: gaps %v breaks %v", tc.name, rep["gaps"], rep["breaks"])
		}
		if !strings.Contains(err.Error(), tc.kind) {
			t.Fatalf("%s: error %v does not name the kind", tc.name, err)
		}
	}

	// Batch ingest checks no continuity: a hole at 10 and a broken link
	// into 12 are stored, signed into the tree, and exported. The export
	// passes every integrity check; the report lists both findings and the
	// first in sequence order, the gap, is the failure, on the line of 11.
	bogus := "sha256:" + strings.Repeat("ab", 32)
	c.call("POST", "/v1/events/batch", map[string]any{"events": []any{
		map[string]any{"event_id": "evt-cli-9", "event_type": "tool_call", "sequence": 9, "prev_hash": c.tip},
		map[string]any{"event_id": "evt-cli-11", "event_type": "tool_call", "sequence": 11, "prev_hash": bogus},
		map[string]any{"event_id": "evt-cli-12", "event_type": "tool_call", "sequence": 12, "prev_hash": bogus},
	}})
	broken := c.call("GET", "/v1/chain/export", nil)
	brokenFile := filepath.Join(dir, "broken.ndjson")
	os.WriteFile(brokenFile, broken, 0o600)
	var payload11 string
	var line11 int
	for i, l := range strings.Split(string(broken), "\n") {
		var v struct {
			Event *struct {
				Sequence    int64  `json:"sequence"`
				PayloadHash string `json:"payload_hash"`
			} `json:"event"`
		}
		json.Unmarshal([]byte(l), &v)
		if v.Event != nil && v.Event.Sequence == 11 {
			payload11, line11 = v.Event.PayloadHash, i+1
		}
	}
	rep, err := runVerifyExport(t, brokenFile, "--service-key", pubB64)
	if err == nil || rep["valid"] != false || rep["events"] != float64(12) || rep["signed_size"] != float64(12) {
		t.Fatalf("batch with a gap and a break: %v %v", rep, err)
	}
	wantFindings := map[string]any{
		"gaps":   []any{map[string]any{"after_sequence": float64(9), "missing_from": float64(10), "missing_to": float64(10)}},
		"breaks": []any{map[string]any{"sequence": float64(12), "event_id": "evt-cli-12", "expected_prev_hash": payload11, "found_prev_hash": bogus}},
	}
	for k, want := range wantFindings {
		if !reflect.DeepEqual(rep[k], want) {
			t.Fatalf("%s: %v, want %v", k, rep[k], want)
		}
	}
	if f := rep["failure"].(map[string]any); f["kind"] != "gap" || f["sequence"] != float64(10) || f["block"] != nil || f["line"] != float64(line11) {
		t.Fatalf("batch with a gap and a break: failure %v, want gap at 10 on line %d", f, line11)
	}

	// Another service's key is refused.
	other, _, _ := ed25519.GenerateKey(nil)
	if rep, err := runVerifyExport(t, full, "--service-key", base64.StdEncoding.EncodeToString(other)); err == nil || rep["failure"].(map[string]any)["kind"] != "service_key" {
		t.Fatalf("other key: %v %v", rep, err)
	}
	// Usage errors.
	for _, args := range [][]string{{full}, {"--service-key", pubB64}, {full, "--service-key", "not-a-key"}, {filepath.Join(dir, "missing"), "--service-key", pubB64}} {
		if _, err := runVerifyExport(t, args...); err == nil {
			t.Errorf("verify export %v succeeded", args)
		}
	}
}
