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
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
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

// ExportCheckpoint is a chain block: its index and its signed note, verbatim.
type ExportCheckpoint struct {
	Block int64  `json:"block"`
	Note  string `json:"note"`
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
	// FirstBlock and LastBlock are -1 when the export has no checkpoints.
	FirstBlock int64
	LastBlock  int64
}

// ExportWriter writes an export. The service calls the Write methods in chain
// order (see the package comment at the top of this file) and then Close.
type ExportWriter struct {
	w           *bufio.Writer
	enc         *json.Encoder
	events      int64
	checkpoints int64
	size        uint64
	err         error
}

// NewExportWriter writes the header; an empty Format or Origin is filled in.
func NewExportWriter(w io.Writer, h ExportHeader) (*ExportWriter, error) {
	if h.Format == "" {
		h.Format = ExportFormat
	}
	if h.Origin == "" {
		h.Origin = Origin(h.UserID)
	}
	if h.Format != ExportFormat || h.Origin != Origin(h.UserID) {
		return nil, fmt.Errorf("export header: format %q origin %q do not match %q %q", h.Format, h.Origin, ExportFormat, Origin(h.UserID))
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	x := &ExportWriter{w: bw, enc: json.NewEncoder(bw), size: h.Start}
	x.enc.SetEscapeHTML(false)
	return x, x.write(exportLine{Kind: LineHeader, Header: &h})
}

func (x *ExportWriter) write(l exportLine) error {
	if x.err == nil {
		x.err = x.enc.Encode(&l)
	}
	return x.err
}

// WriteFrontier writes the frontier of a fragment, right after the header.
func (x *ExportWriter) WriteFrontier(f ExportFrontier) error {
	return x.write(exportLine{Kind: LineFrontier, Frontier: &f})
}

// WriteMachineKey puts a key in force for the events written after it; write
// it before the first event it applies to (leaf k.EffectiveFromLeaf), never
// before that many leaves.
func (x *ExportWriter) WriteMachineKey(k ExportMachineKey) error {
	return x.write(exportLine{Kind: LineMachineKey, MachineKey: &k})
}

// WriteEvent writes the next stored event. raw is re-serialised compactly;
// its canonical form, and so payload_hash, is unchanged.
func (x *ExportWriter) WriteEvent(e *ExportEvent) error {
	x.events++
	x.size++
	return x.write(exportLine{Kind: LineEvent, Event: e})
}

// WriteConsistency writes the proof that must precede a checkpoint whose size
// differs from the number of leaves written so far.
func (x *ExportWriter) WriteConsistency(c ExportConsistency) error {
	return x.write(exportLine{Kind: LineConsistency, Consistency: &c})
}

// WriteCheckpoint writes a block's signed note verbatim.
func (x *ExportWriter) WriteCheckpoint(block int64, signedNote []byte) error {
	x.checkpoints++
	return x.write(exportLine{Kind: LineCheckpoint, Checkpoint: &ExportCheckpoint{Block: block, Note: string(signedNote)}})
}

// Close writes the end line and flushes; it does not close the underlying writer.
func (x *ExportWriter) Close() error {
	if err := x.write(exportLine{Kind: LineEnd, End: &ExportEnd{Events: x.events, Checkpoints: x.checkpoints, TreeSize: x.size}}); err != nil {
		return err
	}
	return x.w.Flush()
}

// MaxExportLine bounds one line of an export (an event with its raw).
const MaxExportLine = 16 << 20

// VerifyExport reads an export and checks its integrity, in line order: every
// payload_hash (recomputed), that no sequence repeats, every event signature
// (against the machine key in force; an event from a machine with a key
// must carry a valid one), checkpoint signature and origin, block link, and
// each checkpoint's root against the tree rebuilt from the events in line
// order. The first integrity failure in line order is returned as an
// *Error (KindSequence for a repeated sequence, at once); it ends the
// verification.
//
// Continuity is judged in sequence order beside it (Continuity): a link is
// judged between present sequences s-1 and s (genesis null), a missing run
// is a Gap. Continuity findings do not stop the stream; they are all listed
// in Report.Gaps and Report.Breaks, and when the export passes every
// integrity check the first of them in sequence order is returned as the
// error: KindGap at MissingFrom or KindPrevHash at the break's sequence.
// (A checkpoint covering more leaves than precede it is an integrity
// failure, KindGap at the lowest gap so far, or at the highest sequence + 1.)
// A fragment judges nothing below its lowest sequence; seeded by its
// frontier's last_leaf_sequence and last_leaf_payload_hash (checked against
// last_leaf_proof), it judges its links from leaf start-1. Events stored
// out of sequence order may sit at leaves outside the export: in an export
// that does not hold every leaf (a fragment, or one followed by a checkpoint
// beyond its end) a gap is a sequence absent from the export.
//
// Memory is constant in chain length for a chain stored in sequence order:
// the Merkle frontier, the highest payload_hash, the machine keys and a
// bounded window of lines; events out of sequence order add the open holes
// of Continuity, and findings the lists. Decoding, hashing and signature
// checks run on GOMAXPROCS goroutines; failures are still reported in
// stream order.
//
// A nil error says the export is internally consistent, continuous and its
// checkpoints are the service's; how much of it signatures cover is
// Report.SignedSize.
func VerifyExport(r io.Reader, servicePub ed25519.PublicKey) (Report, error) {
	if len(servicePub) != ed25519.PublicKeySize {
		return Report{}, fmt.Errorf("service public key must be %d bytes, got %d", ed25519.PublicKeySize, len(servicePub))
	}
	v := &exportVerifier{
		pub:  servicePub,
		keys: map[string]ed25519.PublicKey{},
		rep:  Report{FirstSequence: -1, LastSequence: -1, FirstBlock: -1, LastBlock: -1, Gaps: []Gap{}, Breaks: []Break{}},
	}
	workers := runtime.GOMAXPROCS(0)
	p := startPipeline(r, workers)
	v.sigs = &p.sigs

	var err error
	var lastLine int64
loop:
	for b := range p.order {
		<-b.done
		for i := range b.items {
			it := &b.items[i]
			if it.blank {
				continue
			}
			lastLine = it.no
			if err = v.step(it); err != nil {
				break loop
			}
		}
		if b.readErr != nil {
			err = fmt.Errorf("read export: %w", b.readErr)
			break
		}
		lastLine = b.first + int64(len(b.items)) - 1
		v.sigs.flush()
		if v.sigs.failed.Load() {
			break // an earlier line already failed; stop reading
		}
	}
	v.sigs.flush()
	p.stop() // every submitted signature is checked when it returns
	if err == nil && !v.sigs.failed.Load() {
		switch {
		case v.header == nil:
			err = &Error{Kind: KindFormat, Sequence: -1, Block: -1, Line: lastLine + 1, Err: errors.New("export is empty")}
		case !v.ended:
			err = &Error{Kind: KindFormat, Sequence: -1, Block: -1, Line: lastLine + 1, Err: errors.New("export ends without an end line (truncated)")}
		}
	}
	if sigErr := v.sigs.first; sigErr != nil {
		var e *Error
		if err == nil || !errors.As(err, &e) || sigErr.Line < e.Line {
			err = sigErr
		}
	}
	if v.header != nil && v.frontier != nil {
		v.rep.Whole = v.header.Start == 0 && !v.beyond
		if ts := v.header.TreeSize; err == nil && ts != nil && *ts < v.frontier.Size() {
			err = &Error{Kind: KindFormat, Sequence: -1, Block: -1, Line: 1,
				Err: fmt.Errorf("header tree_size %d is below the %d leaves exported", *ts, v.frontier.Size())}
		}
	}
	if v.cont != nil {
		v.rep.Gaps, v.rep.Breaks = v.cont.Gaps(), v.cont.Breaks()
		if err == nil {
			err = v.continuityError()
		}
	}
	v.rep.SignaturesVerified = v.sigs.verified.Load()
	if v.frontier != nil {
		v.rep.TreeSize = v.frontier.Size()
		v.rep.RootHash = v.frontier.Root()
	}
	return v.rep, err
}

// exportVerifier is the in-order state of VerifyExport.
type exportVerifier struct {
	pub    ed25519.PublicKey
	rep    Report
	header *ExportHeader
	blocks *BlockVerifier
	sigs   *sigChecks

	frontier  *Frontier
	startRoot Hash        // root of the tree the export starts from
	cont      *Continuity // links and gaps, in sequence order
	keys      map[string]ed25519.PublicKey
	pending   *ExportConsistency
	beyond    bool // a checkpoint past the last event was tied; no more events
	ended     bool
}

// continuityError is the first continuity finding in sequence order; in an
// export that does not hold every leaf (Report.Whole), the first break.
func (v *exportVerifier) continuityError() error {
	fs := v.cont.Findings()
	if !v.rep.Whole {
		fs = slices.DeleteFunc(fs, func(f Finding) bool { return f.Gap != nil })
	}
	if len(fs) == 0 {
		return nil
	}
	f := fs[0]
	if g := f.Gap; g != nil {
		after := "the chain starts"
		if g.AfterSequence != nil {
			after = fmt.Sprintf("sequence %d", *g.AfterSequence)
		}
		return &Error{Kind: KindGap, Sequence: g.MissingFrom, Block: -1, Line: f.Pos,
			Err: fmt.Errorf("sequences %d..%d are missing (after %s); %d gaps and %d breaks in all", g.MissingFrom, g.MissingTo, after,
				len(v.rep.Gaps), len(v.rep.Breaks))}
	}
	b := f.Break
	return &Error{Kind: KindPrevHash, Sequence: b.Sequence, Block: -1, Line: f.Pos,
		Err: fmt.Errorf("event %s has prev_hash %s, want %s; %d gaps and %d breaks in all", b.EventID, strOrNull(b.FoundPrevHash),
			strOrNull(b.ExpectedPrevHash), len(v.rep.Gaps), len(v.rep.Breaks))}
}

func strOrNull(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

func (v *exportVerifier) step(it *item) error {
	formatErr := func(format string, a ...any) error {
		return &Error{Kind: KindFormat, Sequence: -1, Block: -1, Line: it.no, Err: fmt.Errorf(format, a...)}
	}
	if it.err != nil {
		return formatErr("%v", it.err)
	}
	l := &it.line
	switch {
	case v.ended:
		return formatErr("line after the end line")
	case v.header == nil && l.Kind != LineHeader:
		return formatErr("first line is %q, want a header", l.Kind)
	case v.header != nil && v.frontier == nil && l.Kind != LineFrontier:
		return formatErr("a fragment starting at %d needs a frontier line after the header", v.header.Start)
	case v.pending != nil && l.Kind != LineCheckpoint:
		return formatErr("a consistency line must be followed by a checkpoint")
	}
	switch l.Kind {
	case LineHeader:
		return v.headerLine(it, l.Header)
	case LineFrontier:
		return v.frontierLine(it, l.Frontier)
	case LineMachineKey:
		k := l.MachineKey
		pub, err := ParsePublicKey(k.PublicKey)
		if err != nil {
			return formatErr("machine_key %q: %v", k.MachineID, err)
		}
		// effective_from_sequence is informational: with events stored out
		// of sequence order it does not order the lines.
		if k.EffectiveFromLeaf < 0 || uint64(k.EffectiveFromLeaf) > v.frontier.Size() {
			return formatErr("machine_key %q takes effect at leaf %d but appears after %d leaves", k.MachineID, k.EffectiveFromLeaf, v.frontier.Size())
		}
		v.keys[k.MachineID] = pub
		return nil
	case LineEvent:
		if v.beyond {
			return formatErr("event after a checkpoint beyond the exported events")
		}
		return v.eventLine(it, l.Event)
	case LineConsistency:
		v.pending = l.Consistency
		return nil
	case LineCheckpoint:
		return v.checkpointLine(it, l.Checkpoint)
	case LineEnd:
		e := l.End
		if e.Events != v.rep.Events || e.Checkpoints != v.rep.Checkpoints || e.TreeSize != v.frontier.Size() {
			return formatErr("end line counts %d events, %d checkpoints, tree size %d; export has %d, %d, %d",
				e.Events, e.Checkpoints, e.TreeSize, v.rep.Events, v.rep.Checkpoints, v.frontier.Size())
		}
		v.ended = true
		return nil
	}
	return formatErr("unknown line kind %q", l.Kind)
}

func (v *exportVerifier) headerLine(it *item, h *ExportHeader) error {
	fail := func(kind Kind, format string, a ...any) error {
		return &Error{Kind: kind, Sequence: -1, Block: -1, Line: it.no, Err: fmt.Errorf(format, a...)}
	}
	if v.header != nil {
		return fail(KindFormat, "second header")
	}
	if h.Format != ExportFormat {
		return fail(KindFormat, "format %q, this verifier reads %q", h.Format, ExportFormat)
	}
	if h.Origin != Origin(h.UserID) {
		return fail(KindFormat, "origin %q is not %q", h.Origin, Origin(h.UserID))
	}
	if h.ServicePublicKey != "" {
		pub, err := ParsePublicKey(h.ServicePublicKey)
		if err != nil {
			return fail(KindFormat, "service_public_key: %v", err)
		}
		if !pub.Equal(v.pub) {
			return fail(KindServiceKey, "export names service key %s, verifying with %s", Fingerprint(pub), Fingerprint(v.pub))
		}
	}
	if h.Start > 1<<62 {
		return fail(KindFormat, "start %d out of range", h.Start)
	}
	blocks, err := NewBlockVerifier(h.Origin, v.pub)
	if err != nil {
		return fail(KindFormat, "%v", err)
	}
	v.header, v.blocks = h, blocks
	v.rep.UserID, v.rep.Origin = h.UserID, h.Origin
	if h.Start == 0 {
		v.frontier, _ = NewFrontier(0, nil)
		v.startRoot = EmptyRoot
		v.cont = NewContinuity()
	} else {
		v.cont = NewFragmentContinuity()
	}
	return nil
}

func (v *exportVerifier) frontierLine(it *item, f *ExportFrontier) error {
	fail := func(format string, a ...any) error {
		return &Error{Kind: KindFormat, Sequence: -1, Block: -1, Line: it.no, Err: fmt.Errorf(format, a...)}
	}
	if v.frontier != nil {
		return fail("unexpected frontier line")
	}
	if f.TreeSize != v.header.Start {
		return fail("frontier of size %d for a fragment starting at %d", f.TreeSize, v.header.Start)
	}
	fr, err := NewFrontier(f.TreeSize, f.Hashes)
	if err != nil {
		return fail("%v", err)
	}
	// The event at leaf start-1: proven that leaf of the frontier's tree, it
	// seeds the links. Without it (an export written before these fields)
	// the fragment's lowest sequence is not linked to anything.
	switch seq, ph := f.LastLeafSequence, f.LastLeafPayloadHash; {
	case seq == nil && ph == nil:
	case seq == nil || ph == nil:
		return fail("last_leaf_sequence and last_leaf_payload_hash come together")
	default:
		leaf, err := HashBytes(*ph)
		if err != nil {
			return fail("last_leaf_payload_hash: %v", err)
		}
		if err := VerifyInclusion(f.TreeSize-1, f.TreeSize, LeafHash(leaf), f.LastLeafProof, fr.Root()); err != nil {
			return &Error{Kind: KindMerkleRoot, Sequence: -1, Block: -1, Line: it.no,
				Err: fmt.Errorf("last_leaf_payload_hash %s is not leaf %d of the frontier's tree: %v", *ph, f.TreeSize-1, err)}
		}
		if err := v.cont.Seed(*seq, *ph, it.no); err != nil {
			return fail("last_leaf_sequence: %v", err)
		}
	}
	v.frontier, v.startRoot = fr, fr.Root()
	return nil
}

func (v *exportVerifier) eventLine(it *item, e *ExportEvent) error {
	seq := e.Sequence
	fail := func(kind Kind, at int64, format string, a ...any) error {
		return &Error{Kind: kind, Sequence: at, Block: -1, Line: it.no, Err: fmt.Errorf(format, a...)}
	}
	// 1. The stored payload_hash is the hash of what is stored.
	stated, err := HashBytes(e.PayloadHash)
	if err != nil {
		return fail(KindPayloadHash, seq, "%v", err)
	}
	if it.hashErr != nil {
		return fail(KindPayloadHash, seq, "cannot canonicalise the event: %v", it.hashErr)
	}
	if !bytes.Equal(stated, it.hash[:]) {
		return fail(KindPayloadHash, seq, "stored %s, recomputed %s%x", e.PayloadHash, HashPrefix, it.hash[:])
	}
	// 2. A sequence is stored once (a repeat is tampering, reported at once).
	// Links and gaps are judged in sequence order, whatever the line order;
	// they do not stop the stream (continuityError reports them at the end).
	if err := v.cont.Add(seq, e.EventID, e.PrevHash, e.PayloadHash, it.no); err != nil {
		return fail(KindSequence, seq, "%v", err)
	}
	// 3. A machine with a registered key signs its events (checked concurrently).
	if e.MachineID != nil {
		if pub, ok := v.keys[*e.MachineID]; ok {
			if e.Signature == nil {
				return fail(KindSignature, seq, "machine %q has a registered key but the event is unsigned", *e.MachineID)
			}
			v.sigs.submit(sigJob{line: it.no, seq: seq, pub: pub, msg: it.signed, msgErr: it.signedErr, sig: *e.Signature})
		} else if e.Signature != nil {
			v.rep.UnverifiedSignatures++
		}
	}
	v.frontier.Append(LeafHash(stated))
	if v.rep.Events == 0 || seq < v.rep.FirstSequence {
		v.rep.FirstSequence = seq
	}
	if v.rep.Events == 0 || seq > v.rep.LastSequence {
		v.rep.LastSequence = seq
	}
	v.rep.Events++
	return nil
}

func (v *exportVerifier) checkpointLine(it *item, c *ExportCheckpoint) error {
	fail := func(kind Kind, format string, a ...any) error {
		return &Error{Kind: kind, Sequence: -1, Block: c.Block, Line: it.no, Err: fmt.Errorf(format, a...)}
	}
	if v.rep.Checkpoints == 0 && v.header.Start == 0 && c.Block != 0 {
		return fail(KindBlockLink, "a full export starts at block %d; earlier blocks are missing", c.Block)
	}
	cp, err := v.blocks.Next(c.Block, []byte(c.Note))
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Line = it.no
		}
		return err
	}
	leaves, root := v.frontier.Size(), v.frontier.Root()
	pending := v.pending
	v.pending = nil
	switch {
	case pending == nil && cp.Size == leaves:
		if cp.Root != root {
			return fail(KindMerkleRoot, "signed root %s at size %d, rebuilt tree has %s", cp.Root, cp.Size, root)
		}
	case pending == nil && cp.Size > leaves:
		// The signed size says more events precede this block than the
		// export holds: located at the lowest gap so far, else just above
		// the highest sequence (the fragment's start when it knows none).
		at := int64(v.header.Start)
		if g, ok := v.cont.FirstGap(); ok {
			at = g.MissingFrom
		} else if m, ok := v.cont.Max(); ok {
			at = m + 1
		}
		return &Error{Kind: KindGap, Sequence: at, Block: -1, Line: it.no,
			Err: fmt.Errorf("block %d covers %d events, only %d precede it", c.Block, cp.Size, leaves)}
	case pending == nil:
		return fail(KindMerkleRoot, "checkpoint of size %d after %d leaves without a consistency proof", cp.Size, leaves)
	case cp.Size < leaves:
		if pending.From != cp.Size || pending.To != leaves {
			return fail(KindMerkleRoot, "consistency proof %d→%d, need %d→%d", pending.From, pending.To, cp.Size, leaves)
		}
		if err := VerifyConsistency(cp.Size, leaves, pending.Proof, cp.Root, root); err != nil {
			return fail(KindMerkleRoot, "%v", err)
		}
	case cp.Size > leaves:
		if pending.From != leaves || pending.To != cp.Size {
			return fail(KindMerkleRoot, "consistency proof %d→%d, need %d→%d", pending.From, pending.To, leaves, cp.Size)
		}
		if err := VerifyConsistency(leaves, cp.Size, pending.Proof, root, cp.Root); err != nil {
			return fail(KindMerkleRoot, "%v", err)
		}
		v.beyond = true
	default:
		return fail(KindFormat, "consistency line before a checkpoint at the current size %d", leaves)
	}
	v.rep.SignedSize = max(v.rep.SignedSize, min(cp.Size, leaves))
	if v.rep.Checkpoints == 0 {
		v.rep.FirstBlock = c.Block
	}
	v.rep.LastBlock = c.Block
	v.rep.Checkpoints++
	return nil
}

