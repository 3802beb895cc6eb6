// Package realprog finds the real programs from npm that tests drive instead of
// imitations of them: the agent hosts (Claude Code, Codex CLI, Gemini CLI), the MCP
// SDK, servers and Inspector, and the Standard Webhooks verifier. They are pinned in
// .ci/npm/package.json and installed, once, by .ci/npm/install into a cache keyed by
// the lockfile's hash; .ci/run always installs them and requires them.
//
// A test that needs them calls Bin or NodeModules: without them it is skipped, saying
// how to install them, unless AUDITCHAIN_REQUIRE_REAL_PROGRAMS=1 (CI), where it fails.
package realprog

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// EnvDir names the node_modules directory to use; RequireEnv set to 1 turns a
// missing program into a failure instead of a skip.
const (
	EnvDir     = "AUDITCHAIN_NODE_MODULES"
	RequireEnv = "AUDITCHAIN_REQUIRE_REAL_PROGRAMS"
)

// NodeModules answers the node_modules directory holding the pinned programs,
// with node on PATH, or ends the test (skip, or fail under RequireEnv).
func NodeModules(tb testing.TB) string {
	tb.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		missing(tb, "node is not on PATH")
	}
	dir := os.Getenv(EnvDir)
	if dir == "" {
		dir = defaultDir()
	}
	if dir == "" {
		missing(tb, "no cache directory")
	}
	if _, err := os.Stat(filepath.Join(dir, ".bin")); err != nil {
		missing(tb, "no programs at "+dir)
	}
	return dir
}

// Bin answers the path of an installed program (node_modules/.bin/name).
func Bin(tb testing.TB, name string) string {
	tb.Helper()
	path := filepath.Join(NodeModules(tb), ".bin", name)
	if _, err := os.Stat(path); err != nil {
		tb.Fatalf("%s is not among the pinned programs (.ci/npm/package.json): %v", name, err)
	}
	return path
}

func missing(tb testing.TB, why string) {
	tb.Helper()
	msg := "real programs from npm unavailable (" + why + "): run .ci/npm/install, or set " + EnvDir + "; CI always does"
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// defaultDir is where .ci/npm/install puts the programs for this checkout's
// lockfile, so that a developer who ran it once needs no variable.
func defaultDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	lock, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", ".ci", "npm", "package-lock.json"))
	if err != nil {
		return ""
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(home, ".cache")
	}
	sum := sha256.Sum256(lock)
	return filepath.Join(cache, "auditchain", "npm", hex.EncodeToString(sum[:])[:16], "node_modules")
}
