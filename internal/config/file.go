package config

// The optional settings file of `serve --config FILE` (docs/operations.md
// "Configuration file"): TOML whose top-level keys are the flags' names. A
// setting comes from the command line, else AUDITCHAIN_*, else the file,
// else the built-in default.

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/auditchain/auditchain/internal/suggest"
)

// ConfigFlag is the flag naming the settings file; AUDITCHAIN_CONFIG also
// names it, and the flag wins.
const ConfigFlag = "config"

// valueKind is the TOML type a setting takes: a flag of type int takes an
// integer, a bool flag true or false, every other flag (durations and dates
// included) a string.
type valueKind int

const (
	kindString valueKind = iota
	kindInt
	kindBool
)

// settingsFile is a loaded file: its path (for messages) and its values by
// key, which Parse marks used as the flags claim them.
type settingsFile struct {
	path      string
	values    map[string]any
	used      map[string]bool
	decodeErr error
}

// configPath is the file the command line names (--config FILE, -config=FILE;
// flags end at "--"), else AUDITCHAIN_CONFIG, else "".
func configPath(args []string, getenv func(string) string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != ConfigFlag {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return getenv("AUDITCHAIN_CONFIG")
}

// loadSettings reads path ("" is no file). A file that is not valid TOML
// loads as empty with its error kept for syntaxError, which can tell only
// once the flags are defined whether the line's key holds a secret.
func loadSettings(path string) (*settingsFile, error) {
	f := &settingsFile{path: path, values: map[string]any{}, used: map[string]bool{}}
	if path == "" {
		return f, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	if _, err := toml.Decode(string(b), &f.values); err != nil {
		f.values, f.decodeErr = map[string]any{}, err
	}
	return f, nil
}

// syntaxError is the file's TOML error, naming its line; the error's text is
// left out when the line's key holds a secret, so a password on a broken
// line is never printed.
func (f *settingsFile) syntaxError(secret func(key string) bool) error {
	var pe toml.ParseError
	switch {
	case f.decodeErr == nil:
		return nil
	case errors.As(f.decodeErr, &pe):
		msg := pe.Message
		if secret(pe.LastKey) {
			msg = "not valid TOML (the line is not shown: " + pe.LastKey + " holds a secret)"
		}
		return fmt.Errorf("--config %s: line %d: %s", f.path, pe.Position.Line, msg)
	}
	return fmt.Errorf("--config %s: %w", f.path, f.decodeErr)
}

// value is key's value as the flag would take it, and whether the file has
// it; a value of another TOML type is an error naming the key, never the value.
func (f *settingsFile) value(key string, kind valueKind) (string, bool, error) {
	raw, ok := f.values[key]
	if !ok {
		return "", false, nil
	}
	f.used[key] = true
	switch v := raw.(type) {
	case string:
		if kind == kindString {
			return v, true, nil
		}
	case int64:
		if kind == kindInt {
			return strconv.FormatInt(v, 10), true, nil
		}
	case bool:
		if kind == kindBool {
			return strconv.FormatBool(v), true, nil
		}
	}
	want := map[valueKind]string{kindString: `a string ("…")`, kindInt: "an integer", kindBool: "true or false"}[kind]
	return "", true, fmt.Errorf("--config %s: %s must be %s", f.path, key, want)
}

// list is key's value as a list of strings: a TOML array of strings, or one
// string (split like an AUDITCHAIN_* list, splitList), and where it came from.
func (f *settingsFile) list(key string) ([]string, string, error) {
	raw, ok := f.values[key]
	if !ok {
		return nil, "", nil
	}
	f.used[key] = true
	from := "--config " + f.path + ": " + key
	switch v := raw.(type) {
	case string:
		return splitList(v), from, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, from, fmt.Errorf("--config %s: %s must be an array of strings", f.path, key)
			}
			out = append(out, s)
		}
		return out, from, nil
	}
	return nil, from, fmt.Errorf("--config %s: %s must be an array of strings", f.path, key)
}

// unknown answers an error for each key no flag claimed, sorted, each with the nearest flag name when one is close.
func (f *settingsFile) unknown(flags []string) []error {
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(f.values)) {
		if f.used[key] {
			continue
		}
		msg := fmt.Sprintf("--config %s: unknown key %q", f.path, key)
		if key == ConfigFlag {
			msg += " (a settings file cannot name another)"
		} else if s := suggest.Closest(key, flags); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		errs = append(errs, errors.New(msg))
	}
	return errs
}