// sigChecks hands event signatures from the in-order checker to the
// pipeline's workers, in chunks, and remembers the failure on the earliest
// line. The checker only decides which key is in force (that depends on the
// machine_key lines before the event); the Ed25519 work, the bulk of a signed
// export's cost, runs on every core beside the decoding.
type sigChecks struct {
	chunks   chan []sigJob // bounded: the checker waits when the workers are behind
	pending  []sigJob
	mu       sync.Mutex
	first    *Error
	failed   atomic.Bool
	verified atomic.Int64
}

// sigChunk is how many signatures one worker takes at a time: large enough
// that handing them over costs nothing next to ~40 µs per check, small
// enough that both cores share the tail of an export.
const sigChunk = 32

type sigJob struct {
	line   int64
	seq    int64
	pub    ed25519.PublicKey
	msg    []byte // the canonical raw the signature signs (signedMessage)
	msgErr error
	sig    string
}

func (c *sigChecks) submit(j sigJob) {
	if c.pending == nil {
		c.pending = make([]sigJob, 0, sigChunk)
	}
	c.pending = append(c.pending, j)
	if len(c.pending) == sigChunk {
		c.flush()
	}
}

// flush hands the pending signatures to the workers.
func (c *sigChecks) flush() {
	if len(c.pending) > 0 {
		c.chunks <- c.pending
		c.pending = nil
	}
}

