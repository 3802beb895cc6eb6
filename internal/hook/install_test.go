package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/realprog"
)

// installWorld is a throwaway home and project, and the environment that
// points the hosts at them.
type installWorld struct {
	home, dir string
	env       map[string]string
}

func newInstallWorld(t *testing.T) *installWorld {
	t.Helper()
	root := t.TempDir()
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	w := &installWorld{home: filepath.Join(root, "home"), dir: filepath.Join(root, "project"), env: map[string]string{}}
	for _, d := range []string{w.home, w.dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *installWorld) target(host string, user bool, exe string) Target {
	return Target{Host: host, User: user, Dir: w.dir, Home: w.home, Getenv: func(k string) string { return w.env[k] },
		Command: Command(exe, host)}
}

// install and uninstall plan and apply tg, and answer the changes.
func install(t *testing.T, tg Target) []Change   { return planApply(t, PlanInstall, tg) }
func uninstall(t *testing.T, tg Target) []Change { return planApply(t, PlanUninstall, tg) }

func planApply(t *testing.T, plan func(Target) ([]Change, error), tg Target) []Change {
	t.Helper()
	changes, err := plan(tg)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(changes); err != nil {
		t.Fatal(err)
	}
	return changes
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func changed(cs []Change) int {
	n := 0
	for _, c := range cs {
		if c.Changed() {
			n++
		}
	}
	return n
}

// An install keeps every other key and hook of the settings file; installing
// again, under another program name (--exe …/ac), leaves one entry per
// event; uninstall takes out exactly the install's entries, and a file that
// held nothing else goes.
func TestInstallRecognisesItsEntriesByTheirCommand(t *testing.T) {
	w := newInstallWorld(t)
	path := filepath.Join(w.dir, ".claude", "settings.json")
	original := `{
  "permissions": {"allow": ["Bash(git status)"]},
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]
  }
}`
	writeFile(t, path, original)
	install(t, w.target("claude-code", false, "/usr/local/bin/auditchain"))
	first := readFile(t, path)
	if again, err := PlanInstall(w.target("claude-code", false, "/usr/local/bin/auditchain")); err != nil || changed(again) != 0 {
		t.Fatalf("installing again changes %d files (%v)", changed(again), err)
	}
	install(t, w.target("claude-code", false, "/opt/tools/ac"))
	var doc struct {
		Permissions map[string][]string `json:"permissions"`
		Hooks       map[string][]struct {
			Matcher string           `json:"matcher"`
			Hooks   []map[string]any `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(readFile(t, path)), &doc); err != nil {
		t.Fatal(err)
	}
	pre := doc.Hooks["PreToolUse"]
	if len(doc.Permissions["allow"]) != 1 || len(doc.Hooks["Stop"]) != 1 || len(pre) != 2 || pre[0].Hooks[0]["command"] != "./lint.sh" ||
		pre[1].Hooks[0]["command"] != "/opt/tools/ac hook --host claude-code" || pre[1].Hooks[0]["onFailure"] != "block" {
		t.Fatalf("after a reinstall under another name:\n%s\n(first install:\n%s)", readFile(t, path), first)
	}
	for _, ev := range []string{"PostToolUse", "PostToolUseFailure"} {
		if len(doc.Hooks[ev]) != 1 {
			t.Errorf("%s: %d entries, want 1", ev, len(doc.Hooks[ev]))
		}
	}
	uninstall(t, w.target("claude-code", false, ""))
	var back, orig map[string]any
	json.Unmarshal([]byte(readFile(t, path)), &back)
	json.Unmarshal([]byte(original), &orig)
	if b1, _ := Render(back); !bytes.Equal(b1, mustRender(t, orig)) {
		t.Fatalf("uninstall left:\n%s\nwant the original:\n%s", b1, original)
	}
	// A file install made goes with uninstall.
	user := w.target("claude-code", true, "/usr/local/bin/auditchain")
	install(t, user)
	uninstall(t, user)
	if _, err := os.Stat(filepath.Join(w.home, ".claude", "settings.json")); !os.IsNotExist(err) {
		t.Fatalf("the user settings install created are still there: %v", err)
	}
}

func mustRender(t *testing.T, v any) []byte {
	t.Helper()
	b, err := Render(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A matcher group holding our handler beside someone else's keeps theirs.
func TestUninstallKeepsOtherHandlersOfAGroup(t *testing.T) {
	w := newInstallWorld(t)
	path := filepath.Join(w.dir, ".claude", "settings.json")
	writeFile(t, path, `{"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
	  {"type": "command", "command": "'/my tools/ac' hook --host claude-code"},
	  {"type": "command", "command": "./audit-too.sh"}]}]}}`)
	uninstall(t, w.target("claude-code", false, ""))
	got := readFile(t, path)
	if strings.Contains(got, "hook --host") || !strings.Contains(got, "./audit-too.sh") {
		t.Fatalf("after uninstall:\n%s", got)
	}
}

func TestOurCommand(t *testing.T) {
	for cmd, want := range map[string]bool{
		"/usr/local/bin/auditchain hook --host codex":            true,
		"'/Applications/My Tools/ac' hook --host gemini":         true,
		"AUDITCHAIN_HOOK_POLICY=deny ac hook --host claude-code": true,
		"ac hook --host=cursor":                                  true,
		"auditchain hook flush":                                  false,
		"./lint.sh --host codex":                                 false,
		"ac hook --host vim":                                     false,
		"echo auditchain hook --host":                            false,
	} {
		if got := ourCommand(cmd); got != want {
			t.Errorf("ourCommand(%q) = %v, want %v", cmd, got, want)
		}
	}
	if got := Command("/opt/My Tools/ac", "codex"); got != `'/opt/My Tools/ac' hook --host codex` || !ourCommand(got) {
		t.Errorf("Command = %s", got)
	}
}

// The trust entry hook install writes carries the hash Codex 0.169 computes
// for the handler: the vector is what `codex app-server` (hooks/list)
// answered as currentHash for this very handler.
func TestCodexHookHashMatchesCodex(t *testing.T) {
	h := map[string]any{"type": "command", "command": "/usr/bin/true hook --host codex", "timeout": float64(10)}
	got, ok := CodexHookHash("PreToolUse", ".*", h)
	if want := "sha256:6879452227fe853da6ae9b26128644671df92913e21385cd22471da79f39c5a7"; !ok || got != want {
		t.Fatalf("CodexHookHash = %s, want %s", got, want)
	}
	if CodexHookKey("/h/.codex/hooks.json", "PreToolUse", 0, 1) != "/h/.codex/hooks.json:pre_tool_use:0:1" {
		t.Fatal("key")
	}
}

// A Codex install writes the hooks and, in config.toml, a trust entry per
// handler and the project's trust; every other line of config.toml stays
// byte for byte; the trust of another hook follows it when its position
// changes; uninstall restores config.toml exactly.
func TestCodexInstallWritesTrustAndUninstallRestoresIt(t *testing.T) {
	w := newInstallWorld(t)
	codexHome := filepath.Join(w.home, ".codex")
	cfg := filepath.Join(codexHome, "config.toml")
	hooksPath := filepath.Join(w.dir, ".codex", "hooks.json")
	originalCfg := `# my Codex
model = "gpt-5"  # the default

[model_providers.local]
name = "local"
base_url = "http://127.0.0.1:9/v1"

[hooks.state."` + hooksPath + `:post_tool_use:0:0"]
trusted_hash = "sha256:aaaa"
`
	writeFile(t, cfg, originalCfg)
	// Someone else's PostToolUse hook comes after an earlier install of ours.
	writeFile(t, hooksPath, `{"hooks": {"PostToolUse": [
	  {"matcher": ".*", "hooks": [{"type": "command", "command": "/old/auditchain hook --host codex", "timeout": 10}]},
	  {"matcher": "Bash", "hooks": [{"type": "command", "command": "./fmt.sh"}]}]}}`)
	// The old install's trust entry for its handler, and theirs at 1.
	writeFile(t, cfg, strings.Replace(originalCfg, ":post_tool_use:0:0", ":post_tool_use:1:0", 1)+`
[hooks.state."`+hooksPath+`:post_tool_use:0:0"]
trusted_hash = "sha256:old"
`)
	tg := w.target("codex", false, "/usr/local/bin/auditchain")
	install(t, tg)
	f, err := parseTOML([]byte(readFile(t, cfg)))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.Unmarshal([]byte(readFile(t, hooksPath)), &doc)
	for _, h := range codexHandlers(doc) {
		key := CodexHookKey(hooksPath, h.event, h.group, h.handler)
		got, _ := f.value("hooks", "state", key, "trusted_hash")
		want := "sha256:aaaa" // theirs, moved from 1 to 0
		if h.ours {
			want, _ = CodexHookHash(h.event, h.matcher, h.config)
		}
		if got != want {
			t.Errorf("%s: trusted_hash %q, want %q\n%s", key, got, want, readFile(t, cfg))
		}
	}
	if level, _ := f.value("projects", w.dir, "trust_level"); level != "trusted" {
		t.Errorf("project trust: %q", level)
	}
	if !strings.HasPrefix(readFile(t, cfg), "# my Codex\nmodel = \"gpt-5\"  # the default\n\n[model_providers.local]\n") {
		t.Errorf("the rest of config.toml changed:\n%s", readFile(t, cfg))
	}
	uninstall(t, tg)
	if got := readFile(t, cfg); got != originalCfg {
		t.Fatalf("after uninstall config.toml is\n%s\nwant\n%s", got, originalCfg)
	}
	if got := readFile(t, hooksPath); strings.Contains(got, "hook --host") || !strings.Contains(got, "./fmt.sh") {
		t.Fatalf("hooks.json after uninstall:\n%s", got)
	}
}

// An entry hook install would have to rewrite in a form it does not edit
// stops the install, nothing written; a project Codex marks untrusted too.
func TestCodexInstallRefusesWhatItCannotEdit(t *testing.T) {
	w := newInstallWorld(t)
	cfg := filepath.Join(w.home, ".codex", "config.toml")
	tg := w.target("codex", false, "/usr/local/bin/auditchain")
	writeFile(t, cfg, "[projects]\n\""+w.dir+"\" = { trust_level = \"untrusted\" }\n")
	if _, err := PlanInstall(tg); err == nil || !strings.Contains(err.Error(), "untrusted") {
		t.Fatalf("install into an untrusted project: %v", err)
	}
	user := w.target("codex", true, "/usr/local/bin/auditchain")
	key := CodexHookKey(filepath.Join(w.home, ".codex", "hooks.json"), "PreToolUse", 0, 0)
	writeFile(t, cfg, "[hooks]\nstate.\""+key+"\".trusted_hash = \"sha256:x\"\n")
	writeFile(t, filepath.Join(w.home, ".codex", "hooks.json"), `{"hooks":{"PreToolUse":[{"matcher":".*","hooks":[{"type":"command","command":"ac hook --host codex"}]}]}}`)
	if _, err := PlanInstall(user); err == nil || !strings.Contains(err.Error(), "form hook install does not edit") {
		t.Fatalf("install over a dotted-key entry: %v", err)
	}
}

// A Gemini project install trusts the folder (and records that it did),
// allows the hook's two variables through the redaction, and uninstall
// takes out exactly those; a folder trusted already is left alone, one
// marked DO_NOT_TRUST stops the install.
func TestGeminiInstallTrustsTheFolderAndAllowsTheEnvironment(t *testing.T) {
	w := newInstallWorld(t)
	folders := filepath.Join(w.home, ".gemini", "trustedFolders.json")
	settings := filepath.Join(w.dir, ".gemini", "settings.json")
	writeFile(t, folders, `{"/elsewhere": "TRUST_FOLDER"}`)
	writeFile(t, settings, `{
  // the project's model
  "model": {"name": "gemini-2.5-pro"},
  "security": {"environmentVariableRedaction": {"allowed": ["MY_TOKEN_NAME"]}}
}`)
	tg := w.target("gemini", false, "/usr/local/bin/auditchain")
	install(t, tg)
	var rules map[string]string
	json.Unmarshal([]byte(readFile(t, folders)), &rules)
	if rules[w.dir] != "TRUST_FOLDER" || rules["/elsewhere"] != "TRUST_FOLDER" {
		t.Fatalf("trustedFolders.json: %v", rules)
	}
	var doc struct {
		Model    map[string]string `json:"model"`
		Security struct {
			Redaction struct {
				Allowed []string `json:"allowed"`
			} `json:"environmentVariableRedaction"`
		} `json:"security"`
		Hooks map[string][]struct {
			Hooks []map[string]any `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(readFile(t, settings)), &doc); err != nil {
		t.Fatal(err)
	}
	if strings.Join(doc.Security.Redaction.Allowed, ",") != "MY_TOKEN_NAME,"+strings.Join(GeminiEnv, ",") || doc.Model["name"] != "gemini-2.5-pro" {
		t.Fatalf("settings:\n%s", readFile(t, settings))
	}
	h := doc.Hooks["BeforeTool"][0].Hooks[0]
	if h["name"] != "auditchain" || h["timeout"] != float64(10000) {
		t.Fatalf("BeforeTool handler %v", h)
	}
	uninstall(t, tg)
	if got := readFile(t, folders); strings.Contains(got, w.dir) || !strings.Contains(got, "/elsewhere") {
		t.Fatalf("trustedFolders.json after uninstall: %s", got)
	}
	if got := readFile(t, settings); strings.Contains(got, "AUDITCHAIN") || strings.Contains(got, "hooks\": {\n    \"") || !strings.Contains(got, "MY_TOKEN_NAME") {
		t.Fatalf("settings after uninstall:\n%s", got)
	}
	if _, err := os.Stat(tg.geminiRecordPath()); !os.IsNotExist(err) {
		t.Fatal("the install record is still there")
	}
	// Trusted already (by a parent rule): nothing to add, nothing to take.
	writeFile(t, folders, `{"`+filepath.Dir(w.dir)+`": "TRUST_FOLDER"}`)
	install(t, tg)
	uninstall(t, tg)
	if got := readFile(t, folders); got != `{"`+filepath.Dir(w.dir)+`": "TRUST_FOLDER"}` {
		t.Fatalf("a trust the user wrote was changed: %s", got)
	}
	writeFile(t, folders, `{"`+w.dir+`": "DO_NOT_TRUST"}`)
	if _, err := PlanInstall(tg); err == nil || !strings.Contains(err.Error(), "DO_NOT_TRUST") {
		t.Fatalf("install into a distrusted folder: %v", err)
	}
}

