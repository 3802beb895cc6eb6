package main

import (
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// `auditchain health` is the container's HEALTHCHECK: exit 0 with the
// service's answer while it serves, exit 1 naming the URL when nothing
// listens there.
func TestHealthProbesTheService(t *testing.T) {
	base, stop := startServe(t, nil, "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
	out, _, err := runOut(t, noEnv, "health", "--url", base)
	var h map[string]any
	if err != nil || json.Unmarshal([]byte(out), &h) != nil || h["status"] != "ok" {
		t.Fatalf("health --url %s: %q %v, want the ok answer", base, out, err)
	}
	// AUDITCHAIN_URL names the service as for the client verbs.
	if _, _, err := runOut(t, func(k string) string { return map[string]string{"AUDITCHAIN_URL": base}[k] }, "health"); err != nil {
		t.Fatalf("health with AUDITCHAIN_URL=%s: %v", base, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, _, err = runOut(t, noEnv, "health", "--url", base)
	if err == nil || exitCode(err, io.Discard) != exitFailure || !strings.Contains(err.Error(), base+"/v1/health cannot be reached") {
		t.Fatalf("health on a stopped server: %v, want exit 1 naming %s/v1/health", err, base)
	}
}

// `auditchain --version` answers as `auditchain version` does.
func TestDashDashVersion(t *testing.T) {
	want, _, err := runOut(t, noEnv, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"--version", "-version"} {
		if got, _, err := runOut(t, noEnv, arg); err != nil || got != want {
			t.Errorf("auditchain %s: %q %v, want %q", arg, got, err, want)
		}
	}
}

// Without a URL, health asks where serve listens by AUDITCHAIN_ADDR, an
// unspecified host on loopback.
func TestHealthURLFollowsServeAddr(t *testing.T) {
	for addr, want := range map[string]string{
		"":               "http://127.0.0.1:8080",
		"0.0.0.0:9000":   "http://127.0.0.1:9000",
		":9001":          "http://127.0.0.1:9001",
		"[::]:9002":      "http://[::1]:9002",
		"10.1.2.3:9003":  "http://10.1.2.3:9003",
		"localhost:9004": "http://localhost:9004",
	} {
		if got := localURL(addr); got != want {
			t.Errorf("localURL(%q) = %q, want %q", addr, got, want)
		}
	}
}
