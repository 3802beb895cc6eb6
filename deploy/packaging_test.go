package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/config"
)

// The systemd unit passes `systemd-analyze verify` without a word (an
// unknown or misspelt directive is only a warning there, so any output
// fails), and its ExecStart is a serve command line that loads the example
// settings file.
func TestSystemdUnitVerifies(t *testing.T) {
	unit, err := os.ReadFile("auditchain.service")
	if err != nil {
		t.Fatal(err)
	}
	execStart := regexp.MustCompile(`(?m)^ExecStart=(\S+) (.*)$`).FindSubmatch(unit)
	if execStart == nil {
		t.Fatal("auditchain.service has no ExecStart=BINARY ARGS")
	}
	args := strings.Fields(string(execStart[2]))
	if len(args) < 3 || args[0] != "serve" || args[1] != "--config" {
		t.Fatalf("ExecStart arguments %q, want serve --config FILE", args)
	}
	args[2] = "auditchain.toml" // the example the unit's comment installs there
	if _, err := config.Parse(args[1:], func(string) string { return "" }, io.Discard); err != nil {
		t.Fatalf("serve %s with deploy/auditchain.toml: %v", strings.Join(args[1:], " "), err)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not on PATH: the unit's directives were not verified")
	}
	// verify also checks that ExecStart's binary exists and is executable.
	bin := plainBuild(t)
	dir := t.TempDir()
	text := strings.Replace(string(unit), "ExecStart="+string(execStart[1]), "ExecStart="+bin, 1)
	if err := os.WriteFile(filepath.Join(dir, "auditchain.service"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "./auditchain.service")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify auditchain.service: %v\n%s", err, out)
	}
	for _, directive := range []string{"DynamicUser=yes", "StateDirectory=auditchain", "ProtectSystem=strict", "ProtectHome=yes",
		"NoNewPrivileges=yes", "PrivateTmp=yes", "CapabilityBoundingSet=\n", "SystemCallFilter=@system-service", "EnvironmentFile=-/etc/auditchain/auditchain.env"} {
		if !strings.Contains(text, "\n"+directive) {
			t.Errorf("auditchain.service lacks %q", strings.TrimSpace(directive))
		}
	}
}

// containerfile is what the image runs: its ENV, ENTRYPOINT + CMD and the
// HEALTHCHECK's command.
type containerfile struct {
	env         map[string]string
	run, health []string
}

func readContainerfile(t *testing.T) containerfile {
	t.Helper()
	b, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines, drop comments.
	var lines []string
	cur := ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur += s + " "
			continue
		}
		lines, cur = append(lines, cur+l), ""
	}
	cf := containerfile{env: map[string]string{}}
	var entry, cmd []string
	final := false
	for _, l := range lines {
		word, rest, _ := strings.Cut(strings.TrimSpace(l), " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "FROM":
			final = strings.HasPrefix(rest, "scratch")
		case "ENV":
			if final {
				for _, kv := range strings.Fields(rest) {
					k, v, _ := strings.Cut(kv, "=")
					cf.env[k] = v
				}
			}
		case "ENTRYPOINT":
			json.Unmarshal([]byte(rest), &entry)
		case "CMD":
			json.Unmarshal([]byte(rest), &cmd)
		case "HEALTHCHECK":
			_, arr, _ := strings.Cut(rest, "CMD ")
			if err := json.Unmarshal([]byte(arr), &cf.health); err != nil {
				t.Fatalf("HEALTHCHECK CMD %q: %v (want the exec form)", arr, err)
			}
		}
	}
	cf.run = append(entry, cmd...)
	if len(cf.run) < 2 || len(cf.health) < 2 || cf.env["AUDITCHAIN_DB"] == "" {
		t.Fatalf("Containerfile: run %q health %q env %v", cf.run, cf.health, cf.env)
	}
	return cf
}

