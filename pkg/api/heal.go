package api

import "encoding/json"

// Chain heal (SPEC.md "Chain heal", "Heal records").

// HealBreak is a prev_hash that is not the previous event's payload_hash.
type HealBreak struct {
	Sequence         int64   `json:"sequence"`
	EventID          string  `json:"event_id"`
	ExpectedPrevHash *string `json:"expected_prev_hash"`
	FoundPrevHash    *string `json:"found_prev_hash"`
}

// HealGap is a run of missing sequence numbers.
type HealGap struct {
	AfterSequence *int64 `json:"after_sequence"`
	MissingFrom   int64  `json:"missing_from"`
	MissingTo     int64  `json:"missing_to"`
}

// HealSignatureFailure is a signed event that does not verify (or an
// unsigned one of a machine with a key): Reason is invalid or missing.
type HealSignatureFailure struct {
	Sequence  int64  `json:"sequence"`
	EventID   string `json:"event_id"`
	MachineID string `json:"machine_id"`
	Reason    string `json:"reason"`
}

// HealScan is a scan result: Clean only when the three lists are empty and
// the Merkle root reads ok.
type HealScan struct {
	Breaks            []HealBreak            `json:"breaks"`
	Gaps              []HealGap              `json:"gaps"`
	SignatureFailures []HealSignatureFailure `json:"signature_failures"`
	MerkleRootStatus  string                 `json:"merkle_root_status"`
	// MerkleRootDetail says why the root reads mismatch (null when ok).
	MerkleRootDetail *string `json:"merkle_root_detail"`
	Clean            bool    `json:"clean"`
	// TotalEvents counts the events in scope (the machine's when filtered);
	// Verified those of them with no finding.
	TotalEvents int64   `json:"total_events"`
	Verified    int64   `json:"verified"`
	ScannedAt   string  `json:"scanned_at"`
	MachineID   *string `json:"machine_id"`
	UserID      string  `json:"user_id"`
}

// HealRepairAction is one finding of a run and what was done about it;
// Finding is a HealBreak, HealGap or HealSignatureFailure as Kind says.
type HealRepairAction struct {
	Kind           string          `json:"kind"` // break, gap, signature_failure
	FindingKey     string          `json:"finding_key"`
	Status         string          `json:"status"` // written, would_write, skipped
	Finding        json.RawMessage `json:"finding"`
	RepairEventID  *string         `json:"repair_event_id"`
	RepairSequence *int64          `json:"repair_sequence"`
}

// HealRun answers POST /v1/heal/run.
type HealRun struct {
	Actions           []HealRepairAction `json:"actions"`
	Breaks            int                `json:"breaks"`
	Gaps              int                `json:"gaps"`
	SignatureFailures int                `json:"signature_failures"`
	Skipped           int                `json:"skipped"`
	WouldWrite        int                `json:"would_write"`
	Written           int                `json:"written"`
	CompletedAt       string             `json:"completed_at"`
	DryRun            bool               `json:"dry_run"`
	MachineID         *string            `json:"machine_id"`
	MerkleRootStatus  string             `json:"merkle_root_status"`
	UserID            string             `json:"user_id"`
}

// HealRunRequest is the body of POST /v1/heal/run; DryRun nil means true.
type HealRunRequest struct {
	DryRun    *bool   `json:"dry_run,omitempty"`
	MachineID *string `json:"machine_id,omitempty" max:"name"`
}

// HealScanRequest is the body of POST /v1/heal/scan.
type HealScanRequest struct {
	MachineID *string `json:"machine_id,omitempty" max:"name"`
}

// HealStatus answers GET /v1/heal/status (this process's cache).
type HealStatus struct {
	AutoRunning bool      `json:"auto_running"`
	LastScan    *HealScan `json:"last_scan"`
	LastRepair  *HealRun  `json:"last_repair"`
}

// HealAutoStartRequest is the body of POST /v1/heal/auto/start (default 300).
type HealAutoStartRequest struct {
	PeriodSeconds *int `json:"period_seconds,omitempty"`
}

// HealAutoTask answers POST /v1/heal/auto/start.
type HealAutoTask struct {
	PeriodSeconds int     `json:"period_seconds"`
	Running       bool    `json:"running"`
	StartedAt     *string `json:"started_at"`
	TaskID        *string `json:"task_id"`
	UserID        string  `json:"user_id"`
}

// HealAutoStop answers POST /v1/heal/auto/stop: Stopped is false when no
// task was running.
type HealAutoStop struct {
	Running   bool    `json:"running"`
	StartedAt *string `json:"started_at"`
	Stopped   bool    `json:"stopped"`
	StoppedAt *string `json:"stopped_at"`
	TaskID    *string `json:"task_id"`
	UserID    string  `json:"user_id"`
}
