package verify

// VerifyExport: the in-order checker of an export's lines.

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
)

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
	v.sigs = NewSignatureChecks(workers, v.signatureFailed)
	p := startPipeline(r, workers, v.sigs)

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
		v.sigs.Flush()
		if v.sigs.Failed() {
			break // an earlier line already failed; stop reading
		}
	}
	p.stop() // every submitted signature is checked when it returns
	if err == nil && !v.sigs.Failed() {
		switch {
		case v.header == nil:
			err = &Error{Kind: KindFormat, Sequence: -1, Block: -1, Line: lastLine + 1, Err: errors.New("export is empty")}
		case !v.ended:
			err = &Error{Kind: KindFormat, Sequence: -1, Block: -1, Line: lastLine + 1, Err: errors.New("export ends without an end line (truncated)")}
		}
	}
	if sigErr := v.firstSigErr; sigErr != nil {
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
	v.rep.SignaturesVerified = v.sigs.Verified()
	if v.frontier != nil {
		v.rep.TreeSize = v.frontier.Size()
		v.rep.RootHash = v.frontier.Root()
		if v.rep.CoveringCheckpoint != nil && v.coveringSize < v.rep.TreeSize {
			v.rep.CoveringCheckpoint = nil // events follow the last checkpoint
		}
	}
	return v.rep, err
}

// exportVerifier is the in-order state of VerifyExport.
type exportVerifier struct {
	pub    ed25519.PublicKey
	rep    Report
	header *ExportHeader
	blocks *BlockVerifier
	sigs   *SignatureChecks[sigAt]
	// firstSigErr is the signature failure on the earliest line (sigMu:
	// the pipeline's workers report failures).
	sigMu       sync.Mutex
	firstSigErr *Error

	frontier  *Frontier
	startRoot Hash        // root of the tree the export starts from
	cont      *Continuity // links and gaps, in sequence order
	keys      map[string]ed25519.PublicKey
	pending   *ExportConsistency
	approvals approvalChecks
	beyond    bool // a checkpoint past the last event was tied; no more events
	// coveringSize is the tree size of rep.CoveringCheckpoint.
	coveringSize uint64
	ended        bool
}

// sigAt is where an event whose signature is checked stands in the export.
type sigAt struct{ line, seq int64 }

// signatureFailed keeps the signature failure on the earliest line.
func (v *exportVerifier) signatureFailed(at sigAt) {
	v.sigMu.Lock()
	if v.firstSigErr == nil || at.line < v.firstSigErr.Line {
		v.firstSigErr = &Error{Kind: KindSignature, Sequence: at.seq, Block: -1, Line: at.line, Err: ErrBadSignature}
	}
	v.sigMu.Unlock()
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
			v.sigs.submitSigned(pub, it.signed, it.signedErr, *e.Signature, sigAt{line: it.no, seq: seq})
		} else if e.Signature != nil {
			v.rep.UnverifiedSignatures++
		}
	}
	// 4. A call allowed on an approval shows the approval (approvals.go).
	if err := v.approvals.see(e, it.no, v.header.Start > 0, &v.rep); err != nil {
		return err
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
	last := ExportCheckpoint{Block: c.Block, Note: c.Note, Cosignatures: append([]string(nil), c.Cosignatures...)}
	v.rep.LastCheckpoint = &last
	// Checkpoints come in size order, each after the event that completes
	// it: the first one at or past the leaves so far covers them, until an
	// event follows it (finish drops one left below the export's leaves).
	if cp.Size >= leaves && (v.rep.CoveringCheckpoint == nil || v.coveringSize < leaves) {
		v.rep.CoveringCheckpoint, v.coveringSize = &last, cp.Size
	}
	v.rep.Checkpoints++
	return nil
}
