package legal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// pinned are the embedded documents' versions and content hashes. Changing an
// embedded text without a new version would silently change what earlier
// acceptances of that version refer to: give the document a new version in
// documents/manifest.json, then update its line here.
var pinned = map[string]struct{ version, hash string }{
	BetaTerms:     {"2026-11-26.1", "ededeff1c67611667252d283841a274bf49666a79da1f4adc93d4fdd50e47c0c"},
	AcceptableUse: {"2026-11-26.1", "b71b1aee971b7b36b742c163b74073bc34a9cab878fdaf341ecdcb65c2c16f3b"},
	PrivacyNotice: {"2026-11-26.1", "d91e53f2ddab2ae76d5ede3c42650f49c42c7479b94f506ef4c3ebdfef363e38"},
}

func TestDefault(t *testing.T) {
	s := Default()
	if got, want := s.RequiredIDs(), []string{BetaTerms, AcceptableUse, PrivacyNotice}; !slices.Equal(got, want) {
		t.Fatalf("RequiredIDs = %v, want %v", got, want)
	}
	docs := s.Documents()
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3", len(docs))
	}
	version := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}\.\d+$`)
	for _, d := range docs {
		t.Run(d.ID, func(t *testing.T) {
			if d.Title == "" || d.Summary == "" {
				t.Errorf("title %q, summary %q: both must be set", d.Title, d.Summary)
			}
			if !version.MatchString(d.Version) {
				t.Errorf("version %q", d.Version)
			}
			if !d.Required || d.Status != StatusOperatorApproved {
				t.Errorf("required %v, status %q", d.Required, d.Status)
			}
			if got, want := d.TextURL(), "/v1/legal/documents/"+d.ID+"/text"; got != want {
				t.Errorf("TextURL = %q, want %q", got, want)
			}
			checkServed(t, d)
			if !bytes.HasPrefix(d.Text, []byte("# "+d.Title+"\n")) {
				t.Errorf("text does not open with the heading %q", "# "+d.Title)
			}
			if n := len(strings.Fields(string(d.Text))); n < 300 || n > 1200 {
				t.Errorf("%d words, want a real text of a few hundred to about a thousand", n)
			}
			for _, bad := range []string{"TODO", "TBD", "lorem", "placeholder", "XXX"} {
				if bytes.Contains(bytes.ToLower(d.Text), bytes.ToLower([]byte(bad))) {
					t.Errorf("text contains %q", bad)
				}
			}
			p := pinned[d.ID]
			if d.Version != p.version || d.ContentHash != p.hash {
				t.Errorf("version %s content_hash %s, pinned %s %s: an embedded text changed; give it a new version in documents/manifest.json and update pinned",
					d.Version, d.ContentHash, p.version, p.hash)
			}
			got, ok := s.Get(d.ID)
			if !ok || got.ContentHash != d.ContentHash || !bytes.Equal(got.Text, d.Text) {
				t.Errorf("Get(%q) = %v, %v", d.ID, got.ID, ok)
			}
		})
	}
	if _, ok := s.Get("nope"); ok {
		t.Error(`Get("nope") found a document`)
	}
}

// checkServed checks the invariants of a served text.
func checkServed(t *testing.T, d Document) {
	t.Helper()
	sum := sha256.Sum256(d.Text)
	if d.ContentHash != hex.EncodeToString(sum[:]) {
		t.Errorf("%s: content_hash %s is not SHA-256 of Text", d.ID, d.ContentHash)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(d.ContentHash) {
		t.Errorf("%s: content_hash %q is not lowercase hex", d.ID, d.ContentHash)
	}
	if !bytes.HasSuffix(d.Text, []byte("\n")) || bytes.HasSuffix(d.Text, []byte("\n\n")) {
		t.Errorf("%s: text does not end with exactly one LF", d.ID)
	}
	if bytes.ContainsRune(d.Text, '\r') {
		t.Errorf("%s: text holds a CR", d.ID)
	}
	if !utf8.Valid(d.Text) {
		t.Errorf("%s: text is not UTF-8", d.ID)
	}
}

// The texts the set hands out are copies: changing them changes nothing.
func TestDocumentsAreCopies(t *testing.T) {
	s := Default()
	d, _ := s.Get(BetaTerms)
	d.Text[0] = 'X'
	s.Documents()[0].Text[0] = 'X'
	again, _ := Default().Get(BetaTerms)
	checkServed(t, again)
	if again.Text[0] != '#' {
		t.Fatal("a caller's change reached the set")
	}
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "\n"},
		{"only newlines", "\n\n\r\n\r", "\n"},
		{"no final newline", "a\nb", "a\nb\n"},
		{"one final newline", "a\nb\n", "a\nb\n"},
		{"several final newlines", "a\nb\n\n\n", "a\nb\n"},
		{"CRLF", "a\r\nb\r\n", "a\nb\n"},
		{"CRLF final several", "a\r\n\r\n\r\n", "a\n"},
		{"CR", "a\rb\r", "a\nb\n"},
		{"CR before CRLF", "a\r\r\nb", "a\n\nb\n"},
		{"inner blank lines kept", "a\r\n\r\nb", "a\n\nb\n"},
		{"trailing spaces kept", "a  \n\t\n", "a  \n\t\n"},
		{"LF CR", "a\n\rb", "a\n\nb\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(Normalize([]byte(tc.in))); got != tc.want {
				t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if got := string(Normalize([]byte(tc.want))); got != tc.want {
				t.Errorf("not idempotent: Normalize(%q) = %q", tc.want, got)
			}
		})
	}
	in := []byte("a\r\nb")
	Normalize(in)
	if string(in) != "a\r\nb" {
		t.Errorf("Normalize changed its argument to %q", in)
	}
}

// man is a manifest entry for tests.
type man struct {
	ID       string `json:"document_id"`
	Title    string `json:"title"`
	Summary  string `json:"summary"`
	Version  string `json:"version"`
	Required bool   `json:"required"`
}

// writeDir writes a --legal-dir holding the given manifest entries and files.
func writeDir(t *testing.T, entries []man, files map[string]string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"documents": entries})
	if err != nil {
		t.Fatal(err)
	}
	return writeRaw(t, string(b), files)
}

func writeRaw(t *testing.T, manifest string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadReplacesAndAdds(t *testing.T) {
	def := Default()
	oldTerms, _ := def.Get(BetaTerms)
	dir := writeDir(t, []man{
		{ID: BetaTerms, Title: "Beta Terms", Summary: "Our own terms.", Version: "2026-12-01.2", Required: true},
		{ID: "zz_cookies", Title: "Cookies", Summary: "Which cookies.", Version: "2026-12-01.1", Required: true},
		{ID: "aa_dpa", Title: "Data Processing Addendum", Summary: "For businesses.", Version: "2026-12-01.1", Required: false},
	}, map[string]string{
		"beta_terms.md":     "# Beta Terms\r\n\r\nNew terms.\r\n\r\n\r\n",
		"zz_cookies.md":     "# Cookies\n\nNone.",
		"aa_dpa.md":         "# DPA\n",
		"notes.txt":         "not a document; ignored",
		"manifest.json~":    "an editor's backup; ignored",
		"beta_terms.md.bak": "ignored too",
	})
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range s.Documents() {
		ids = append(ids, d.ID)
		checkServed(t, d)
	}
	if want := []string{BetaTerms, AcceptableUse, PrivacyNotice, "aa_dpa", "zz_cookies"}; !slices.Equal(ids, want) {
		t.Fatalf("order %v, want %v", ids, want)
	}
	if want := []string{BetaTerms, AcceptableUse, PrivacyNotice, "zz_cookies"}; !slices.Equal(s.RequiredIDs(), want) {
		t.Errorf("RequiredIDs = %v, want %v", s.RequiredIDs(), want)
	}
	terms, _ := s.Get(BetaTerms)
	if terms.Version != "2026-12-01.2" || terms.Title != "Beta Terms" || terms.Summary != "Our own terms." {
		t.Errorf("beta_terms not replaced: %+v", terms)
	}
	if string(terms.Text) != "# Beta Terms\n\nNew terms.\n" {
		t.Errorf("beta_terms text %q", terms.Text)
	}
	if terms.ContentHash == oldTerms.ContentHash {
		t.Error("a new text kept the old content_hash")
	}
	for _, id := range []string{AcceptableUse, PrivacyNotice} {
		a, _ := def.Get(id)
		b, _ := s.Get(id)
		if a.ContentHash != b.ContentHash || a.Version != b.Version || a.Title != b.Title {
			t.Errorf("%s changed though the directory does not hold it", id)
		}
	}
	if c, _ := s.Get("zz_cookies"); string(c.Text) != "# Cookies\n\nNone.\n" {
		t.Errorf("zz_cookies text %q", c.Text)
	}
	// Default is untouched by Load.
	if d, _ := Default().Get(BetaTerms); d.ContentHash != oldTerms.ContentHash {
		t.Error("Load changed Default()")
	}
}

// An operator may mark a built-in document not required; it keeps its place.
func TestLoadNotRequired(t *testing.T) {
	dir := writeDir(t, []man{
		{ID: AcceptableUse, Title: "Acceptable Use", Summary: "Optional here.", Version: "2026-12-01.1", Required: false},
	}, map[string]string{"acceptable_use.md": "# Acceptable Use\n"})
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{BetaTerms, PrivacyNotice}; !slices.Equal(s.RequiredIDs(), want) {
		t.Errorf("RequiredIDs = %v, want %v", s.RequiredIDs(), want)
	}
	if d := s.Documents(); d[1].ID != AcceptableUse || d[1].Required {
		t.Errorf("second document %s required %v", d[1].ID, d[1].Required)
	}
}

// The same text under the same version gives the same hash whatever its line
// endings.
func TestLoadSameTextSameHash(t *testing.T) {
	def, _ := Default().Get(PrivacyNotice)
	crlf := strings.ReplaceAll(string(def.Text), "\n", "\r\n") + "\r\n"
	dir := writeDir(t, []man{{ID: PrivacyNotice, Title: def.Title, Summary: def.Summary, Version: def.Version, Required: true}},
		map[string]string{"privacy_notice.md": crlf})
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(PrivacyNotice); got.ContentHash != def.ContentHash {
		t.Errorf("content_hash %s, want %s", got.ContentHash, def.ContentHash)
	}
}

func TestLoadRefuses(t *testing.T) {
	ok := man{ID: "extra", Title: "Extra", Summary: "An extra document.", Version: "2026-12-01.1", Required: true}
	with := func(f func(*man)) []man { m := ok; f(&m); return []man{m} }
	text := map[string]string{"extra.md": "# Extra\n"}
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
		want []string // substrings of the error
	}{
		{"no manifest", func(t *testing.T) string {
			d := t.TempDir()
			os.WriteFile(filepath.Join(d, "extra.md"), []byte("x"), 0o644)
			return d
		}, []string{"manifest.json", "missing"}},
		{"no directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "absent") }, []string{"--legal-dir"}},
		{"a file, not a directory", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "f")
			os.WriteFile(p, nil, 0o644)
			return p
		}, []string{"not a directory"}},
		{"invalid JSON", func(t *testing.T) string { return writeRaw(t, `{"documents": [`, text) }, []string{"manifest.json", "invalid JSON"}},
		{"trailing data", func(t *testing.T) string {
			return writeRaw(t, `{"documents": [{"document_id":"extra","title":"E","summary":"S","version":"2026-12-01.1","required":true}]} {}`, text)
		}, []string{"manifest.json", "after the manifest"}},
		{"unknown field", func(t *testing.T) string {
			return writeRaw(t, `{"documents": [{"document_id":"extra","title":"E","summary":"S","version":"2026-12-01.1","required":true,"status":"x"}]}`, text)
		}, []string{"manifest.json", `"status"`}},
		{"required missing", func(t *testing.T) string {
			return writeRaw(t, `{"documents": [{"document_id":"extra","title":"E","summary":"S","version":"2026-12-01.1"}]}`, text)
		}, []string{"manifest.json", "documents[0]", "required: missing"}},
		{"required not a boolean", func(t *testing.T) string {
			return writeRaw(t, `{"documents": [{"document_id":"extra","title":"E","summary":"S","version":"2026-12-01.1","required":"yes"}]}`, text)
		}, []string{"manifest.json", "required"}},
		{"documents missing", func(t *testing.T) string { return writeRaw(t, `{}`, nil) }, []string{"manifest.json", `"documents": missing`}},
		{"documents empty", func(t *testing.T) string { return writeRaw(t, `{"documents": []}`, nil) }, []string{"manifest.json", `"documents": empty`}},
		{"manifest not UTF-8", func(t *testing.T) string {
			return writeRaw(t, "{\"documents\": [{\"document_id\":\"extra\",\"title\":\"E\xff\",\"summary\":\"S\",\"version\":\"2026-12-01.1\",\"required\":true}]}", text)
		}, []string{"manifest.json", "UTF-8"}},
		{"missing md", func(t *testing.T) string { return writeDir(t, []man{ok}, nil) }, []string{"extra.md", "missing", `"extra"`}},
		{"unlisted md", func(t *testing.T) string {
			return writeDir(t, []man{ok}, map[string]string{"extra.md": "# Extra\n", "other.md": "# Other\n"})
		}, []string{"other.md", "not listed"}},
		{"unlisted md, other case", func(t *testing.T) string {
			return writeDir(t, []man{ok}, map[string]string{"extra.md": "# Extra\n", "Other.MD": "# Other\n"})
		}, []string{"Other.MD", "not listed"}},
		{"md is a directory", func(t *testing.T) string {
			d := writeDir(t, []man{ok}, nil)
			os.Mkdir(filepath.Join(d, "extra.md"), 0o755)
			return d
		}, []string{"extra.md", "not a regular file"}},
		{"bad id: upper case", func(t *testing.T) string {
			return writeDir(t, with(func(m *man) { m.ID = "Extra" }), map[string]string{"Extra.md": "x"})
		}, []string{"manifest.json", "documents[0]", `document_id "Extra"`}},
		{"bad id: dash", func(t *testing.T) string { return writeDir(t, with(func(m *man) { m.ID = "ex-tra" }), nil) }, []string{"document_id \"ex-tra\""}},
		{"bad id: path", func(t *testing.T) string { return writeDir(t, with(func(m *man) { m.ID = "../extra" }), nil) }, []string{"document_id \"../extra\""}},
		{"bad id: empty", func(t *testing.T) string { return writeDir(t, with(func(m *man) { m.ID = "" }), nil) }, []string{`document_id ""`}},
		{"bad id: too long", func(t *testing.T) string {
			return writeDir(t, with(func(m *man) { m.ID = strings.Repeat("a", 65) }), nil)
		}, []string{"document_id", "1 to 64"}},
		{"bad version: no n", func(t *testing.T) string { return writeDir(t, with(func(m *man) { m.Version = "2026-12-01" }), text) }, []string{"documents[0]", `version "2026-12-01"`}},
		{"bad version: short date", func(t *testing.T) string { return writeDir(t, with(func(m *man) { m.Version = "2026-1-1.1" }), text) }, []string{`version "2026-1-1.1"`, "YYYY-MM-DD.N"}},
		{"bad version: not a date", func(t *testing.T) string { return writeDir(t, with(func(m *man) { m.Version = "2026-02-30.1" }), text) }, []string{`version "2026-02-30.1"`, "calendar date"}},
		{"bad version: letters", func(t *testing.T) string { return writeDir(t, with(func(m *man) { m.Version = "v1" }), text) }, []string{`version "v1"`}},
		{"no title", func(t *testing.T) string { return writeDir(t, with(func(m *man) { m.Title = "  " }), text) }, []string{"documents[0]", "title", "blank"}},
		{"no summary", func(t *testing.T) string { return writeDir(t, with(func(m *man) { m.Summary = "" }), text) }, []string{"documents[0]", "summary", "blank"}},
		{"title on two lines", func(t *testing.T) string { return writeDir(t, with(func(m *man) { m.Title = "A\nB" }), text) }, []string{"title", "control character"}},
		{"duplicate id", func(t *testing.T) string { return writeDir(t, []man{ok, ok}, text) }, []string{"manifest.json", "documents[1]", `"extra"`, "duplicate", "documents[0]"}},
		{"bad UTF-8", func(t *testing.T) string {
			return writeDir(t, []man{ok}, map[string]string{"extra.md": "# Extra\n\xc3\x28\n"})
		}, []string{"extra.md", "UTF-8", "offset 8"}},
		{"NUL", func(t *testing.T) string {
			return writeDir(t, []man{ok}, map[string]string{"extra.md": "# Extra\x00\n"})
		}, []string{"extra.md", "NUL", "offset 7"}},
		{"empty text", func(t *testing.T) string { return writeDir(t, []man{ok}, map[string]string{"extra.md": " \r\n\n"}) }, []string{"extra.md", "empty"}},
		{"too large", func(t *testing.T) string {
			return writeDir(t, []man{ok}, map[string]string{"extra.md": strings.Repeat("a", MaxTextBytes+1)})
		}, []string{"extra.md", "too large", "262144"}},
		{"too large once normalised", func(t *testing.T) string {
			return writeDir(t, []man{ok}, map[string]string{"extra.md": strings.Repeat("a", MaxTextBytes)})
		}, []string{"extra.md", "normalised", "262144"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load(tc.dir(t))
			if err == nil {
				t.Fatalf("Load succeeded with %v", s.Documents())
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// Exactly the largest text is accepted.
func TestLoadLargest(t *testing.T) {
	body := strings.Repeat("a", MaxTextBytes-1) + "\n"
	dir := writeDir(t, []man{{ID: "big", Title: "Big", Summary: "Big.", Version: "2026-12-01.1", Required: false}},
		map[string]string{"big.md": body})
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Get("big"); len(d.Text) != MaxTextBytes {
		t.Errorf("%d bytes", len(d.Text))
	}
}

// Order is stable: the built-in three first in their order, the rest by id,
// whatever the manifest's order.
func TestStableOrder(t *testing.T) {
	entries := []man{
		{ID: "m", Title: "M", Summary: "M.", Version: "2026-12-01.1", Required: true},
		{ID: PrivacyNotice, Title: "P", Summary: "P.", Version: "2026-12-01.1", Required: true},
		{ID: "a", Title: "A", Summary: "A.", Version: "2026-12-01.1", Required: false},
		{ID: "z9", Title: "Z", Summary: "Z.", Version: "2026-12-01.1", Required: true},
		{ID: BetaTerms, Title: "B", Summary: "B.", Version: "2026-12-01.1", Required: true},
	}
	files := map[string]string{}
	for _, e := range entries {
		files[e.ID+".md"] = "# " + e.Title + "\n"
	}
	want := []string{BetaTerms, AcceptableUse, PrivacyNotice, "a", "m", "z9"}
	for range 5 {
		slices.Reverse(entries)
		s, err := Load(writeDir(t, entries, files))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range s.Documents() {
			ids = append(ids, d.ID)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("order %v, want %v", ids, want)
		}
		if got := s.RequiredIDs(); !slices.Equal(got, []string{BetaTerms, AcceptableUse, PrivacyNotice, "m", "z9"}) {
			t.Fatalf("RequiredIDs %v", got)
		}
	}
}

func TestNotice(t *testing.T) {
	if strings.Count(Notice, ". ") != 0 || !strings.HasSuffix(Notice, ".") || strings.Contains(Notice, "\n") {
		t.Errorf("Notice is not one sentence: %q", Notice)
	}
	for _, d := range Default().Documents() {
		if !strings.Contains(Notice, d.Title) {
			t.Errorf("Notice does not name %q", d.Title)
		}
	}
}
