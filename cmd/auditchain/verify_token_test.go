package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/delegation"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/verify"
)

// verifyToken runs the CLI and returns its report and error.
func verifyToken(t *testing.T, args ...string) (tokenReport, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"verify", "token"}, args...), func(string) string { return "" }, &out, io.Discard)
	var rep tokenReport
	if out.Len() > 0 {
		if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
			t.Fatalf("verify token printed non-JSON: %v\n%s", jerr, out.String())
		}
	}
	return rep, err
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerifyTokenChecks(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	grant := `{"grant_id":"g-0a","subagent":"s","parent_agent":null,"allowed_tools":["a"],"max_tool_calls":3,"expires_at":"2026-11-21T13:00:00.000000+00:00","created_at":"2026-11-21T12:00:00.000000+00:00","action":"granted","epoch":{}}`
	token, err := delegation.IssueToken([]byte(grant), priv, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString(pub)
	file := writeFile(t, "token.json", token)

	// Valid: with the key as base64, as a file of base64, as the public-key document, flag first or last.
	keyFile := writeFile(t, "key.txt", []byte(key+"\n"))
	doc, _ := json.Marshal(map[string]string{"key_id": verify.ServiceKeyID(pub), "algorithm": "ed25519", "public_key": key})
	docFile := writeFile(t, "key.json", doc)
	for _, args := range [][]string{
		{file, "--service-key", key},
		{"--service-key", key, file},
		{file, "--service-key", keyFile},
		{file, "--service-key=" + docFile},
	} {
		rep, err := verifyToken(t, args...)
		if err != nil || !rep.Valid || rep.GrantID != "g-0a" || len(rep.Failed) != 0 || len(rep.Checks) != 5 {
			t.Fatalf("verify token %v: %v %+v", args, err, rep)
		}
	}
	// A whole grant response is accepted too.
	resp, _ := json.Marshal(map[string]json.RawMessage{"grant": json.RawMessage(grant), "delegation": token})
	if rep, err := verifyToken(t, writeFile(t, "resp.json", resp), "--service-key", key); err != nil || !rep.Valid {
		t.Fatalf("grant response: %v %+v", err, rep)
	}

	// Each tampering fails exactly the checks it should, and the error names them.
	mutate := func(f func(m map[string]any)) string {
		var m map[string]any
		json.Unmarshal(token, &m)
		f(m)
		b, _ := json.Marshal(m)
		return writeFile(t, "bad.json", b)
	}
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	for _, c := range []struct {
		name string
		file string
		key  string
		want []string
	}{
		{"grant field", mutate(func(m map[string]any) { m["grant"].(map[string]any)["max_tool_calls"] = 4 }), key, []string{"order_signature"}},
		{"order key", mutate(func(m map[string]any) { m["order_public_key"] = base64.StdEncoding.EncodeToString(other) }), key, []string{"order_signature", "binding_match"}},
		{"binding", mutate(func(m map[string]any) { m["binding"].(map[string]any)["grant_id"] = "g-0b" }), key, []string{"binding_signature", "binding_match"}},
		{"another service key", file, base64.StdEncoding.EncodeToString(otherPub), []string{"binding_signature", "service_key_id"}},
		{"not a token", writeFile(t, "junk.json", []byte(`{"version":"v0"}`)), key, []string{"format"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := verifyToken(t, c.file, "--service-key", c.key)
			if err == nil || rep.Valid {
				t.Fatalf("tampered token verified: %+v", rep)
			}
			if !reflect.DeepEqual(rep.Failed, c.want) {
				t.Fatalf("failed = %v, want %v", rep.Failed, c.want)
			}
			for _, name := range c.want {
				if !strings.Contains(err.Error(), name) {
					t.Fatalf("error %q does not name %s", err, name)
				}
			}
		})
	}

	// Usage errors.
	for _, args := range [][]string{
		{file},
		{"--service-key", key},
		{file, "--service-key", "not-a-key"},
		{file, "--service-key", base64.StdEncoding.EncodeToString([]byte("short"))},
		{filepath.Join(t.TempDir(), "missing.json"), "--service-key", key},
	} {
		if _, err := verifyToken(t, args...); err == nil {
			t.Errorf("verify token %v succeeded", args)
		}
	}
}

// A token issued by POST /v1/grants verifies with the CLI against the key
// published at GET /v1/delegation/public-key.
func TestVerifyTokenFromTheService(t *testing.T) {
	dsn := storetest.DSN(t, storetest.SQLite)
	base, _ := startServe(t, map[string]string{"AUDITCHAIN_DB": dsn})
	var out strings.Builder
	if err := run(context.Background(), []string{"admin", "create-account", "--db", dsn, "--email", "ops@example.com"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var acct map[string]any
	json.Unmarshal([]byte(out.String()), &acct)

	body := `{"subagent":"researcher","expires_at":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `","max_tool_calls":5,"allowed_tools":["search"]}`
	req, _ := http.NewRequest("POST", base+"/v1/grants", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", acct["api_key"].(string))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	granted, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/grants: %d %s", resp.StatusCode, granted)
	}
	resp, err = http.Get(base + "/v1/delegation/public-key")
	if err != nil {
		t.Fatal(err)
	}
	keyDoc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var key struct{ KeyID, PublicKey string }
	json.Unmarshal(keyDoc, &struct {
		KeyID     *string `json:"key_id"`
		PublicKey *string `json:"public_key"`
	}{&key.KeyID, &key.PublicKey})

	var g struct {
		Delegation json.RawMessage `json:"delegation"`
	}
	json.Unmarshal(granted, &g)
	tokenFile := writeFile(t, "token.json", g.Delegation)
	rep, err := verifyToken(t, tokenFile, "--service-key", key.PublicKey)
	if err != nil || !rep.Valid || rep.ServiceKeyID != key.KeyID {
		t.Fatalf("service token with published key: %v %+v", err, rep)
	}
	// The saved key document works as KEY too.
	if rep, err := verifyToken(t, tokenFile, "--service-key", writeFile(t, "key.json", keyDoc)); err != nil || !rep.Valid {
		t.Fatalf("with the key document: %v %+v", err, rep)
	}
}
