package api

// Operator cron routes and the jobs report (SPEC.md "Operator cron";
// docs/decisions/jobs.md). Each cron route runs one job once and answers
// what it did.

// Swept answers the cron routes that run a sweep (anchor, digest,
// grant-expiry, key-expiry): the sweep's counts under "swept".
type Swept[T any] struct {
	Swept T `json:"swept"`
}

// AnchorSweep is what POST /v1/internal/cron/anchor did. A misconfigured
// provider is reported here (Status provider_misconfigured, Error) with 200,
// like every other outcome of the sweep.
type AnchorSweep struct {
	Status       string  `json:"status"` // anchoring_disabled, provider_misconfigured, completed, completed_with_failures
	Provider     string  `json:"provider"`
	Users        int     `json:"users"`
	Anchored     int     `json:"anchored"`
	AnchorFailed int     `json:"anchor_failed"`
	NoRoot       int     `json:"no_root"`
	Unchanged    int     `json:"unchanged"`
	Error        *string `json:"error"`
}

// GrantExpiry is what POST /v1/internal/cron/grant-expiry did.
type GrantExpiry struct {
	Expiring int `json:"expiring"`
	Notified int `json:"notified"`
	Users    int `json:"users"`
}

// KeyExpiry is what POST /v1/internal/cron/key-expiry did.
type KeyExpiry struct {
	Scanned   int `json:"scanned"`
	Warned24h int `json:"warned_24h"`
	Warned7d  int `json:"warned_7d"`
}

// DigestSweep is what POST /v1/internal/cron/digest did: Grouped sums the
// digests sent by notice type.
type DigestSweep struct {
	DigestsSent int            `json:"digests_sent"`
	Grouped     map[string]int `json:"grouped"`
	Users       int            `json:"users"`
}

// OperatorDigest answers POST /v1/internal/cron/admin-digest.
type OperatorDigest struct {
	Counts         OperatorCounts `json:"counts"`
	DeliveryStatus string         `json:"delivery_status"` // sent, failed, not_configured
	Provider       string         `json:"provider"`
	Recipient      *string        `json:"recipient"`
}

// OperatorCounts are the operator digest's figures over its window; a figure
// the service does not record is null with its status "not recorded".
type OperatorCounts struct {
	AccountsNew            int64            `json:"accounts_new"`
	AccountsTotal          int64            `json:"accounts_total"`
	CallsByCapability      map[string]int64 `json:"calls_by_capability"`
	CallsTotal             int64            `json:"calls_total"`
	DeliveriesFailed       *int64           `json:"deliveries_failed"`
	Errors                 *int64           `json:"errors"`
	ErrorsStatus           string           `json:"errors_status"`
	GrantsCreated          int64            `json:"grants_created"`
	GrantsRevoked          int64            `json:"grants_revoked"`
	KeysCreated            int64            `json:"keys_created"`
	MCPCalls               *int64           `json:"mcp_calls"`
	MCPCallsStatus         string           `json:"mcp_calls_status"`
	NotificationsTotal     int64            `json:"notifications_total"`
	Since                  string           `json:"since"`
	Until                  string           `json:"until"`
	WebhookQueuePendingNow int64            `json:"webhook_queue_pending_now"`
	WindowHours            int              `json:"window_hours"`
}

// WebhookDrain answers POST /v1/internal/cron/webhooks.
type WebhookDrain struct {
	Webhooks DrainCounts `json:"webhooks"`
}

// DrainCounts counts what a pass over an outbox (webhook or email) did.
type DrainCounts struct {
	Drained int `json:"drained"`
	Sent    int `json:"sent"`
	Failed  int `json:"failed"`
}

// JobsStatus answers GET /v1/internal/jobs: every job, and whether this
// replica runs the scheduler.
type JobsStatus struct {
	Jobs      []JobView `json:"jobs"`
	Replica   string    `json:"replica"`
	Scheduler bool      `json:"scheduler"`
}

// JobView is one job of JobsStatus: its cadence, the newest period any
// replica ran, and this replica's next and last run (NextRun only when its
// scheduler runs).
type JobView struct {
	Job     string       `json:"job"`
	Cadence string       `json:"cadence"`
	NextRun *string      `json:"next_run"`
	Running bool         `json:"running"`
	LastRun *JobRunView  `json:"last_run"`
	Replica *JobRunLocal `json:"this_replica"`
}

// JobRunView is a job's newest scheduled period, run by whichever replica.
type JobRunView struct {
	Period     string   `json:"period"`
	Replica    string   `json:"replica"`
	StartedAt  string   `json:"started_at"`
	FinishedAt *string  `json:"finished_at"`
	DurationMS *float64 `json:"duration_ms"`
	Outcome    string   `json:"outcome"` // ok, failed, or running (also: a replica that died mid-run)
	Error      *string  `json:"error"`
}

// JobRunLocal is this replica's last run of a job (scheduled, kicked or
// skipped).
type JobRunLocal struct {
	Trigger    string  `json:"trigger"`
	StartedAt  string  `json:"started_at"`
	DurationMS float64 `json:"duration_ms"`
	Outcome    string  `json:"outcome"`
	Error      *string `json:"error"`
}
