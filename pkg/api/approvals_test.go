package api_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/auditchain/auditchain/pkg/api"
)

// TestCutArgsText: what a surface sends as approval_args_text obeys the
// service's text rule and cap whatever the input: whole when short, cut at
// a character boundary when long, NUL and invalid UTF-8 never sent.
func TestCutArgsText(t *testing.T) {
	long := strings.Repeat("é", api.MaxApprovalArgsText) // 2 bytes each
	for _, tc := range []struct {
		name, in string
		wantLen  int
	}{
		{"short", `{"a":1}`, 7},
		{"NUL dropped", "a\x00b", 2},
		{"invalid UTF-8 replaced", "a\xffb", 5},
		{"cut on a character", "x" + long, api.MaxApprovalArgsText - 1},
	} {
		got := api.CutArgsText([]byte(tc.in))
		if len(got) != tc.wantLen || !utf8.ValidString(got) || strings.ContainsRune(got, 0) || len(got) > api.MaxApprovalArgsText {
			t.Errorf("%s: %d bytes, valid %v, want %d", tc.name, len(got), utf8.ValidString(got), tc.wantLen)
		}
	}
}