func (c *sigChecks) check(jobs []sigJob) {
	verified := int64(0)
	for _, j := range jobs {
		err := j.msgErr
		if err == nil {
			err = verifySignedMessage(j.pub, j.msg, j.sig)
		}
		if err != nil {
			c.fail(&Error{Kind: KindSignature, Sequence: j.seq, Block: -1, Line: j.line, Err: ErrBadSignature})
			continue
		}
		verified++
	}
	c.verified.Add(verified)
}

func (c *sigChecks) fail(e *Error) {
	c.mu.Lock()
	if c.first == nil || e.Line < c.first.Line {
		c.first = e
	}
	c.mu.Unlock()
	c.failed.Store(true)
}

// The pipeline: one goroutine reads lines into batches; workers decode them and
// recompute payload hashes; VerifyExport consumes batches in order from order.
const batchLines = 256

type item struct {
	no      int64
	blank   bool
	line    exportLine
	err     error
	hash    Hash
	hashErr error
	// signed is what the event's signature signs (its canonical raw), for
	// events that carry one; signedErr when raw cannot be canonicalised.
	signed    []byte
	signedErr error
}

type batch struct {
	first   int64
	buf     []byte
	ends    []int
	items   []item
	readErr error
	done    chan struct{}
}

type pipeline struct {
	order chan *batch
	sigs  sigChecks
	quit  chan struct{}
	wg    sync.WaitGroup
}

