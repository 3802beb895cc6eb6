package hook

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Gemini CLI 0.61 loads project hooks (.gemini/settings.json) only in a
// trusted folder: a ~/.gemini/trustedFolders.json rule, or
// GEMINI_CLI_TRUST_WORKSPACE=true. Under `gemini --skip-trust` the folder's
// settings are not loaded at all, hooks included; user hooks
// (~/.gemini/settings.json) are. Its environment redaction
// (security.environmentVariableRedaction, on when enabled or when GITHUB_SHA
// is set) strips AUDITCHAIN_API_KEY from hooks unless allowed by name.

// GeminiEnv are the variables the hook reads, which install allows through
// Gemini's redaction: the two it needs, and the settings a strict redaction
// would otherwise drop without a word (a --policy deny falling back to
// record).
var GeminiEnv = []string{"AUDITCHAIN_URL", "AUDITCHAIN_API_KEY", "AUDITCHAIN_HOOK_AGENT", "AUDITCHAIN_HOOK_POLICY",
	"AUDITCHAIN_HOOK_ON_ERROR", "AUDITCHAIN_HOOK_TIMEOUT", "AUDITCHAIN_HOOK_SPOOL", "AUDITCHAIN_HOOK_DEBUG"}

// neededEnv are the variables without which the hook refuses every call.
var neededEnv = GeminiEnv[:2]

// geminiHome is $GEMINI_CLI_HOME, else the home directory.
func (t Target) geminiHome() string {
	if h := t.env("GEMINI_CLI_HOME"); h != "" {
		return h
	}
	return t.Home
}

// GeminiTrustedFoldersPath is the file of Gemini's folder-trust rules.
func (t Target) GeminiTrustedFoldersPath() string {
	if p := t.env("GEMINI_CLI_TRUSTED_FOLDERS_PATH"); p != "" {
		return p
	}
	return filepath.Join(t.geminiHome(), ".gemini", "trustedFolders.json")
}

// geminiRecordPath is the install record in the project's .gemini: what an
// install added outside the settings file (the folder's trust), so that
// uninstall takes out exactly that.
func (t Target) geminiRecordPath() string {
	return filepath.Join(t.Dir, ".gemini", "auditchain-hook.json")
}

type geminiRecord struct {
	TrustedFolder string `json:"trusted_folder,omitempty"`
}

// geminiSettings edits the settings document for the redaction allow-list
// and returns the trust changes of a project install.
func (t Target) geminiSettings(doc map[string]any, install bool) ([]Change, error) {
	if err := geminiAllowEnv(doc, install); err != nil {
		return nil, err
	}
	if t.User {
		return nil, nil
	}
	folders, err := readChange(t.GeminiTrustedFoldersPath())
	if err != nil {
		return nil, err
	}
	folders.Mode = 0o600 // as Gemini makes it
	rules := map[string]any{}
	if folders.Before != nil {
		if rules, err = parseSettings(folders.Path, folders.Before); err != nil {
			return nil, err
		}
	}
	record, err := readChange(t.geminiRecordPath())
	if err != nil {
		return nil, err
	}
	var rec geminiRecord
	if record.Before != nil {
		_ = json.Unmarshal(record.Before, &rec)
	}
	if install {
		switch trusted, rule := GeminiFolderTrusted(rules, t.Dir); {
		case trusted == "no":
			return nil, fmt.Errorf("%s marks %s %s: Gemini loads none of its project hooks; change that rule, or install with --user", folders.Path, rule, rules[rule])
		case trusted == "yes":
			return nil, nil
		}
		rules[t.Dir] = "TRUST_FOLDER"
		if folders.After, err = Render(rules); err != nil {
			return nil, err
		}
		folders.Notes = []string{"Gemini trusts the folder " + t.Dir + " (project hooks load only in a trusted folder)"}
		if record.After, err = Render(geminiRecord{TrustedFolder: t.Dir}); err != nil {
			return nil, err
		}
		record.Notes = []string{"the record of that trust, for hook uninstall"}
		return []Change{folders, record}, nil
	}
	if rec.TrustedFolder == "" {
		return nil, nil
	}
	var out []Change
	if rules[rec.TrustedFolder] == "TRUST_FOLDER" {
		delete(rules, rec.TrustedFolder)
		if len(rules) > 0 {
			if folders.After, err = Render(rules); err != nil {
				return nil, err
			}
		} else {
			folders.After = nil // no rule left: as if there were no file
		}
		folders.Notes = []string{"the folder trust hook install added goes"}
		out = append(out, folders)
	}
	record.Notes = []string{"the install record goes"}
	return append(out, record), nil
}

// geminiAllowEnv adds (install) or takes out (uninstall) GeminiEnv in
// security.environmentVariableRedaction.allowed, leaving every other name.
func geminiAllowEnv(doc map[string]any, install bool) error {
	path := []string{"security", "environmentVariableRedaction"}
	obj := doc
	for _, k := range path {
		next, ok := obj[k].(map[string]any)
		if obj[k] != nil && !ok {
			return fmt.Errorf("the settings' %s is not an object", strings.Join(path, "."))
		}
		if next == nil {
			if !install {
				return nil
			}
			next = map[string]any{}
			obj[k] = next
		}
		obj = next
	}
	list, ok := obj["allowed"].([]any)
	if obj["allowed"] != nil && !ok {
		return fmt.Errorf("the settings' %s.allowed is not a list", strings.Join(path, "."))
	}
	if install {
		for _, name := range GeminiEnv {
			if !slices.Contains(list, any(name)) {
				list = append(list, name)
			}
		}
		obj["allowed"] = list
		return nil
	}
	list = slices.DeleteFunc(list, func(v any) bool { s, _ := v.(string); return slices.Contains(GeminiEnv, s) })
	if len(list) > 0 {
		obj["allowed"] = list
		return nil
	}
	delete(obj, "allowed")
	// Containers left empty were the install's.
	if len(obj) == 0 {
		sec := doc["security"].(map[string]any)
		delete(sec, "environmentVariableRedaction")
		if len(sec) == 0 {
			delete(doc, "security")
		}
	}
	return nil
}

// GeminiFolderTrusted answers how Gemini's rules decide dir: "yes", "no", or
// "" (no rule: untrusted in a headless run), and the rule that decided, the
// longest path among those that cover dir, as Gemini 0.61 decides
// (TRUST_PARENT covers its path's parent).
func GeminiFolderTrusted(rules map[string]any, dir string) (string, string) {
	best, answer := "", ""
	for rule, level := range rules {
		base := rule
		if level == "TRUST_PARENT" {
			base = filepath.Dir(rule)
		}
		if real, err := filepath.EvalSymlinks(base); err == nil {
			base = real
		}
		if dir != base && !strings.HasPrefix(dir, strings.TrimSuffix(base, string(os.PathSeparator))+string(os.PathSeparator)) {
			continue
		}
		if len(rule) <= len(best) {
			continue
		}
		switch level {
		case "TRUST_FOLDER", "TRUST_PARENT":
			best, answer = rule, "yes"
		case "DO_NOT_TRUST":
			best, answer = rule, "no"
		}
	}
	return answer, best
}
