package verify

// What a verification reports: the kinds of failure callers branch on, the
// failure at one place of the record (Error), and the Report.

import (
	"bytes"
	"fmt"
)

// Kind says what a verification failure is; callers branch on it.
type Kind string

// Failure kinds, most specific first.
const (
	KindFormat              Kind = "format"               // not a well-formed export
	KindServiceKey          Kind = "service_key"          // header names another service key
	KindPayloadHash         Kind = "payload_hash"         // stored payload_hash ≠ recomputed
	KindGap                 Kind = "gap"                  // Sequence is missing (a Gap, or a checkpoint covers more events than precede it)
	KindSequence            Kind = "sequence"             // a sequence repeats (or is negative)
	KindPrevHash            Kind = "prev_hash"            // a Break: the link to the event with the previous sequence is broken
	KindSignature           Kind = "signature"            // event signature missing or bad
	KindMerkleRoot          Kind = "merkle_root"          // signed root ≠ rebuilt tree
	KindCheckpointSignature Kind = "checkpoint_signature" // block not signed by the service key
	KindCheckpointOrigin    Kind = "checkpoint_origin"    // block for another account
	KindBlockLink           Kind = "block_link"           // block chain broken
	KindWitnessQuorum       Kind = "witness_quorum"       // fewer valid witness cosignatures than required (CheckQuorum)
	// KindApproval: an allowed call names an approval the chain does not
	// show granted earlier by another identity for the same call, or used
	// it twice; or an approval is granted by the identity that made the call.
	KindApproval Kind = "approval"
)

// Error is a verification failure at one place of the record: Sequence for
// event failures, Block for checkpoint failures (the other is -1), and Line,
// the 1-based line of the export (0 when not verifying an export). For a
// continuity finding (a gap or prev_hash reported once the export has
// passed every integrity check) Line is that of the event the finding is
// attached to: for a gap the event just above the missing run, for a
// prev_hash break the event whose prev_hash is wrong; the frontier line
// when that event is the fragment's last leaf before start.
type Error struct {
	Kind     Kind
	Sequence int64
	Block    int64
	Line     int64
	Err      error
}

func (e *Error) Error() string {
	var b bytes.Buffer
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	b.WriteString(string(e.Kind))
	switch {
	case e.Sequence >= 0:
		fmt.Fprintf(&b, " at sequence %d", e.Sequence)
	case e.Block >= 0:
		fmt.Fprintf(&b, " at block %d", e.Block)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Report summarises a verified export. On failure VerifyExport returns what
// was verified before the failure.
type Report struct {
	UserID string
	Origin string
	// Events and Checkpoints count verified lines.
	Events      int64
	Checkpoints int64
	// FirstSequence and LastSequence are the lowest and highest sequence of
	// the exported events (whatever lines they are on); -1 when the export
	// has no events.
	FirstSequence int64
	LastSequence  int64
	// Gaps and Breaks are every continuity finding of the events verified,
	// by sequence, as Continuity judges them (a fragment's links from its
	// frontier's last leaf included; nothing below its lowest sequence).
	// They are filled whether or not an error is returned; never nil. When
	// an integrity failure stopped the stream they cover the lines before
	// it, and a gap may be one a later line would have filled.
	Gaps   []Gap
	Breaks []Break
	// Whole is true unless the export is shown to be a part of the tree: it
	// starts after leaf 0, or a verified checkpoint past its last event
	// proves more leaves exist (the service ties one to every export that
	// ends before its newest block). A batch may store events below the
	// tip, at leaves after higher sequences, so in a part a missing
	// sequence may sit at a leaf outside it: only a whole export's gaps fail
	// verification; a part's are listed. Nothing unsigned can make a whole
	// export pass as a part.
	Whole bool
	// TreeSize and RootHash describe the tree rebuilt from the export.
	TreeSize uint64
	RootHash Hash
	// SignedSize is the largest tree size n such that leaves [0, n) are bound
	// to a verified service checkpoint. SignedSize == TreeSize means every
	// exported event is covered by a signature; events beyond it are checked
	// only by the hash chain.
	SignedSize uint64
	// SignaturesVerified counts event signatures checked against a
	// registered key; UnverifiedSignatures counts signed events whose machine
	// had no key in force (nothing to check them against).
	SignaturesVerified   int64
	UnverifiedSignatures int64
	// ApprovedCalls counts allowed tool calls carrying an approval id whose
	// approval.granted event is earlier in the export, names another
	// identity than the call's, binds the same sub-agent, tool and input
	// digest, and is used by no other allow. ApprovalsUnchecked counts those
	// of a fragment whose approval, if any, precedes its start.
	ApprovedCalls      int64
	ApprovalsUnchecked int64
	// FirstBlock and LastBlock are -1 when the export has no checkpoints.
	FirstBlock int64
	LastBlock  int64
	// LastCheckpoint is the verified checkpoint the export ends on (its
	// note and the cosignature lines the export carries for it, unchecked:
	// CheckQuorum checks them); nil when the export has no checkpoints.
	LastCheckpoint *ExportCheckpoint
	// CoveringCheckpoint is the first verified checkpoint whose tree holds
	// every exported leaf: the one that signs the last exported event. For
	// a whole export whose events are all signed it is LastCheckpoint (nil
	// when events follow the last checkpoint); for a range that ends on a block
	// it is that block, not the larger one past the range that ties the
	// range to the newer tree. It is the checkpoint whose cosignatures say
	// the exported events were witnessed (docs/integrity.md "Verifying");
	// nil when no checkpoint covers them.
	CoveringCheckpoint *ExportCheckpoint
}