func startPipeline(r io.Reader, workers int) *pipeline {
	p := &pipeline{order: make(chan *batch, 2*workers+2), quit: make(chan struct{}),
		sigs: sigChecks{chunks: make(chan []sigJob, 2*workers)}}
	work := make(chan *batch, 2*workers+2)
	p.wg.Go(func() {
		defer close(p.order)
		defer close(work)
		br := bufio.NewReaderSize(r, 256<<10)
		next := int64(1)
		hint := 64 << 10
		for eof := false; !eof; {
			b := &batch{first: next, buf: make([]byte, 0, hint), done: make(chan struct{})}
			for len(b.ends) < batchLines {
				var err error
				b.buf, err = readLine(br, b.buf)
				if err == io.EOF {
					eof = true
					if len(b.buf) == lastEnd(b.ends) {
						break
					}
				} else if err != nil {
					b.readErr, eof = err, true
					break
				}
				b.ends = append(b.ends, len(b.buf))
				next++
				if eof {
					break
				}
			}
			hint = max(hint, len(b.buf)+len(b.buf)/8)
			select {
			case p.order <- b:
			case <-p.quit:
				return
			}
			select {
			case work <- b:
			case <-p.quit:
				return
			}
		}
	})
	for range workers {
		p.wg.Go(func() {
			var scratch []byte
			work, chunks := work, p.sigs.chunks
			for work != nil || chunks != nil {
				select {
				case b, ok := <-work:
					if !ok {
						work = nil
						continue
					}
					scratch = b.decode(scratch)
					close(b.done)
				case jobs, ok := <-chunks:
					if !ok {
						chunks = nil
						continue
					}
					p.sigs.check(jobs)
				}
			}
		})
	}
	return p
}

