package domain

// Notice types and their rules (CONTRACT.md "Notifications"): which channels
// a type declares, its severity, whether preferences may silence it, whether
// its email may wait for the digest, and what a notice's row starts as on
// each channel. Pure: the app reads the account's preferences and endpoints
// and asks these rules what to write.

import "slices"

// Channels a notice goes out on. A notice on two channels is two rows.
const (
	ChannelInApp   = "in_app"
	ChannelEmail   = "email"
	ChannelWebhook = "webhook"
)

// Severities; ?severity= filters by exactly one of these.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// Delivery statuses of a notification row (SPEC.md "Notification
// delivery_status").
const (
	DeliverySent             = "sent"
	DeliveryPending          = "pending"
	DeliveryQueued           = "queued"
	DeliveryFailed           = "failed"
	DeliverySuppressedDigest = "suppressed_digest"
)

// Notice type names (SPEC.md "Notification types named", CONTRACT.md's table).
const (
	NoticeGrantRevoked       = "grant.revoked"
	NoticeGrantExpiring24h   = "grant.expiring_24h"
	NoticeKeyExpiring7d      = "key.expiring_7d"
	NoticeKeyExpiring24h     = "key.expiring_24h"
	NoticeKeyCreated         = "key.created"
	NoticeGovernanceProposed = "governance.proposed"
	NoticeGovernanceEnacted  = "governance.enacted"
	NoticeRateLimitHit       = "rate.limit_hit"
	NoticeChainRepairRun     = "chain.repair_run"
	NoticeBreakingChange     = "breaking_change.announce"
	// Team changes, to the team's members (docs/decisions/teams.md).
	NoticeTeamMemberInvited = "team.member_invited"
	NoticeTeamMemberJoined  = "team.member_joined"
	NoticeTeamMemberRemoved = "team.member_removed"
	// A call waits for a person's approval (CONTRACT.md "Approvals").
	NoticeApprovalRequested = "approval.requested"
)

// NoticeType is one row of CONTRACT.md's table of notice types.
type NoticeType struct {
	Name     string
	Channels []string // the only channels a row or a preference may name
	Severity string
	// Mandatory types ignore preferences: every declared channel, always.
	Mandatory bool
	// Digest: the type's email may be held for the daily digest
	// (suppressed_digest) when the account's preference asks so.
	Digest bool
	// EmittedBy says what writes it, for documentation.
	EmittedBy string
	// Title is the notice in a few words: its email's subject.
	Title string
}

var allChannels = []string{ChannelInApp, ChannelEmail, ChannelWebhook}
var noWebhook = []string{ChannelInApp, ChannelEmail}

// NoticeTypes is CONTRACT.md's table, in its order, then the team changes
// (docs/decisions/teams.md), which CONTRACT.md's table predates, then
// approval.requested (CONTRACT.md "Approvals").
var NoticeTypes = []NoticeType{
	{NoticeGrantRevoked, allChannels, SeverityWarning, false, true, "a revoke that revokes", "Grant revoked"},
	{NoticeGrantExpiring24h, allChannels, SeverityWarning, false, true, "grant-expiry job", "Grant expires within 24 hours"},
	{NoticeKeyExpiring7d, noWebhook, SeverityWarning, false, true, "key-expiry job", "API key expires within 7 days"},
	{NoticeKeyExpiring24h, noWebhook, SeverityCritical, false, false, "key-expiry job", "API key expires within 24 hours"},
	{NoticeKeyCreated, noWebhook, SeverityInfo, false, true, "a key is created (any route)", "API key created"},
	{NoticeGovernanceProposed, allChannels, SeverityInfo, false, true, "a proposal is created", "Governance proposal created"},
	{NoticeGovernanceEnacted, allChannels, SeverityWarning, false, true, "a proposal is enacted", "Governance proposal enacted"},
	{NoticeRateLimitHit, noWebhook, SeverityInfo, false, true, "a 429 rate_limit_exceeded or daily_quota_exceeded, at most once per account, type and hour", "Rate limit or daily quota reached"},
	{NoticeChainRepairRun, allChannels, SeverityWarning, false, true, "a heal run that wrote repairs", "Chain repairs written"},
	{NoticeBreakingChange, []string{ChannelEmail}, SeverityCritical, true, false, "auditchain admin announce", "Announcement"},
	{NoticeTeamMemberInvited, noWebhook, SeverityInfo, false, true, "an owner invites an email to a team", "Team invitation sent"},
	{NoticeTeamMemberJoined, noWebhook, SeverityInfo, false, true, "an invitation is accepted", "Team member joined"},
	{NoticeTeamMemberRemoved, noWebhook, SeverityWarning, false, true, "an owner removes a member or withdraws an invitation, or a member leaves", "Team member removed"},
	{NoticeApprovalRequested, allChannels, SeverityInfo, false, false, "a tool call a rule holds for approval", "Approval requested"},
}

