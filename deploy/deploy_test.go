// Package deploy holds the packaging (deploy/release.sh, the Containerfile,
// the systemd unit); its tests build and check them as an operator uses them.
package deploy

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/auditchain/auditchain/internal/buildinfo"
)

// root is the repository's root, the directory the scripts and builds run in.
const root = ".."

// plainBuild is the binary as a build with no stamp makes it (-buildvcs=false,
// no ldflags), built once for every test that needs one.
func plainBuild(t *testing.T) string {
	t.Helper()
	plain.once.Do(func() {
		dir, err := os.MkdirTemp("", "auditchain-deploy-test-")
		if err != nil {
			plain.err = err
			return
		}
		plain.path = filepath.Join(dir, "auditchain")
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", plain.path, "./cmd/auditchain")
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			plain.err = fmt.Errorf("go build -buildvcs=false: %v\n%s", err, out)
		}
	})
	if plain.err != nil {
		t.Fatal(plain.err)
	}
	return plain.path
}

var plain struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if plain.path != "" {
		os.RemoveAll(filepath.Dir(plain.path))
	}
	os.Exit(code)
}

func output(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// A build with no VCS stamp and no ldflags (a tarball, -buildvcs=false)
// still says what it is: "devel", that no commit was recorded, and its Go
// version (docs/cli.md "auditchain version").
func TestVersionWithoutVCSStamp(t *testing.T) {
	bin := plainBuild(t)
	got := output(t, bin, "version")
	want := "auditchain devel " + buildinfo.NoRevision + " " + runtime.Version()
	if got != want {
		t.Fatalf("version of a -buildvcs=false build: %q, want %q", got, want)
	}
	if dash := output(t, bin, "--version"); dash != got {
		t.Fatalf("--version: %q, want %q", dash, got)
	}
}

// deploy/release.sh stamps the version and commit it was given into the
// binary, writes SHA256SUMS that match its archives, and gives the same
// archives when run again on the same commit.
func TestReleaseScriptStampsAndSums(t *testing.T) {
	for _, tool := range []string{"git", "tar", "gzip", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("deploy/release.sh needs %s on PATH", tool)
		}
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): deploy/release.sh stamps the commit from git", err)
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	release := func(out string) string {
		cmd := exec.Command("bash", "deploy/release.sh", "v0.0.0-test.1", out)
		// One platform (this one, so the binary runs here); a work tree with
		// changes is what a test runs in while someone edits.
		cmd.Dir, cmd.Env = root, append(os.Environ(), "AUDITCHAIN_RELEASE_PLATFORMS="+platform, "AUDITCHAIN_RELEASE_ALLOW_DIRTY=1")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("deploy/release.sh: %v\n%s", err, b)
		}
		sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		return string(sums)
	}
	out := t.TempDir()
	sums := release(out)
	name := "auditchain_v0.0.0-test.1_" + runtime.GOOS + "_" + runtime.GOARCH
	archive, err := os.ReadFile(filepath.Join(out, name+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(archive)
	if want := hex.EncodeToString(sum[:]) + "  " + name + ".tar.gz\n"; sums != want {
		t.Fatalf("SHA256SUMS:\n%s\nwant:\n%s", sums, want)
	}
	bin := extract(t, archive, name+"/auditchain")
	got := output(t, bin, "version")
	commit := strings.TrimSpace(string(head))
	if !strings.HasPrefix(got, "auditchain v0.0.0-test.1 revision "+commit) || !strings.Contains(got, runtime.Version()) {
		t.Fatalf("version of the release binary: %q, want auditchain v0.0.0-test.1 revision %s… %s", got, commit, runtime.Version())
	}
	if again := release(t.TempDir()); again != sums {
		t.Fatalf("a second release of the same commit differs:\n%s\nfirst:\n%s", again, sums)
	}
}

// extract writes the archive's member name to a temporary file and answers its path.
func extract(t *testing.T, archive []byte, name string) string {
	t.Helper()
	zr, err := gzip.NewReader(strings.NewReader(string(archive)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var members []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, h.Name)
		if h.Name != name {
			continue
		}
		path := filepath.Join(t.TempDir(), filepath.Base(name))
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	t.Fatalf("the archive has no %s: %v", name, members)
	return ""
}
