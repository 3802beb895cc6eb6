package legal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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