// LookupNoticeType returns the type named name.
func LookupNoticeType(name string) (NoticeType, bool) {
	for _, t := range NoticeTypes {
		if t.Name == name {
			return t, true
		}
	}
	return NoticeType{}, false
}

// Declares reports whether the type goes out on channel.
func (t NoticeType) Declares(channel string) bool { return slices.Contains(t.Channels, channel) }

// WebhookTypes lists the types with a webhook channel: what an endpoint
// registered without types subscribes to.
func WebhookTypes() []string {
	var out []string
	for _, t := range NoticeTypes {
		if t.Declares(ChannelWebhook) {
			out = append(out, t.Name)
		}
	}
	return out
}

// ValidSeverity reports whether s is one of the three severities.
func ValidSeverity(s string) bool {
	return s == SeverityInfo || s == SeverityWarning || s == SeverityCritical
}

// Preference is one (type, channel) row of an account's preferences.
type Preference struct {
	Type    string
	Channel string
	Enabled bool
	Digest  bool
}

// Reasons a preference row is rejected (CONTRACT.md "Notifications").
const (
	PrefUnknownType        = "unknown_type"
	PrefChannelNotDeclared = "channel_not_declared"
	PrefMandatory          = "mandatory_type_cannot_be_disabled"
	PrefDigestUnavailable  = "digest_not_available"
)

// CheckPreference returns why p cannot be stored, or "" when it can. Digest
// applies to the email channel of a type whose table row has digest: asking
// for it anywhere else is digest_not_available.
func CheckPreference(p Preference) string {
	t, ok := LookupNoticeType(p.Type)
	switch {
	case !ok:
		return PrefUnknownType
	case !t.Declares(p.Channel):
		return PrefChannelNotDeclared
	case t.Mandatory && !p.Enabled:
		return PrefMandatory
	case p.Digest && (!t.Digest || p.Channel != ChannelEmail):
		return PrefDigestUnavailable
	}
	return ""
}

// DefaultPreference is the row an account has until it changes it.
func DefaultPreference(typ, channel string) Preference {
	return Preference{Type: typ, Channel: channel, Enabled: true}
}

// NoticeRow is one row a notice writes: its channel and the status it starts in.
type NoticeRow struct {
	Channel string
	Status  string
}

// Recipient is what decides a notice's rows for one account: its stored
// preferences for the type (by channel; absent means the default), whether
// it has an email, and whether one of its endpoints subscribes to the type.
type Recipient struct {
	Prefs            map[string]Preference
	HasEmail         bool
	WebhookSubscribe bool
}

// NoticeRows decides the rows a notice of type t writes for r (CONTRACT.md
// "Notifications"): one per declared channel the preferences enable (all of
// them for a mandatory type); in_app is sent at once; email is queued for
// the mailer, held for the digest when the preference asks so, or failed
// for an account without email; webhook is queued when an endpoint
// subscribes and pending when none does.
func NoticeRows(t NoticeType, r Recipient) []NoticeRow {
	rows := make([]NoticeRow, 0, len(t.Channels))
	for _, ch := range t.Channels {
		p, set := r.Prefs[ch]
		if !set {
			p = DefaultPreference(t.Name, ch)
		}
		if !t.Mandatory && !p.Enabled {
			continue
		}
		status := DeliveryQueued
		switch ch {
		case ChannelInApp:
			status = DeliverySent
		case ChannelEmail:
			switch {
			case !r.HasEmail:
				status = DeliveryFailed
			case p.Digest && t.Digest && !t.Mandatory:
				status = DeliverySuppressedDigest
			}
		case ChannelWebhook:
			if !r.WebhookSubscribe {
				status = DeliveryPending
			}
		}
		rows = append(rows, NoticeRow{Channel: ch, Status: status})
	}
	return rows
}

// InvalidWebhookTypes returns the types not declaring a webhook channel
// (unknown ones included): an endpoint may subscribe only to the others.
func InvalidWebhookTypes(types []string) []string {
	var bad []string
	for _, name := range types {
		if t, ok := LookupNoticeType(name); !ok || !t.Declares(ChannelWebhook) {
			bad = append(bad, name)
		}
	}
	return bad
}

// NoticeSubjectLine is the email subject of a notice of type t.
func NoticeSubjectLine(t NoticeType) string { return "[auditchain] " + t.Title }
