package domain

import (
	"strings"
	"testing"
)

// An address the service mails is exactly one plain local@domain whose
// domain is a DNS host name; anything else is refused, however net/mail
// would read it.
func TestNormalizeEmail(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "": refused
	}{
		{"a@example.com", "a@example.com"},
		{"First.Last@Example.COM", "first.last@example.com"},
		{"a+tag@mail.example.co.uk", "a+tag@mail.example.co.uk"},
		{"o'brien_x-y{z}@example.com", "o'brien_x-y{z}@example.com"},
		{"a@xn--bcher-kva.example", "a@xn--bcher-kva.example"},
		{"a@a-b.c1", "a@a-b.c1"},
		{strings.Repeat("l", 64) + "@example.com", strings.Repeat("l", 64) + "@example.com"},

		// Domain literals and addresses that are not DNS names.
		{"a@[127.0.0.1]", ""},
		{"a@[IPv6:::1]", ""},
		{"a@127.0.0.1", ""},
		{"a@10.1.2.3", ""},
		{"a@localhost", ""},
		{"a@example.com.", ""},
		{"a@.example.com", ""},
		{"a@example..com", ""},
		{"a@-example.com", ""},
		{"a@example-.com", ""},
		{"a@exa_mple.com", ""},
		{"a@example.c-m-", ""},
		{"a@" + strings.Repeat("d", 64) + ".com", ""},
		{"a@bücher.example", ""},
		// Display names, comments, groups, several addresses, routes.
		{"Alice <a@example.com>", ""},
		{"<a@example.com>", ""},
		{"a@example.com (Alice)", ""},
		{"(c)a@example.com", ""},
		{"a(c)@example.com", ""},
		{"a@example.com, b@example.com", ""},
		{"a@example.com,b@example.com", ""},
		{"group: a@example.com;", ""},
		{"<@relay.example:a@example.com>", ""},
		// Local parts that are not a plain dot-atom.
		{`"a b"@example.com`, ""},
		{`"a"@example.com`, ""},
		{".a@example.com", ""},
		{"a.@example.com", ""},
		{"a..b@example.com", ""},
		{"a b@example.com", ""},
		{"ä@example.com", ""},
		{"a\\b@example.com", ""},
		{strings.Repeat("l", 65) + "@example.com", ""},
		// Not an address at all, or carrying control characters.
		{"", ""},
		{"a", ""},
		{"@example.com", ""},
		{"a@", ""},
		{"a@b@example.com", ""},
		{"a@example.com\r\nBcc: b@example.com", ""},
		{"a@example.com\x00", ""},
		{" a@example.com", ""},
		{"a@example.com ", ""},
		{"a@" + strings.Repeat(strings.Repeat("d", 60)+".", 5) + "com", ""}, // a domain over 253 octets
	} {
		got, ok := NormalizeEmail(tc.in)
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}