// Cursor's install (unverified against Cursor itself) fails closed on the
// events that gate, and gates file edits before they happen.
func TestCursorInstallFailsClosedAndGatesEdits(t *testing.T) {
	w := newInstallWorld(t)
	install(t, w.target("cursor", false, "/usr/local/bin/auditchain"))
	var doc struct {
		Version int                         `json:"version"`
		Hooks   map[string][]map[string]any `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(w.dir, ".cursor", "hooks.json"))), &doc); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"beforeShellExecution", "beforeMCPExecution", "beforeReadFile", "preToolUse"} {
		if len(doc.Hooks[ev]) != 1 || doc.Hooks[ev][0]["failClosed"] != true {
			t.Errorf("%s: %v", ev, doc.Hooks[ev])
		}
	}
	if m, _ := doc.Hooks["preToolUse"][0]["matcher"].(string); doc.Version != 1 || !strings.Contains(m, "Write") || !strings.Contains(m, "Edit") {
		t.Errorf("version %d, preToolUse matcher %q", doc.Version, m)
	}
}

// The TOML reader finds values however they are written, and its edits
// leave every other line as it was.
func TestTOMLReadsTheFormsCodexUses(t *testing.T) {
	f, err := parseTOML([]byte(`a = "x" # c
s = """
[not.a.table]
"""
arr = [
  [1, 2],
]
[hooks.state."/p/h.json:pre_tool_use:0:0"]
trusted_hash = "sha256:1"
[hooks]
state."/p/h.json:stop:0:0".trusted_hash = 'sha256:2'
[projects]
"/w" = { trust_level = "trusted", other = { n = 3 } }
`))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"a": "x", "hooks\x00state\x00/p/h.json:pre_tool_use:0:0\x00trusted_hash": "sha256:1",
		"hooks\x00state\x00/p/h.json:stop:0:0\x00trusted_hash": "sha256:2",
		"projects\x00/w\x00trust_level":                        "trusted", "projects\x00/w\x00other\x00n": "3",
	} {
		if got, _ := f.value(strings.Split(path, "\x00")...); got != want {
			t.Errorf("%q = %q, want %q", path, got, want)
		}
	}
	if _, ok := f.value("not", "a", "table"); ok || len(f.tables) != 3 {
		t.Errorf("a multi-line string was read as a table: %v", f.tables)
	}
	if !f.ownsTable([]string{"hooks", "state", "/p/h.json:pre_tool_use:0:0"}, "trusted_hash") ||
		f.ownsTable([]string{"projects", "/w"}, "trust_level") {
		t.Error("ownsTable")
	}
}

// Codex itself (codex app-server, hooks/list: its own reading of hooks.json
// and config.toml, no model involved) runs what hook install wrote, at
// either scope, and lists nothing of it after uninstall.
func TestCodexTrustsWhatInstallWrites(t *testing.T) {
	bin := realprog.Bin(t, "codex")
	for _, user := range []bool{true, false} {
		w := newInstallWorld(t)
		w.env["CODEX_HOME"] = filepath.Join(w.home, "codex-home")
		environ := []string{"HOME=" + w.home, "CODEX_HOME=" + w.env["CODEX_HOME"], "PATH=" + os.Getenv("PATH")}
		tg := w.target("codex", user, "/usr/local/bin/auditchain")
		install(t, tg)
		cwd := w.dir
		hooks, err := CodexHooksList(context.Background(), bin, cwd, environ)
		if err != nil {
			t.Fatal(err)
		}
		events := map[string]string{}
		for _, h := range hooks {
			if ourCommand(h.Command) {
				events[h.EventName] = h.TrustStatus
			}
		}
		if len(events) != 2 || events["preToolUse"] != "trusted" || events["postToolUse"] != "trusted" {
			t.Fatalf("user %v: Codex lists %+v", user, hooks)
		}
		uninstall(t, tg)
		if hooks, err = CodexHooksList(context.Background(), bin, cwd, environ); err != nil || len(hooks) != 0 {
			t.Fatalf("user %v: after uninstall Codex lists %+v (%v)", user, hooks, err)
		}
	}
}
