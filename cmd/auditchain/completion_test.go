package main

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/config"
)

// everyVerb is every command line prefix a completion must offer: the
// top-level commands, the client groups' verb tables, the verbs group
// dispatches to (admin, verify, machines keygen) and hook's and mcp's.
func everyVerb(t *testing.T) [][]string {
	t.Helper()
	ctx := context.Background()
	var all [][]string
	for _, name := range slices.Sorted(maps.Keys(commands(ctx, noEnv, io.Discard, io.Discard))) {
		all = append(all, []string{name})
		var subs subcommandList
		if err := dispatch(ctx, []string{name, subcommandsProbe}, noEnv, io.Discard, io.Discard); errors.As(err, &subs) {
			for _, s := range subs {
				all = append(all, []string{name, s})
			}
		}
	}
	for group, verbs := range map[string][]verb{"events": eventVerbs, "grants": grantVerbs, "proposals": proposalVerbs,
		"chain": chainVerbs, "keys": keyVerbs, "machines": machineVerbs, "approvals": approvalVerbs, "approval-rules": approvalRuleVerbs} {
		for _, v := range verbs {
			all = append(all, []string{group, v.name})
		}
	}
	for cmd, subs := range nonGroupSubs {
		for _, s := range subs {
			all = append(all, []string{cmd, s})
		}
	}
	if len(all) < 40 {
		t.Fatalf("found only %d commands and verbs: %v", len(all), all)
	}
	return all
}

// Every command and verb appears in each shell's script, and the bash
// script parses (bash -n) and completes as bash runs it.
func TestCompletionCoversEveryVerb(t *testing.T) {
	scripts := map[string]string{}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, _, err := runOut(t, noEnv, "completion", shell)
		if err != nil {
			t.Fatalf("completion %s: %v", shell, err)
		}
		scripts[shell] = out
	}
	for _, path := range everyVerb(t) {
		parent, last := strings.Join(path[:len(path)-1], " "), path[len(path)-1]
		for shell, script := range scripts {
			var ok bool
			switch shell {
			case "fish":
				ok = strings.Contains(script, "test (__auditchain_path) = '"+parent+"'\" -a "+last+"\n")
			default:
				_, words, found := strings.Cut(script, "\n    '"+parent+"') words='")
				words, _, _ = strings.Cut(words, "'")
				ok = found && slices.Contains(strings.Fields(words), last)
			}
			if !ok {
				t.Errorf("completion %s does not offer %q after %q", shell, last, "auditchain "+parent)
			}
		}
	}
	// The serve flags are all there (config's table, through --help).
	var help strings.Builder
	config.Parse([]string{"--help"}, noEnv, &help)
	_, serveWords, _ := strings.Cut(scripts["bash"], "\n    'serve') words='")
	serveWords, _, _ = strings.Cut(serveWords, "'")
	for _, f := range flagsOf(help.String()) {
		if !slices.Contains(strings.Fields(serveWords), "--"+f) {
			t.Errorf("completion bash lacks serve's --%s", f)
		}
	}

	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not on PATH: the bash script was not parsed")
	}
	file := filepath.Join(t.TempDir(), "auditchain.bash")
	if err := os.WriteFile(file, []byte(scripts["bash"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bash, "-n", file).CombinedOutput(); err != nil {
		t.Fatalf("bash -n on the bash completion: %v\n%s", err, out)
	}
	for line, want := range map[string]string{
		"auditchain ev":                     "events",
		"auditchain events ap":              "append",
		"auditchain events append --ty":     "--type",
		"auditchain admin create-k":         "create-key",
		"auditchain serve --daily-event-q":  "--daily-event-quota",
		"auditchain hook inst":              "install",
		"auditchain --api-key x grants sta": "status",
	} {
		words := strings.Fields(line)
		script := ". " + file + "; COMP_WORDS=(" + strings.Join(words, " ") + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) + "; _auditchain; echo \"${COMPREPLY[@]}\""
		out, err := exec.Command(bash, "-c", script).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("bash completes %q to %q (%v), want %q", line, strings.TrimSpace(string(out)), err, want)
		}
	}
	if fish, err := exec.LookPath("fish"); err == nil {
		f := filepath.Join(t.TempDir(), "auditchain.fish")
		os.WriteFile(f, []byte(scripts["fish"]), 0o644)
		if out, err := exec.Command(fish, "-n", f).CombinedOutput(); err != nil {
			t.Errorf("fish -n on the fish completion: %v\n%s", err, out)
		}
	}
}

// hook's and mcp's subcommands, which group does not list, are commands:
// each answers --help with a help that names it.
func TestCompletionNonGroupSubcommandsExist(t *testing.T) {
	for cmd, subs := range nonGroupSubs {
		for _, s := range subs {
			out, _, err := runOut(t, noEnv, cmd, s, "--help")
			if err != nil || !strings.Contains(out, cmd+" "+s) {
				t.Errorf("auditchain %s %s --help: %q %v, want a help naming %q", cmd, s, out, err, cmd+" "+s)
			}
		}
	}
}

func TestCompletionRefusesAnUnknownShell(t *testing.T) {
	_, _, err := runOut(t, noEnv, "completion", "tcsh")
	if exitCode(err, io.Discard) != exitUsage || !strings.Contains(err.Error(), "bash, zsh or fish") {
		t.Fatalf("completion tcsh: %v, want a usage error naming the shells", err)
	}
}
