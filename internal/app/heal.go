package app

// Chain heal (SPEC.md "Chain heal", "Heal records", "Periodic heal task";
// docs/decisions/heal.md): a scan that streams the account's chain in
// sequence order with constant memory and reports breaks, gaps, signature
// failures and whether the Merkle root recomputed from the events matches the
// stored tree and the newest signed block (heal_scan.go); a run that appends
// one chain_repair event per new finding through the single append path
// (heal_run.go); the per-process status cache (heal_status.go); and the
// periodic scan task (heal_task.go). This file holds the names they share.

// EventChainRepair is the type of the events a heal run appends.
const EventChainRepair = "chain_repair"

// Finding kinds, as chain_repair events and run actions name them.
const (
	FindingBreak     = "break"
	FindingGap       = "gap"
	FindingSignature = "signature_failure"
)

// Merkle root statuses of a scan.
const (
	RootOK       = "ok"
	RootMismatch = "mismatch"
)
