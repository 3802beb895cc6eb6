// Export format and offline verifier (SPEC.md: "offline verification covers
// exported records only"; CONTRACT.md "Integrity"). The format lives here, in
// one place: the service writes it with ExportWriter and auditors check it with
// VerifyExport, given the service public key out of band. docs/integrity.md
// describes it for people who write their own verifier.
//
// An export is NDJSON: one JSON object per line, {"kind": K, K: {...}}, in this order:
//
//	header                      always first
//	frontier                    only when header.start > 0 (a fragment)
//	machine_key | event | consistency | checkpoint ...   interleaved in chain order
//	end                         always last: counts, so truncation is noticed
//
// Events come in leaf order: the order they were stored, which is the order
// of the Merkle tree's leaves. Batch ingest may store any unused sequence, so
// leaf order need not be sequence order; the verifier judges links and gaps
// in sequence order (Continuity) and the Merkle roots in line order.
//
// A machine_key line puts a machine's signing key in force for every later
// event (key history included). A checkpoint line follows the event that
// completes its tree size; a checkpoint of any other size must be immediately
// preceded by a consistency line tying its root to the tree the verifier has
// rebuilt so far (a fragment's anchor block before its first event, or the
// first block after its last one).
package verify

import (
	"fmt"
)

// ExportFormat is the header.format of this version of the export.
const ExportFormat = "auditchain-export/v1"

// Line kinds.
const (
	LineHeader      = "header"
	LineFrontier    = "frontier"
	LineMachineKey  = "machine_key"
	LineEvent       = "event"
	LineConsistency = "consistency"
	LineCheckpoint  = "checkpoint"
	LineEnd         = "end"
)

// ExportHeader opens an export.
type ExportHeader struct {
	Format string `json:"format"`
	UserID string `json:"user_id"`
	// Origin is Origin(UserID), the origin every checkpoint must carry.
	Origin string `json:"origin"`
	// ServiceKeyID is the key_id of GET /v1/delegation/public-key; informational.
	ServiceKeyID string `json:"service_key_id"`
	// ServicePublicKey (standard base64) is optional and never trusted: the
	// verifier is given the key out of band and only checks it matches.
	ServicePublicKey string `json:"service_public_key,omitempty"`
	// Start is the leaf index of the first exported event (the number of
	// events stored before it); 0 for a full export.
	Start      uint64 `json:"start"`
	ExportedAt string `json:"exported_at,omitempty"`
	// TreeSize, when set, is the account's tree size the export was cut
	// from (its newest block); informational, like every header field, and
	// at least the number of leaves the export holds. Whether the export
	// holds every leaf (Report.Whole) is decided by its signed checkpoints.
	TreeSize *uint64 `json:"tree_size,omitempty"`
}

// ExportFrontier is the tree before a fragment's first event.
type ExportFrontier struct {
	// TreeSize equals header.start.
	TreeSize uint64 `json:"tree_size"`
	// Hashes is the compact range [0, TreeSize), largest subtree first.
	Hashes []Hash `json:"hashes"`
	// LastLeafProof proves leaf TreeSize-1 in the tree of size TreeSize.
	LastLeafProof []Hash `json:"last_leaf_proof"`
	// LastLeafSequence and LastLeafPayloadHash are the sequence and
	// payload_hash of the event at leaf TreeSize-1 (the last one before the
	// fragment). The verifier checks the payload_hash is that leaf, with
	// LastLeafProof, and judges the fragment's links against that event.
	// Both or neither; exports written before they existed have neither.
	LastLeafSequence    *int64  `json:"last_leaf_sequence,omitempty"`
	LastLeafPayloadHash *string `json:"last_leaf_payload_hash,omitempty"`
}

// ExportMachineKey is a registered signing key, in force for every event
// with this machine_id stored after it was registered: from leaf
// EffectiveFromLeaf on, so for every event line after this one (CONTRACT.md
// "The record").
type ExportMachineKey struct {
	MachineID    string `json:"machine_id"`
	PublicKey    string `json:"public_key"`
	RegisteredAt string `json:"registered_at"`
	// EffectiveFromSequence is the account's next sequence when the key was
	// registered (the event at leaf EffectiveFromLeaf-1, plus one);
	// informational: with events stored out of sequence order it does not
	// say which events the key governs.
	EffectiveFromSequence int64 `json:"effective_from_sequence"`
	// EffectiveFromLeaf is the number of leaves stored before the key took
	// effect (the key's from_leaf). The line must not come before that many
	// leaves; an export without the field (written before it existed) reads
	// as 0, which is never too early.
	EffectiveFromLeaf int64 `json:"effective_from_leaf"`
}

// ExportEvent is a stored event: every hashed field plus payload_hash.
type ExportEvent struct {
	HashedEvent
	PayloadHash string `json:"payload_hash"`
}

// ExportConsistency precedes a checkpoint whose size is not the number of
// leaves verified so far; From and To are those two sizes, smaller first.
type ExportConsistency struct {
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
	Proof []Hash `json:"proof"`
}

// ExportCheckpoint is a chain block: its index and its signed note,
// verbatim, and the witnesses' cosignatures on it (note signature lines,
// kept outside the note, whose bytes BlockHash covers; absent when none).
// The export only carries them: VerifyExport does not trust them, and
// CheckQuorum checks them against witness keys given out of band.
type ExportCheckpoint struct {
	Block        int64    `json:"block"`
	Note         string   `json:"note"`
	Cosignatures []string `json:"cosignatures,omitempty"`
}

// ExportEnd closes an export.
type ExportEnd struct {
	Events      int64  `json:"events"`
	Checkpoints int64  `json:"checkpoints"`
	TreeSize    uint64 `json:"tree_size"`
}

type exportLine struct {
	Kind        string             `json:"kind"`
	Header      *ExportHeader      `json:"header,omitempty"`
	Frontier    *ExportFrontier    `json:"frontier,omitempty"`
	MachineKey  *ExportMachineKey  `json:"machine_key,omitempty"`
	Event       *ExportEvent       `json:"event,omitempty"`
	Consistency *ExportConsistency `json:"consistency,omitempty"`
	Checkpoint  *ExportCheckpoint  `json:"checkpoint,omitempty"`
	End         *ExportEnd         `json:"end,omitempty"`
}

// MaxExportLine bounds one line of an export (an event with its raw).
const MaxExportLine = 16 << 20

// check requires exactly the member named by kind.
func (l *exportLine) check() error {
	var want bool
	switch l.Kind {
	case LineHeader:
		want = l.Header != nil
	case LineFrontier:
		want = l.Frontier != nil
	case LineMachineKey:
		want = l.MachineKey != nil
	case LineEvent:
		want = l.Event != nil
	case LineConsistency:
		want = l.Consistency != nil
	case LineCheckpoint:
		want = l.Checkpoint != nil
	case LineEnd:
		want = l.End != nil
	default:
		return fmt.Errorf("unknown line kind %q", l.Kind)
	}
	if !want {
		return fmt.Errorf("%s line without a %q member", l.Kind, l.Kind)
	}
	n := 0
	for _, present := range [...]bool{l.Header != nil, l.Frontier != nil, l.MachineKey != nil, l.Event != nil,
		l.Consistency != nil, l.Checkpoint != nil, l.End != nil} {
		if present {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%s line carries %d members, want only %q", l.Kind, n, l.Kind)
	}
	return nil
}
