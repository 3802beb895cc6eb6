// Package legal holds the legal documents a user accepts (CONTRACT.md "Legal
// agreements"): the three required ones ship in the binary as Markdown, and an
// operator replaces or adds documents with --legal-dir. A document's
// content_hash is the lowercase hex SHA-256 of the exact bytes served, which are
// the file's text normalised by Normalize. See docs/decisions/legal.md.
package legal

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// The three documents every deployment has, in the order they are listed.
const (
	BetaTerms     = "beta_terms"
	AcceptableUse = "acceptable_use"
	PrivacyNotice = "privacy_notice"
)

// StatusOperatorApproved is the status of every served document: the operator
// of the deployment serves it as its own (the embedded texts included).
const StatusOperatorApproved = "operator_approved"

// MediaType is the media type of every document's text.
const MediaType = "text/markdown"

// MaxTextBytes bounds a document's text, as read from its file and as served.
const MaxTextBytes = 256 << 10

// Notice is one sentence for a sign-in page.
const Notice = "By continuing you agree to the Beta Terms of Service and the Acceptable Use Policy of this deployment and confirm that you have read its Privacy Notice; the deployment's operator, not the authors of the software, provides the service."

// builtinIDs are listed first, in this order, whatever the operator changes.
var builtinIDs = []string{BetaTerms, AcceptableUse, PrivacyNotice}

// Document is one legal document as served.
type Document struct {
	ID, Title, Summary, Version string
	Required                    bool
	Status                      string // StatusOperatorApproved
	// Text is the served body: CRLF and CR turned into LF, trailing newlines
	// reduced to exactly one (Normalize).
	Text []byte
	// ContentHash is the lowercase hex SHA-256 of Text.
	ContentHash string
}

// TextURL is the relative path that serves the document's text.
func (d Document) TextURL() string { return "/v1/legal/documents/" + d.ID + "/text" }

// Set is an immutable collection of documents in a stable order: beta_terms,
// acceptable_use, privacy_notice first, then the others by id.
type Set struct {
	docs []Document
}

// Documents returns the documents in the set's order. The result, Text
// included, is the caller's to keep or change.
func (s *Set) Documents() []Document {
	out := make([]Document, len(s.docs))
	for i, d := range s.docs {
		out[i] = d.clone()
	}
	return out
}

// Get returns the document with the given id.
func (s *Set) Get(id string) (Document, bool) {
	for _, d := range s.docs {
		if d.ID == id {
			return d.clone(), true
		}
	}
	return Document{}, false
}

// RequiredIDs returns the ids of the required documents, in the set's order.
func (s *Set) RequiredIDs() []string {
	var ids []string
	for _, d := range s.docs {
		if d.Required {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

func (d Document) clone() Document {
	d.Text = bytes.Clone(d.Text)
	return d
}

// Normalize returns b with CRLF and lone CR turned into LF and its trailing
// newlines reduced to exactly one LF (one is added when there is none, so the
// empty text becomes "\n"). Nothing else changes: trailing spaces, tabs and a
// byte order mark stay.
func Normalize(b []byte) []byte {
	out := bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	out = bytes.ReplaceAll(out, []byte("\r"), []byte("\n"))
	out = bytes.TrimRight(out, "\n")
	return append(out, '\n')
}

// newDocument fills in the derived fields from the normalised text.
func newDocument(e entry, text []byte) Document {
	text = Normalize(text)
	sum := sha256.Sum256(text)
	return Document{
		ID:          e.ID,
		Title:       e.Title,
		Summary:     e.Summary,
		Version:     e.Version,
		Required:    *e.Required,
		Status:      StatusOperatorApproved,
		Text:        text,
		ContentHash: hex.EncodeToString(sum[:]),
	}
}

//go:embed documents/manifest.json documents/*.md
var embedded embed.FS

var defaultDocs = sync.OnceValues(func() ([]Document, error) {
	sub, err := fs.Sub(embedded, "documents")
	if err != nil {
		return nil, err
	}
	return loadFS(sub, "embedded documents")
})

// Default returns the documents embedded in the binary. It panics only if they
// are broken, which the package's tests rule out.
func Default() *Set {
	docs, err := defaultDocs()
	if err != nil {
		panic(fmt.Sprintf("legal: embedded documents: %v", err))
	}
	for _, id := range builtinIDs {
		if !slices.ContainsFunc(docs, func(d Document) bool { return d.ID == id }) {
			panic("legal: embedded documents lack " + id)
		}
	}
	return newSet(docs)
}

// Load returns Default() with the documents of dir replacing (same id) or
// adding to the embedded ones. dir holds manifest.json and one <document_id>.md
// per listed document, and nothing else ending in .md; see
// docs/decisions/legal.md for the format and the checks. Errors name the file
// and the field at fault.
func Load(dir string) (*Set, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("legal: --legal-dir: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("legal: --legal-dir %s: not a directory", dir)
	}
	docs, err := loadFS(os.DirFS(dir), dir)
	if err != nil {
		return nil, err
	}
	merged := Default().docs
	for _, d := range docs {
		if i := slices.IndexFunc(merged, func(m Document) bool { return m.ID == d.ID }); i >= 0 {
			merged[i] = d
		} else {
			merged = append(merged, d)
		}
	}
	return newSet(merged), nil
}

// newSet copies docs into a Set in the stable order.
func newSet(docs []Document) *Set {
	out := slices.Clone(docs)
	rank := func(id string) int {
		if i := slices.Index(builtinIDs, id); i >= 0 {
			return i
		}
		return len(builtinIDs)
	}
	slices.SortStableFunc(out, func(a, b Document) int {
		if ra, rb := rank(a.ID), rank(b.ID); ra != rb {
			return ra - rb
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return &Set{docs: out}
}

// where joins a directory label and a file name for error messages.
func where(dir, name string) string { return filepath.Join(dir, name) }
