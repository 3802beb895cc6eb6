package httpapi

import "github.com/auditchain/auditchain/internal/domain"

// accessKind is how a route authenticates its caller.
type accessKind int

const (
	accessPublic   accessKind = iota // no credential
	accessScope                      // X-API-Key holding scope (unscoped keys hold all)
	accessAny                        // any valid credential, no capability
	accessUnscoped                   // an unscoped key only (key management)
	accessAdmin                      // scope plus the administrator flag
	accessCron                       // X-Cron-Secret, no key
	accessSession                    // a signed-in session's cookie, no key
)

type access struct {
	kind  accessKind
	scope domain.Scope
	// also, when set, is a second scope an accessScope route needs: a
	// route that does the work of two capabilities (POST /v1/tool-calls
	// meters a grant and appends an event) needs both.
	also domain.Scope
	// feature, when set, names the serve flag that turns the route on:
	// while it is off the route answers 404 feature_disabled to every
	// caller, before any credential is read (SPEC.md "Teams").
	feature string
	// agent marks the MCP route: the credential is an API key, as
	// X-API-Key or a bearer token (CONTRACT.md "Agent surfaces"), never
	// the session cookie; and the route's own request is not metered,
	// since each tool call it makes is a metered request of its own.
	agent bool
	// person marks a route that is a signed-in person's act (SPEC.md: POST
	// /v1/legal/accept is for a signed-in caller). Any credential passes
	// the access check; the handler refuses an API key with 403
	// session_required after the account's own refusal, 400
	// account_has_no_email, which SPEC.md gives the route and which only a
	// key can meet (sign-in needs an email). The route table shows it as a
	// session route.
	person bool
}

// Features a route can sit behind.
const featureTeams = "teams"

// behind returns a, with its route answering only while feature is on.
func (a access) behind(feature string) access {
	a.feature = feature
	return a
}

var (
	public   = access{kind: accessPublic}
	anyKey   = access{kind: accessAny}
	unscoped = access{kind: accessUnscoped}
	cron     = access{kind: accessCron}
	session  = access{kind: accessSession}
	agentKey = access{kind: accessAny, agent: true}
	signedIn = access{kind: accessAny, person: true}
)

func scope(s domain.Scope) access { return access{kind: accessScope, scope: s} }

// scopes is the access of a route that needs both s and also; the usage
// meter counts its calls under s.
func scopes(s, also domain.Scope) access { return access{kind: accessScope, scope: s, also: also} }
func admin(s domain.Scope) access        { return access{kind: accessAdmin, scope: s} }

type route struct {
	pattern string
	auth    access
	handler handlerFunc // nil: part of the interface, not built yet (501 not_implemented)
}

