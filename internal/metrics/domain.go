package metrics

// The domain's metrics: what the service did, counted where it happens
// (the use cases, the error writer, the webhook egress, the scheduler) and
// exposed at GET /metrics by every server's registry (RegisterDomain).
// docs/operations.md lists them.
//
// They are declared once per process, not per App: a Prometheus target is
// a process, and the call sites then need no dependency threaded to them.
// Their labels take values from fixed sets only (kinds, statuses, codes,
// job names) — never an account, key, grant, proposal or event id, which
// would make a series per object.

// Kinds of append, the label of EventsAppended.
const (
	AppendSingle   = "single"      // POST /v1/events
	AppendNext     = "append_next" // POST /v1/events/append
	AppendBatch    = "batch"       // POST /v1/events/batch, per event stored
	AppendToolCall = "tool_call"   // POST /v1/tool-calls: the call and its results
	AppendService  = "service"     // events the service writes (governance.*, grant.*, chain_repair, anchors, signing keys)
)

// Outcomes of a webhook delivery attempt, the label of WebhookDeliveries.
const (
	WebhookOK        = "ok"         // the receiver answered 2xx
	WebhookHTTPError = "http_error" // it answered another status (redirects included)
	WebhookTimeout   = "timeout"    // no answer within the attempt's timeout
	WebhookRefused   = "refused"    // the egress guard refused the target (private address, bad URL)
	WebhookError     = "error"      // DNS, connection, TLS or another transport failure
)

// latencyBuckets suit work that takes from a millisecond to a minute (a
// webhook's 10 s timeout, a job's sweep).
var latencyBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

var (
	EventsAppended = NewCounterVec("auditchain_events_appended_total",
		"Events appended (committed) by this process, by the kind of write: single, append_next, batch, tool_call, service.", "kind")
	GateDecisions = NewCounterVec("auditchain_gate_decisions_total",
		"Gate answers (GET /v1/grants/status, POST /v1/tool-calls) by status: authorized, or why the gate said no.", "status")
	Refusals = NewCounterVec("auditchain_refusals_total",
		"Problem answers the API wrote, by error code (the RFC 9457 code member: 4xx refusals, and 5xx).", "code")
	ProposalTransitions = NewCounterVec("auditchain_proposal_transitions_total",
		"Governance proposals by transition committed: propose, ratify, enact, reject.", "transition")
	WebhookDeliveries = NewCounterVec("auditchain_webhook_deliveries_total",
		"Webhook delivery attempts by outcome: ok, http_error, timeout, refused, error.", "outcome")
	WebhookDeliveryDuration = NewHistogramVec("auditchain_webhook_delivery_duration_seconds",
		"Webhook delivery attempt latency, from the request to the answer read or the failure, by outcome.", latencyBuckets, "outcome")
	MailMessages = NewCounterVec("auditchain_mail_messages_total",
		"Messages the mailer (--mail) sent, or failed to send after every attempt, by kind (sign_in_code, team_invitation, digest, operator_summary, or the notice type) and outcome (sent, failed).", "kind", "outcome")
	JobRuns = NewCounterVec("auditchain_job_runs_total",
		"Operator job runs by the built-in scheduler by job and outcome: ok, failed (an error or a panic), skipped (another replica had the period, or the previous run was still going).", "job", "outcome")
	WitnessSubmissions = NewCounterVec("auditchain_witness_submissions_total",
		"Checkpoints the witness job submitted, by witness (its key name, from --witness) and outcome: cosigned, refused (4xx or 5xx; 422 is a checkpoint the witness finds inconsistent), ahead (the witness holds more than our newest block: a rollback or a fork), error (no answer, or one that does not verify).", "witness", "outcome")
	JobDuration = NewHistogramVec("auditchain_job_duration_seconds",
		"Duration of the runs of the operator jobs by the built-in scheduler (periods skipped excluded), by job.", latencyBuckets, "job")
)

// RegisterDomain exposes the domain's metrics in r.
func (r *Registry) RegisterDomain() {
	r.Register(EventsAppended, GateDecisions, Refusals, ProposalTransitions,
		WebhookDeliveries, WebhookDeliveryDuration, MailMessages, JobRuns, JobDuration, WitnessSubmissions)
}