// The image's configuration works as the image runs it, without a
// container runtime: the binary built as the Containerfile builds it, its
// ENV with /data standing for a fresh directory and the port a free one,
// its ENTRYPOINT and CMD create the store there and serve, and the
// HEALTHCHECK's command, given only that environment, finds it healthy.
func TestContainerfileConfigurationServesAndIsHealthy(t *testing.T) {
	cf := readContainerfile(t)
	bin := plainBuild(t)
	data := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + data}
	for k, v := range cf.env {
		v = strings.ReplaceAll(v, "/data", data)
		if k == "AUDITCHAIN_ADDR" {
			v = strings.Replace(v, ":8080", ":"+port, 1)
		}
		env = append(env, k+"="+v)
	}
	image := func(argv []string) *exec.Cmd {
		if !strings.HasSuffix(argv[0], "/auditchain") {
			t.Fatalf("the image runs %q, want the binary at /usr/local/bin/auditchain", argv[0])
		}
		c := exec.Command(bin, argv[1:]...)
		c.Dir, c.Env = data, env
		return c
	}
	server := image(cf.run)
	stdout, _ := server.StdoutPipe()
	var serverErr bytes.Buffer
	server.Stderr = &serverErr
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && !strings.HasPrefix(lines.Text(), "auditchain listening on") {
	}
	go io.Copy(io.Discard, stdout)
	if out, err := image(cf.health).CombinedOutput(); err != nil {
		t.Fatalf("the HEALTHCHECK command %q: %v\n%s\nserve's stderr:\n%s", cf.health, err, out, serverErr.String())
	}
	if _, err := os.Stat(filepath.Join(data, "auditchain.db")); err != nil {
		t.Fatalf("the store is not on the volume: %v", err)
	}
}

// With AUDITCHAIN_TEST_CONTAINER=1 and docker or podman able to build (it
// pulls the Go image), the image itself is built and run until its
// HEALTHCHECK's command answers inside it.
func TestContainerImageBuilds(t *testing.T) {
	if os.Getenv("AUDITCHAIN_TEST_CONTAINER") != "1" {
		t.Skip("set AUDITCHAIN_TEST_CONTAINER=1 to build and run deploy/Containerfile with docker or podman")
	}
	var engine string
	for _, e := range []string{"podman", "docker"} {
		if p, err := exec.LookPath(e); err == nil {
			engine = p
			break
		}
	}
	if engine == "" {
		t.Fatal("AUDITCHAIN_TEST_CONTAINER=1 but neither podman nor docker is on PATH")
	}
	tag := "auditchain-test:" + time.Now().UTC().Format("20060102150405")
	build := exec.Command(engine, "build", "-f", "deploy/Containerfile", "-t", tag, "--build-arg", "VERSION=v0.0.0-image", ".")
	if strings.HasSuffix(engine, "podman") {
		build.Args = append(build.Args[:2], append([]string{"--format", "docker"}, build.Args[2:]...)...)
	}
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(build.Args, " "), err, out)
	}
	t.Cleanup(func() { exec.Command(engine, "rmi", "-f", tag).Run() })
	out, err := exec.Command(engine, "run", "-d", "--rm", tag).Output()
	if err != nil {
		t.Fatalf("run %s: %v", tag, err)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command(engine, "rm", "-f", id).Run() })
	if v, err := exec.Command(engine, "exec", id, "/usr/local/bin/auditchain", "version").Output(); err != nil || !strings.HasPrefix(string(v), "auditchain v0.0.0-image") {
		t.Fatalf("version in the image: %q %v", v, err)
	}
	// The server starts in the container on its own clock; the health
	// command is asked until it answers (what the engine's HEALTHCHECK does).
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last []byte
	for range 60 {
		if last, err = exec.Command(engine, "exec", id, "/usr/local/bin/auditchain", "health", "--timeout", "2s").CombinedOutput(); err == nil {
			return
		}
		<-tick.C
	}
	t.Fatalf("the image never answered its health check: %s", last)
}
