package domain

import (
	"strings"
	"unicode/utf8"

	"github.com/auditchain/auditchain/pkg/api"
)

// The text rule (docs/decisions/strict-input.md): every path segment, query
// parameter and JSON string the service reads is valid UTF-8 without U+0000.
// PostgreSQL's text can hold neither (SQLSTATE 22021), SQLite holds both,
// and encoding/json silently rewrites invalid UTF-8 to U+FFFD: refusing them
// at the edge, before any store is asked, makes the answer the same on both
// stores and keeps every stored string equal to what was sent.

// TextRuleMessage explains a refusal under the text rule.
const TextRuleMessage = "must be valid UTF-8 text without U+0000 (NUL)"

// ValidText reports whether s obeys the text rule.
func ValidText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// Caps on what clients send, where no rule of the spec's gives one
// (docs/decisions/strict-input.md "Caps"). Request types name them in a
// field's `max` tag (and `each`, for the text items of a list); the body
// reader refuses what is over, naming the field.
const (
	MaxNameBytes   = 256                     // a name or id: sub-agent, tool, machine, type, email, hash, ...
	MaxReasonBytes = 1024                    // a transition's reason
	MaxNoteBytes   = 4096                    // free text: a proposal's note, a test notification's body
	MaxURLBytes    = 2048                    // a webhook's URL
	MaxArgsBytes   = api.MaxApprovalArgsText // a held call's arguments' text (api.MaxApprovalArgsText)
	MaxListItems   = 256                     // a list of names
)

// Cap is the cap a `max` or `each` tag names (0: no such cap).
func Cap(name string) int {
	switch name {
	case "name":
		return MaxNameBytes
	case "reason":
		return MaxReasonBytes
	case "note":
		return MaxNoteBytes
	case "url":
		return MaxURLBytes
	case "args":
		return MaxArgsBytes
	case "list":
		return MaxListItems
	}
	return 0
}
