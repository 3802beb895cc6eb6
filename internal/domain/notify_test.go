package domain

import (
	"slices"
	"testing"
)

func TestNoticeTypesTable(t *testing.T) {
	seen := map[string]bool{}
	for _, nt := range NoticeTypes {
		if seen[nt.Name] {
			t.Errorf("type %s listed twice", nt.Name)
		}
		seen[nt.Name] = true
		if !ValidSeverity(nt.Severity) {
			t.Errorf("%s: severity %q", nt.Name, nt.Severity)
		}
		if len(nt.Channels) == 0 {
			t.Errorf("%s declares no channel", nt.Name)
		}
		if nt.Digest && !nt.Declares(ChannelEmail) {
			t.Errorf("%s: digest without an email channel", nt.Name)
		}
	}
	// SPEC.md "Notification types named": grant.revoked is in_app, email and
	// webhook, severity warning; breaking_change.announce is email, mandatory.
	gr, _ := LookupNoticeType(NoticeGrantRevoked)
	if !slices.Equal(gr.Channels, []string{ChannelInApp, ChannelEmail, ChannelWebhook}) || gr.Severity != SeverityWarning {
		t.Errorf("grant.revoked = %+v", gr)
	}
	bc, _ := LookupNoticeType(NoticeBreakingChange)
	if !bc.Mandatory || !slices.Equal(bc.Channels, []string{ChannelEmail}) {
		t.Errorf("breaking_change.announce = %+v", bc)
	}
	// CONTRACT.md "Approvals": approval.requested is in_app, email and
	// webhook, info, not mandatory, no digest.
	ar, _ := LookupNoticeType(NoticeApprovalRequested)
	if !slices.Equal(ar.Channels, []string{ChannelInApp, ChannelEmail, ChannelWebhook}) || ar.Severity != SeverityInfo || ar.Mandatory || ar.Digest {
		t.Errorf("approval.requested = %+v", ar)
	}
	want := []string{NoticeGrantRevoked, NoticeGrantExpiring24h, NoticeGovernanceProposed, NoticeGovernanceEnacted, NoticeChainRepairRun,
		NoticeApprovalRequested}
	if got := WebhookTypes(); !slices.Equal(got, want) {
		t.Errorf("WebhookTypes = %v, want %v", got, want)
	}
}

func TestCheckPreference(t *testing.T) {
	for _, tc := range []struct {
		p    Preference
		want string
	}{
		{Preference{Type: "grant.revoked", Channel: "email", Enabled: false}, ""},
		{Preference{Type: "grant.revoked", Channel: "email", Enabled: true, Digest: true}, ""},
		{Preference{Type: "grant.revoked", Channel: "in_app", Enabled: true, Digest: true}, PrefDigestUnavailable},
		{Preference{Type: "key.expiring_24h", Channel: "email", Enabled: true, Digest: true}, PrefDigestUnavailable},
		{Preference{Type: "no.such", Channel: "email", Enabled: true}, PrefUnknownType},
		{Preference{Type: "key.created", Channel: "webhook", Enabled: true}, PrefChannelNotDeclared},
		{Preference{Type: "grant.revoked", Channel: "sms", Enabled: true}, PrefChannelNotDeclared},
		{Preference{Type: "breaking_change.announce", Channel: "email", Enabled: false}, PrefMandatory},
		{Preference{Type: "breaking_change.announce", Channel: "email", Enabled: true}, ""},
		{Preference{Type: "breaking_change.announce", Channel: "email", Enabled: true, Digest: true}, PrefDigestUnavailable},
	} {
		if got := CheckPreference(tc.p); got != tc.want {
			t.Errorf("CheckPreference(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

func TestNoticeRows(t *testing.T) {
	gr, _ := LookupNoticeType(NoticeGrantRevoked)
	bc, _ := LookupNoticeType(NoticeBreakingChange)
	off := func(ch string) map[string]Preference {
		return map[string]Preference{ch: {Type: gr.Name, Channel: ch, Enabled: false}}
	}
	for _, tc := range []struct {
		name string
		t    NoticeType
		r    Recipient
		want []NoticeRow
	}{
		{"defaults with email and endpoint", gr, Recipient{HasEmail: true, WebhookSubscribe: true},
			[]NoticeRow{{"in_app", "sent"}, {"email", "queued"}, {"webhook", "queued"}}},
		{"no endpoint: webhook pending", gr, Recipient{HasEmail: true},
			[]NoticeRow{{"in_app", "sent"}, {"email", "queued"}, {"webhook", "pending"}}},
		{"no email: email failed", gr, Recipient{WebhookSubscribe: true},
			[]NoticeRow{{"in_app", "sent"}, {"email", "failed"}, {"webhook", "queued"}}},
		{"email disabled: no row", gr, Recipient{HasEmail: true, Prefs: off("email")},
			[]NoticeRow{{"in_app", "sent"}, {"webhook", "pending"}}},
		{"digest", gr, Recipient{HasEmail: true, Prefs: map[string]Preference{"email": {Enabled: true, Digest: true}}},
			[]NoticeRow{{"in_app", "sent"}, {"email", "suppressed_digest"}, {"webhook", "pending"}}},
		{"mandatory ignores preferences", bc, Recipient{HasEmail: true, Prefs: map[string]Preference{"email": {Enabled: false, Digest: true}}},
			[]NoticeRow{{"email", "queued"}}},
		{"mandatory without email", bc, Recipient{}, []NoticeRow{{"email", "failed"}}},
	} {
		if got := NoticeRows(tc.t, tc.r); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestInvalidWebhookTypes(t *testing.T) {
	got := InvalidWebhookTypes([]string{"grant.revoked", "key.created", "nope", "chain.repair_run"})
	if !slices.Equal(got, []string{"key.created", "nope"}) {
		t.Errorf("got %v", got)
	}
}