// routes is the whole API surface of SPEC.md and CONTRACT.md on one screen.
func (s *Server) routes() []route {
	var (
		gov    = scope(domain.ScopeGovernance)
		grants = scope(domain.ScopeGrants)
		notif  = scope(domain.ScopeNotifications)
		write  = scope(domain.ScopeEventsWrite)
		read   = scope(domain.ScopeEventsRead)
		orgs   = scope(domain.ScopeOrgs).behind(featureTeams)
		// approvals: an unscoped key and a session hold it.
		approvals = scope(domain.ScopeApprovals)
	)
	return []route{
		// Operations and documents.
		{"GET /v1/health", public, s.health},
		{"GET /v1/openapi.json", public, s.openAPI},
		// Prometheus scrapes outside /v1 (docs/operations.md lists the metrics).
		{"GET /metrics", public, s.metrics},

		// Credentials (CONTRACT.md "Credentials").
		{"POST /v1/auth/otp/request", public, s.requestOTP},
		{"POST /v1/auth/otp/verify", public, s.verifyOTP},
		{"POST /v1/auth/logout", session, s.logout},
		{"GET /v1/auth/session", session, s.session},
		{"POST /v1/keys", unscoped, s.createKey},
		{"GET /v1/keys", unscoped, s.listKeys},
		{"POST /v1/keys/{key_id}/revoke", unscoped, s.revokeKey},

		// The record (SPEC.md "Events", CONTRACT.md "The record").
		{"POST /v1/events", write, s.appendEvent},
		// An event the service numbers at the tip (docs/decisions/record.md
		// "Append at the tip"): what an agent surface records.
		{"POST /v1/events/append", write, s.appendNextEvent},
		{"POST /v1/events/batch", write, s.appendBatch},
		{"POST /v1/events/search", read, s.searchEvents},
		{"GET /v1/events/stream", read, eventStreamHandler(s.app, s.cfg.StreamPing, s.done)},
		{"GET /v1/events/{event_id}", read, s.getEvent},
		{"GET /v1/chain/tip", read, s.chainTip},
		{"PUT /v1/machines/{machine_id}/signing-key", write, s.putSigningKey},
		{"GET /v1/machines", read, s.listMachines},
		{"POST /v1/policy/test", gov, s.policyTest},

		// Integrity (CONTRACT.md "Integrity").
		{"GET /v1/chain/blocks", read, s.chainBlocks},
		{"GET /v1/chain/verify", read, s.chainVerify},
		{"GET /v1/chain/proof/inclusion", read, s.inclusionProof},
		{"GET /v1/chain/proof/consistency", read, s.consistencyProof},
		{"GET /v1/chain/export", read, s.chainExport},

		// The gate (SPEC.md "Grants", CONTRACT.md "Delegation tokens").
		{"GET /v1/grants", grants, s.listGrants},
		{"POST /v1/grants", grants, s.createGrant},
		{"GET /v1/grants/status", grants, s.grantStatus},
		{"POST /v1/grants/{grant_id}/revoke", grants, s.revokeGrant},
		{"POST /v1/grants/{grant_id}/use", grants, s.useGrant},
		{"GET /v1/delegation/public-key", public, s.delegationPublicKey},
		// A tool call through the gate: check, meter and record in one commit
		// (docs/decisions/tool-calls.md; CONTRACT.md "Agent surfaces").
		{"POST /v1/tool-calls", scopes(domain.ScopeGrants, domain.ScopeEventsWrite), s.gateToolCall},

		// Per-call approvals (CONTRACT.md "Approvals"; docs/approvals.md).
		{"POST /v1/approval-rules", grants, s.createApprovalRule},
		{"GET /v1/approval-rules", grants, s.listApprovalRules},
		{"DELETE /v1/approval-rules/{rule_id}", grants, s.deleteApprovalRule},
		{"GET /v1/approvals", approvals, s.listApprovals},
		{"GET /v1/approvals/{approval_id}", approvals, s.getApproval},
		{"POST /v1/approvals/{approval_id}/approve", approvals, s.decideApproval(true)},
		{"POST /v1/approvals/{approval_id}/deny", approvals, s.decideApproval(false)},

		// Governance.
		{"GET /v1/governance/proposals", gov, s.listProposals},
		{"POST /v1/governance/proposals", gov, s.createProposal},
		{"GET /v1/governance/proposals/{proposal_id}", gov, s.getProposal},
		{"POST /v1/governance/proposals/{proposal_id}/ratify", gov, s.transitionProposal(domain.ActionRatify)},
		{"POST /v1/governance/proposals/{proposal_id}/enact", gov, s.transitionProposal(domain.ActionEnact)},
		{"POST /v1/governance/proposals/{proposal_id}/reject", gov, s.transitionProposal(domain.ActionReject)},

		// Chain heal.
		{"POST /v1/heal/auto/start", gov, s.healAutoStart},
		{"POST /v1/heal/auto/stop", gov, s.healAutoStop},
		{"POST /v1/heal/run", gov, s.healRun},
		{"POST /v1/heal/scan", gov, s.healScan},
		{"GET /v1/heal/status", gov, s.healStatus},

		// Legal agreements.
		{"POST /v1/legal/accept", signedIn, s.acceptLegal},
		{"GET /v1/legal/acceptances", anyKey, s.legalAcceptances},
		{"GET /v1/legal/documents", public, s.legalDocuments},
		{"GET /v1/legal/documents/{document_id}/text", public, s.legalText},

		// Notifications and webhooks.
		{"GET /v1/notifications", notif, s.listNotifications},
		{"POST /v1/notifications/digest/run", admin(domain.ScopeNotifications), s.runDigest},
		{"GET /v1/notifications/preferences", notif, s.getPreferences},
		{"PUT /v1/notifications/preferences", notif, s.putPreferences},
		{"POST /v1/notifications/test", notif, s.testNotification},
		{"POST /v1/notifications/{notification_id}/redeliver", notif, s.redeliverNotification},
		{"POST /v1/webhooks", notif, s.createWebhook},
		{"GET /v1/webhooks", notif, s.listWebhooks},
		{"DELETE /v1/webhooks/{webhook_id}", notif, s.deleteWebhook},
		{"GET /v1/webhooks/{webhook_id}/deliveries", notif, s.webhookDeliveries},

		// Teams (--teams; the DELETE is docs/decisions/teams.md's).
		{"GET /v1/orgs", orgs, s.listOrgs},
		{"POST /v1/orgs", orgs, s.createOrg},
		{"GET /v1/orgs/{org_id}", orgs, s.getOrg},
		{"POST /v1/orgs/{org_id}/accept", orgs, s.acceptInvitation},
		{"POST /v1/orgs/{org_id}/invite", orgs, s.inviteMember},
		{"GET /v1/orgs/{org_id}/keys", orgs, s.orgKeys},
		{"GET /v1/orgs/{org_id}/members", orgs, s.orgMembers},
		{"DELETE /v1/orgs/{org_id}/members/{email}", orgs, s.removeOrgMember},

		// Agent surfaces (CONTRACT.md "Agent surfaces"; docs/mcp.md).
		{"POST /v1/mcp", agentKey, s.mcp},

		// Dashboard.
		{"GET /v1/dashboard/usage", anyKey, s.dashboardUsage},

		// Operator cron (SPEC.md "Operator cron").
		{"POST /v1/internal/cron/admin-digest", cron, cronJob(s, s.app.AdminDigest)},
		{"POST /v1/internal/cron/anchor", cron, cronJob(s, swept(s.app.AnchorSweep))},
		{"POST /v1/internal/cron/approval-expiry", cron, cronJob(s, swept(s.app.ApprovalExpirySweep))},
		{"POST /v1/internal/cron/digest", cron, cronJob(s, swept(s.app.DigestAll))},
		{"POST /v1/internal/cron/grant-expiry", cron, cronJob(s, swept(s.app.GrantExpirySweep))},
		{"POST /v1/internal/cron/key-expiry", cron, cronJob(s, swept(s.app.KeyExpirySweep))},
		{"POST /v1/internal/cron/webhooks", cron, cronJob(s, drained(s.app.DrainWebhooks))},
		{"GET /v1/internal/jobs", cron, s.jobs},
	}
}

// RouteInfo describes one route for tests and documentation generators.
type RouteInfo struct {
	Pattern string
	// Access is "public", "cron", "any", "unscoped", "session", or the scope
	// name; admin routes read "admin:<scope>".
	Access string
	// Feature names the serve flag the route needs ("" for none).
	Feature string
	Built   bool
}

// RouteTable lists every route with its access rule, in routes.go order.
func (s *Server) RouteTable() []RouteInfo {
	var out []RouteInfo
	for _, rt := range s.routes() {
		var a string
		switch rt.auth.kind {
		case accessPublic:
			a = "public"
		case accessCron:
			a = "cron"
		case accessAny:
			a = "any"
			if rt.auth.person {
				a = "session"
			}
		case accessUnscoped:
			a = "unscoped"
		case accessSession:
			a = "session"
		case accessScope:
			a = string(rt.auth.scope)
			if rt.auth.also != "" {
				a += "+" + string(rt.auth.also)
			}
		case accessAdmin:
			a = "admin:" + string(rt.auth.scope)
		}
		out = append(out, RouteInfo{Pattern: rt.pattern, Access: a, Feature: rt.auth.feature, Built: rt.handler != nil})
	}
	return out
}
