package legal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// ManifestName is the manifest's file name, in the embedded documents and in
// --legal-dir.
const ManifestName = "manifest.json"

// maxManifestBytes bounds manifest.json.
const maxManifestBytes = 1 << 20

// Bounds on the manifest's strings, in characters.
const (
	maxTitleChars   = 200
	maxSummaryChars = 2000
)

var (
	// Compiled on first use: package initialisation is paid by every
	// process start, `auditchain hook` included.
	idPattern      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_]{1,64}$`) })
	versionPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]{4}-[0-9]{2}-[0-9]{2})\.[0-9]+$`) })
)

// entry is one element of manifest.json's "documents" array:
//
//	{"documents": [{"document_id": "beta_terms", "title": "…", "summary": "…",
//	  "version": "2026-11-26.1", "required": true}]}
type entry struct {
	ID       string `json:"document_id"`
	Title    string `json:"title"`
	Summary  string `json:"summary"`
	Version  string `json:"version"`
	Required *bool  `json:"required"`
}

// loadFS reads manifest.json and the documents it lists from fsys; dir labels
// fsys in errors.
func loadFS(fsys fs.FS, dir string) ([]Document, error) {
	mpath := where(dir, ManifestName)
	raw, err := readLimited(fsys, ManifestName, maxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("legal: %s: missing (it lists the directory's documents)", mpath)
	}
	if err != nil {
		return nil, fmt.Errorf("legal: %s: %w", mpath, err)
	}
	entries, err := parseManifest(raw)
	if err != nil {
		return nil, fmt.Errorf("legal: %s: %w", mpath, err)
	}

	listed := make(map[string]bool, len(entries))
	for _, e := range entries {
		listed[e.ID+".md"] = true
	}
	dirEntries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("legal: %s: %w", dir, err)
	}
	for _, de := range dirEntries {
		name := de.Name()
		if !strings.EqualFold(path.Ext(name), ".md") {
			continue
		}
		if !listed[name] {
			return nil, fmt.Errorf("legal: %s: not listed in %s (every .md file must be a listed document_id)", where(dir, name), ManifestName)
		}
	}

	docs := make([]Document, 0, len(entries))
	for _, e := range entries {
		name := e.ID + ".md"
		file := where(dir, name)
		text, err := readLimited(fsys, name, MaxTextBytes)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("legal: %s: missing (%s lists document_id %q)", file, ManifestName, e.ID)
		}
		if err != nil {
			return nil, fmt.Errorf("legal: %s: %w", file, err)
		}
		if err := checkText(text); err != nil {
			return nil, fmt.Errorf("legal: %s: %w", file, err)
		}
		d := newDocument(e, text)
		if len(d.Text) > MaxTextBytes {
			return nil, fmt.Errorf("legal: %s: text is %d bytes once normalised, at most %d", file, len(d.Text), MaxTextBytes)
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// parseManifest decodes and checks manifest.json strictly: no unknown or
// missing fields, no trailing data, every entry valid, no id twice.
func parseManifest(raw []byte) ([]entry, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var m struct {
		Documents *[]entry `json:"documents"`
	}
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the manifest object")
	}
	if m.Documents == nil {
		return nil, errors.New(`"documents": missing`)
	}
	entries := *m.Documents
	if len(entries) == 0 {
		return nil, errors.New(`"documents": empty`)
	}
	first := make(map[string]int, len(entries))
	for i, e := range entries {
		if err := checkEntry(e); err != nil {
			return nil, fmt.Errorf("documents[%d]: %w", i, err)
		}
		if j, dup := first[e.ID]; dup {
			return nil, fmt.Errorf("documents[%d].document_id %q: duplicate (also documents[%d])", i, e.ID, j)
		}
		first[e.ID] = i
	}
	return entries, nil
}

func checkEntry(e entry) error {
	if !idPattern().MatchString(e.ID) {
		return fmt.Errorf("document_id %q: want 1 to 64 characters of a-z, 0-9 and _", e.ID)
	}
	if err := checkLine("title", e.Title, maxTitleChars); err != nil {
		return err
	}
	if err := checkLine("summary", e.Summary, maxSummaryChars); err != nil {
		return err
	}
	if err := checkVersion(e.Version); err != nil {
		return err
	}
	if e.Required == nil {
		return errors.New("required: missing (true or false)")
	}
	return nil
}

// checkLine checks a one-line string field: not blank, no surrounding space,
// no control characters, at most max characters.
func checkLine(field, s string, max int) error {
	switch {
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("%s: missing or blank", field)
	case strings.TrimSpace(s) != s:
		return fmt.Errorf("%s %q: leading or trailing space", field, s)
	case strings.ContainsFunc(s, unicode.IsControl):
		return fmt.Errorf("%s %q: control character (titles and summaries are one line)", field, s)
	case utf8.RuneCountInString(s) > max:
		return fmt.Errorf("%s: %d characters, at most %d", field, utf8.RuneCountInString(s), max)
	}
	return nil
}

// checkVersion checks the form <date>.<n>: YYYY-MM-DD, a real calendar date,
// a dot and decimal digits.
func checkVersion(v string) error {
	m := versionPattern().FindStringSubmatch(v)
	if m == nil {
		return fmt.Errorf("version %q: want YYYY-MM-DD.N, e.g. 2026-11-26.1", v)
	}
	if _, err := time.Parse(time.DateOnly, m[1]); err != nil {
		return fmt.Errorf("version %q: %s is not a calendar date", v, m[1])
	}
	return nil
}

// checkText checks a document's file as read: valid UTF-8, no NUL, not blank.
func checkText(b []byte) error {
	if !utf8.Valid(b) {
		return fmt.Errorf("text: not valid UTF-8 (first bad byte at offset %d)", firstInvalid(b))
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return fmt.Errorf("text: NUL byte at offset %d", i)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("text: empty")
	}
	return nil
}

func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// readLimited reads a regular file of at most max bytes.
func readLimited(fsys fs.FS, name string, max int) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("too large: more than %d bytes", max)
	}
	return b, nil
}