// stop ends the reader and workers and waits for them; the checker must
// have flushed its last signatures, which are all checked when stop returns.
func (p *pipeline) stop() {
	close(p.sigs.chunks)
	close(p.quit)
	for range p.order { // unblock nothing; just drop queued batches
	}
	p.wg.Wait()
}

func lastEnd(ends []int) int {
	if len(ends) == 0 {
		return 0
	}
	return ends[len(ends)-1]
}

// readLine appends the next line, without its newline, to buf.
func readLine(br *bufio.Reader, buf []byte) ([]byte, error) {
	start := len(buf)
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if len(buf)-start > MaxExportLine+1 {
			return buf, fmt.Errorf("line longer than %d bytes", MaxExportLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if n := len(buf); n > start && buf[n-1] == '\n' {
			buf = buf[:n-1]
			if n := len(buf); n > start && buf[n-1] == '\r' {
				buf = buf[:n-1]
			}
		}
		return buf, err
	}
}

func (b *batch) decode(scratch []byte) []byte {
	b.items = make([]item, len(b.ends))
	start := 0
	for i, end := range b.ends {
		it := &b.items[i]
		it.no = b.first + int64(i)
		line := b.buf[start:end]
		start = end
		if len(bytes.TrimSpace(line)) == 0 {
			it.blank = true
			continue
		}
		// Event lines in the writer's shape skip encoding/json; anything
		// else (other kinds, unusual spelling) takes it, errors included.
		if !decodeEventLine(line, &it.line) {
			if err := json.Unmarshal(line, &it.line); err != nil {
				it.err = fmt.Errorf("not JSON: %v", err)
				continue
			}
		}
		if it.err = it.line.check(); it.err != nil {
			continue
		}
		if e := it.line.Event; e != nil {
			var signed []byte
			scratch, it.hash, signed, it.hashErr = eventHash(&e.HashedEvent, scratch)
			if e.Signature != nil {
				if signed == nil {
					signed, it.signedErr = signedMessage(e.Raw)
				}
				it.signed = signed
			}
		}
	}
	return scratch
}

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

// EventHash returns SHA-256(CanonicalEvent(e)), the bytes behind payload_hash,
// appending the canonical bytes to scratch[:0] (returned for reuse), so a
// caller hashing many events allocates little. Heal scans and VerifyExport use it.
// The common case builds the canonical bytes directly — the keys of
// HashedEvent in RFC 8785 order, RFC 8785 string escaping, raw copied when it
// is already canonical and given to jcs otherwise — which is several times
// faster than CanonicalEvent; anything unusual (a
// sequence beyond 2^53, invalid UTF-8, a raw jcs rejects) takes
// CanonicalEvent itself. A differential test and fuzz target hold the two equal.
func EventHash(e *HashedEvent, scratch []byte) ([]byte, Hash, error) {
	scratch, h, _, err := eventHash(e, scratch)
	return scratch, h, err
}

// eventHash is EventHash that also returns the canonical raw it built on the
// way (signedMessage(e.Raw), not a part of scratch), or nil when it did not
// build one.
func eventHash(e *HashedEvent, scratch []byte) ([]byte, Hash, []byte, error) {
	canon, canonRaw, ok := appendCanonicalEvent(scratch[:0], e)
	if !ok {
		c, err := CanonicalEvent(e)
		if err != nil {
			return canon, Hash{}, nil, err
		}
		return canon, sha256.Sum256(c), nil, nil
	}
	return canon, sha256.Sum256(canon), canonRaw, nil
}

const maxSafeInteger = 1<<53 - 1

// appendCanonicalEvent appends the canonical event to b, and returns the
// canonical raw apart (e.Raw itself when it is canonical already).
func appendCanonicalEvent(b []byte, e *HashedEvent) ([]byte, []byte, bool) {
	if e.Sequence > maxSafeInteger || e.Sequence < -maxSafeInteger {
		return b, nil, false
	}
	ok := true
	str := func(key string, s *string) {
		b = append(b, key...)
		if s == nil {
			b = append(b, "null"...)
			return
		}
		var good bool
		b, good = appendJCSString(b, *s)
		ok = ok && good
	}
	// RFC 8785 orders members by UTF-16 code units; all keys are ASCII.
	str(`{"decision":`, e.Decision)
	b = append(b, `,"event_id":`...)
	b, ok = appendJCSStringAnd(b, e.EventID, ok)
	b = append(b, `,"event_type":`...)
	b, ok = appendJCSStringAnd(b, e.EventType, ok)
	str(`,"machine_id":`, e.MachineID)
	str(`,"parent_id":`, e.ParentID)
	str(`,"prev_hash":`, e.PrevHash)
	b = append(b, `,"raw":`...)
	var canonRaw []byte
	switch {
	case len(e.Raw) == 0:
		canonRaw = []byte("null")
	case isCanonicalJSON(e.Raw):
		canonRaw = e.Raw
	default:
		c, err := canonicalJSON(e.Raw)
		if err != nil {
			return b, nil, false
		}
		canonRaw = c
	}
	b = append(b, canonRaw...)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, e.Sequence, 10)
	str(`,"signature":`, e.Signature)
	str(`,"signature_key":`, e.SignatureKey)
	str(`,"tool":`, e.Tool)
	str(`,"ts":`, e.TS)
	b = append(b, '}')
	return b, canonRaw, ok
}

