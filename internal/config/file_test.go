package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/suggest"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "auditchain.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// A setting comes from its flag, else AUDITCHAIN_*, else the file, else the
// built-in default: each level is seen where the ones above it are silent.
func TestSettingsFilePrecedence(t *testing.T) {
	path := writeFile(t, `# comments are fine
addr = "127.0.0.1:9001"          # the flag below wins
daily-event-quota = 77           # AUDITCHAIN_DAILY_EVENT_QUOTA wins
teams = true                     # only the file says it
stream-ping = "3s"
`)
	env := envOf(map[string]string{"AUDITCHAIN_DAILY_EVENT_QUOTA": "88"})
	c, err := Parse([]string{"--config", path, "--addr", "127.0.0.1:9002"}, env, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9002" || c.DailyEventQuota != 88 || !c.Teams || c.StreamPing != 3*time.Second || c.BatchRateLimit != 100 {
		t.Fatalf("addr %q quota %d teams %v ping %v batch %d; want the flag's addr, the env's quota, the file's teams and ping, the default batch limit",
			c.Addr, c.DailyEventQuota, c.Teams, c.StreamPing, c.BatchRateLimit)
	}
	// AUDITCHAIN_CONFIG names the file too; --config=FILE wins over it.
	other := writeFile(t, "teams = false\n")
	c, err = Parse([]string{"--config=" + other}, envOf(map[string]string{"AUDITCHAIN_CONFIG": path}), &bytes.Buffer{})
	if err != nil || c.Teams {
		t.Fatalf("--config=%s over AUDITCHAIN_CONFIG: teams %v, %v; want false from --config", other, c.Teams, err)
	}
	c, err = Parse(nil, envOf(map[string]string{"AUDITCHAIN_CONFIG": path}), &bytes.Buffer{})
	if err != nil || !c.Teams || c.Addr != "127.0.0.1:9001" {
		t.Fatalf("AUDITCHAIN_CONFIG=%s: teams %v addr %q, %v; want the file's", path, c.Teams, c.Addr, err)
	}
}

// Every serve flag is a key of the file: a file that sets each one to its
// default gives the Config no file gives.
func TestSettingsFileTakesEveryFlag(t *testing.T) {
	var help bytes.Buffer
	Parse([]string{"--help"}, envOf(nil), &help)
	flagLine := regexp.MustCompile(`^  -([a-z0-9-]+)(?: (\w+))?$`)
	defaultOf := regexp.MustCompile(`\(default (.*)\)$`)
	var file strings.Builder
	lines := strings.Split(help.String(), "\n")
	keys := 0
	for i, line := range lines {
		m := flagLine.FindStringSubmatch(line)
		if m == nil || m[1] == ConfigFlag {
			continue
		}
		name, kind := m[1], m[2]
		def := ""
		if d := defaultOf.FindStringSubmatch(lines[i+1]); d != nil {
			def = d[1]
		}
		var value string
		switch kind {
		case "": // a bool flag
			value = strconv.FormatBool(def == "true")
		case "int":
			value = def
			if value == "" { // the flag package shows no zero default
				value = "0"
			}
		case "string":
			if def == "" {
				def = `""`
			}
			value = def // already quoted by the flag package
		default: // durations, secret values
			value = strconv.Quote(def)
		}
		if value == "" {
			t.Fatalf("flag %s (%s) has no default to write", name, kind)
		}
		file.WriteString(name + " = " + value + "\n")
		keys++
	}
	if keys < 40 {
		t.Fatalf("found %d flags in serve --help:\n%s", keys, help.String())
	}
	want, err := Parse(nil, envOf(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse([]string{"--config", writeFile(t, file.String())}, envOf(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatalf("a file of every flag's default:\n%s\n%v", file.String(), err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("a file of every flag's default gives\n%+v\nwant\n%+v", got, want)
	}
}

// An unknown key is an error naming it, with the flag it is likely a typo
// of; a value of the wrong type names the key and the type it takes.
func TestSettingsFileRefusesUnknownKeysAndWrongTypes(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{`adr = "127.0.0.1:1"`, `unknown key "adr" (did you mean "addr"?)`},
		{`daily-event-qouta = 5`, `unknown key "daily-event-qouta" (did you mean "daily-event-quota"?)`},
		{`colour = "blue"`, `unknown key "colour"`},
		{`config = "other.toml"`, `unknown key "config" (a settings file cannot name another)`},
		{`daily-event-quota = "many"`, `daily-event-quota must be an integer`},
		{`teams = "yes"`, `teams must be true or false`},
		{`addr = 8080`, `addr must be a string`},
		{"[server]\naddr = \"x\"", `unknown key "server"`},
		{`stream-ping = "soon"`, `stream-ping: "soon" is not a duration: use a number and a unit`},
		{"addr = \"x\"\naddr = \"y\"", `line 2`},
	} {
		path := writeFile(t, tc.file)
		_, err := Parse([]string{"--config", path}, envOf(nil), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("file %q: %v, want an error naming %s and %q", tc.file, err, path, tc.want)
		}
	}
	if _, err := Parse([]string{"--config", filepath.Join(t.TempDir(), "none.toml")}, envOf(nil), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "none.toml") {
		t.Errorf("a --config that does not exist: %v, want an error naming it", err)
	}
}

// A secret set in the file is never printed: help says "(set)", and
// neither a broken line holding it nor a wrong type quotes it.
func TestSettingsFileNeverPrintsSecrets(t *testing.T) {
	const password = "hunter2-in-the-file"
	path := writeFile(t, `db = "postgres://app:`+password+`@db.example:5432/auditchain"
cron-secret = "`+password+`"
mail = "smtp://u:`+password+`@mail.example:587"
anchor-tsa-url = "https://u:`+password+`@tsa.example"
`)
	var help bytes.Buffer
	if _, err := Parse([]string{"--config", path, "--help"}, envOf(nil), &help); err == nil {
		t.Fatal("--help: want flag.ErrHelp")
	}
	if strings.Contains(help.String(), password) || strings.Count(help.String(), "(set)") != 4 {
		t.Fatalf("help with secrets from the file:\n%s\nwant (set) for each of the four, never the value", help.String())
	}
	for _, broken := range []string{
		`cron-secret = "` + password,
		`db = postgres://app:` + password + `@db`,
		`cron-secret = ` + password,
	} {
		_, err := Parse([]string{"--config", writeFile(t, broken)}, envOf(nil), &bytes.Buffer{})
		if err == nil || strings.Contains(err.Error(), password) || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("file %q: %v, want an error naming line 1 and not the value", broken, err)
		}
	}
	_, err := Parse([]string{"--config", writeFile(t, "cron-secret = 12345678\n")}, envOf(nil), &bytes.Buffer{})
	if err == nil || strings.Contains(err.Error(), "12345678") || !strings.Contains(err.Error(), "cron-secret must be a string") {
		t.Errorf("a secret of the wrong type: %v, want the key and the type, never the value", err)
	}
}

// The config file's "did you mean" for an unknown key is suggest.Closest
// over the flags' names: a typo, or the start of one name.
func TestUnknownKeySuggestion(t *testing.T) {
	flags := []string{"addr", "db", "daily-event-quota", "log-level", "log-format", "teams"}
	for name, want := range map[string]string{
		"adr": "addr", "dbb": "db", "log-levle": "log-level", "team": "teams",
		"colour": "", "x": "", "daily": "daily-event-quota", "log": "",
	} {
		if got := suggest.Closest(name, flags); got != want {
			t.Errorf("suggest.Closest(%q) = %q, want %q", name, got, want)
		}
	}
}
