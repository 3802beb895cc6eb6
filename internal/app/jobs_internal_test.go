package app

import (
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
)

// The grant-expiry job marshals its payloads from a struct; they must be
// byte for byte what every other notice's payload (a map) would be, names
// that JSON escapes included.
func TestExpiringPayloadIsTheNoticePayload(t *testing.T) {
	nt, _ := domain.LookupNoticeType(domain.NoticeGrantExpiring24h)
	exp := time.Date(2026, 11, 28, 1, 2, 3, 456789000, time.UTC)
	for _, sub := range []string{"collector", `a<b>&"c"\d`, "ünïcødé\u2028", ""} {
		g := store.ExpiringGrant{UserID: "u", GrantID: "g-1", Subagent: sub, ExpiresAt: exp}
		want, err := Notice{Type: nt.Name, Subject: map[string]any{"grant_id": g.GrantID, "subagent": g.Subagent,
			"expires_at": domain.FormatTimestamp(g.ExpiresAt)}}.payload(nt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := expiringNotice(nt, g, "g-1@x")
		if err != nil {
			t.Fatal(err)
		}
		if got.encoded != want || got.DedupKey != "g-1@x" || got.Type != nt.Name {
			t.Errorf("subagent %q: %+v, want payload %s", sub, got, want)
		}
	}
}