func appendJCSStringAnd(b []byte, s string, ok bool) ([]byte, bool) {
	b, good := appendJCSString(b, s)
	return b, ok && good
}

// appendJCSString writes s as an RFC 8785 string: only '"', '\\' and control
// characters are escaped (\b \t \n \f \r by name, others as \u00xx). It
// reports false for invalid UTF-8, which encoding/json would have altered.
func appendJCSString(b []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return b, false
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20:
			b = append(b, c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	return append(b, '"'), true
}

// maxFastDepth bounds the nesting isCanonicalJSON follows; deeper documents
// take jcs, which has its own (larger) limit.
const maxFastDepth = 64

// isCanonicalJSON reports whether b is certainly already in RFC 8785 form, so
// jcs.Transform(b) would return b unchanged. It accepts a strict subset and
// answers false whenever in doubt: no whitespace; object keys of printable
// ASCII without escapes, strictly increasing (so bytewise order is UTF-16
// order and keys are unique); strings in valid UTF-8 escaping exactly what
// RFC 8785 escapes, as it escapes it; numbers only integers of at most 15
// digits (exactly representable, printed as themselves); bounded nesting.
func isCanonicalJSON(b []byte) bool {
	i, ok := canonValue(b, 0, 0)
	return ok && i == len(b)
}

func canonValue(b []byte, i, depth int) (int, bool) { return scanFastValue(b, i, depth, true) }

// scanFastValue scans the value at b[i] if it is in the subset
// isCanonicalJSON accepts — with its objects' keys in any order unless
// sorted — and returns where it ends.
func scanFastValue(b []byte, i, depth int, sorted bool) (int, bool) {
	if i >= len(b) || depth > maxFastDepth {
		return i, false
	}
	switch c := b[i]; {
	case c == '{':
		i++
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		var prev []byte
		for {
			start := i
			end, ok := canonKey(b, i)
			if !ok {
				return i, false
			}
			key := b[start+1 : end-1]
			if sorted && prev != nil && bytes.Compare(prev, key) >= 0 {
				return i, false
			}
			prev = key
			if end >= len(b) || b[end] != ':' {
				return i, false
			}
			if i, ok = scanFastValue(b, end+1, depth+1, sorted); !ok || i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i++
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '[':
		i++
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = scanFastValue(b, i, depth+1, sorted); !ok || i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i++
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '"':
		return canonString(b, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return canonInteger(b, i)
	case bytes.HasPrefix(b[i:], []byte("true")):
		return i + 4, true
	case bytes.HasPrefix(b[i:], []byte("false")):
		return i + 5, true
	case bytes.HasPrefix(b[i:], []byte("null")):
		return i + 4, true
	}
	return i, false
}

// canonicalJSON is jcs.Transform(b), by way of sortedCanonical when b is in
// the subset isCanonicalJSON accepts but for its keys' order (what
// encoding/json writes for a struct, and most clients' raws).
func canonicalJSON(b []byte) ([]byte, error) {
	if out, ok := sortedCanonical(b); ok {
		return out, nil
	}
	return jcs.Transform(b)
}

// sortedCanonical returns the RFC 8785 form of b when b is in the subset
// isCanonicalJSON accepts except that object keys may come in any order:
// the same document with each object's members sorted by key. Keys there
// are escape-free printable ASCII, so byte order is RFC 8785's UTF-16
// order; a key twice, or anything outside the subset, answers false.
// FuzzSortedCanonical holds it to jcs.Transform.
func sortedCanonical(b []byte) ([]byte, bool) {
	end, ok := scanFastValue(b, 0, 0, false)
	if !ok || end != len(b) {
		return nil, false
	}
	out, _, ok := appendSortedValue(make([]byte, 0, len(b)), b, 0)
	return out, ok
}

// fastMember is one member of an object being sorted: its key and where its
// value starts, in the input.
type fastMember struct {
	key   []byte
	value int
}

// appendSortedValue appends the value at b[i], already scanned by
// scanFastValue, with its objects' members sorted; it returns where the
// value ends in b.
func appendSortedValue(dst, b []byte, i int) ([]byte, int, bool) {
	switch b[i] {
	case '{':
		var members []fastMember
		j := i + 1
		if b[j] == '}' {
			return append(dst, '{', '}'), j + 1, true
		}
		for {
			end, _ := canonKey(b, j)
			next, _ := scanFastValue(b, end+1, 1, false)
			members = append(members, fastMember{key: b[j+1 : end-1], value: end + 1})
			j = next + 1
			if b[next] == '}' {
				break
			}
		}
		slices.SortFunc(members, func(x, y fastMember) int { return bytes.Compare(x.key, y.key) })
		dst = append(dst, '{')
		for k, m := range members {
			if k > 0 {
				if bytes.Equal(members[k-1].key, m.key) {
					return dst, 0, false
				}
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = append(dst, m.key...)
			dst = append(dst, '"', ':')
			var ok bool
			if dst, _, ok = appendSortedValue(dst, b, m.value); !ok {
				return dst, 0, false
			}
		}
		return append(dst, '}'), j, true
	case '[':
		j := i + 1
		if b[j] == ']' {
			return append(dst, '[', ']'), j + 1, true
		}
		dst = append(dst, '[')
		for {
			var ok bool
			if dst, j, ok = appendSortedValue(dst, b, j); !ok {
				return dst, 0, false
			}
			if b[j] == ']' {
				return append(dst, ']'), j + 1, true
			}
			dst = append(dst, ',')
			j++
		}
	}
	end, _ := scanFastValue(b, i, 1, false)
	return append(dst, b[i:end]...), end, true
}

// canonKey accepts a string of printable ASCII other than '"' and '\\'.
func canonKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return i, false
		}
	}
	return i, false
}

func canonString(b []byte, i int) (int, bool) {
	for i++; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				// Only controls without a short form, as \u00xx in lowercase.
				if i+6 > len(b) || b[i+2] != '0' || b[i+3] != '0' || (b[i+4] != '0' && b[i+4] != '1') {
					return i, false
				}
				d := b[i+5]
				var v byte
				switch {
				case d >= '0' && d <= '9':
					v = d - '0'
				case d >= 'a' && d <= 'f':
					v = d - 'a' + 10
				default:
					return i, false
				}
				v += (b[i+4] - '0') << 4
				if v == '\b' || v == '\t' || v == '\n' || v == '\f' || v == '\r' {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, false
			}
			i += size
		}
	}
	return i, false
}

func canonInteger(b []byte, i int) (int, bool) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	n := i - digits
	switch {
	case n == 0 || n > 15:
		return i, false
	case b[digits] == '0' && (n > 1 || digits > start): // leading zero, or -0
		return i, false
	case i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E'):
		return i, false
	}
	return i, true
}
