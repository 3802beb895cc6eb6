package realprog

import (
	"os/exec"
	"strings"
	"testing"
)

// The pinned hosts start and report the version the lockfile pins: the cache
// the tests find is the one .ci/npm/install made for this lockfile.
func TestPinnedProgramsRun(t *testing.T) {
	for _, tc := range []struct{ bin, want string }{
		{"claude", "2.1.332"},
		{"codex", "0.169.0"},
		{"gemini", "0.61.0"},
	} {
		cmd := exec.Command(Bin(t, tc.bin), "--version")
		cmd.Env = append(cmd.Environ(), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", tc.bin, err, out)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("%s --version = %q, want %s", tc.bin, out, tc.want)
		}
	}
}
