package app

// The heal scan (SPEC.md "Chain heal"): one stream of the account's chain in
// sequence order, with constant memory, that finds breaks, gaps and signature
// failures and recomputes the Merkle root against the stored tree and the
// newest signed block. It writes nothing.

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// finding is one break, gap or signature failure with its stable key.
type finding struct {
	kind     string
	key      string
	sequence int64 // the event the finding is attached to (sorting)
	detail   any   // api.HealBreak, api.HealGap or api.HealSignatureFailure
}

func breakKey(b api.HealBreak) string {
	return fmt.Sprintf("break:%d:%s:%s:%s", b.Sequence, b.EventID, strOrNull(b.ExpectedPrevHash), strOrNull(b.FoundPrevHash))
}

func gapKey(g api.HealGap) string {
	after := "null"
	if g.AfterSequence != nil {
		after = fmt.Sprint(*g.AfterSequence)
	}
	return fmt.Sprintf("gap:%s:%d:%d", after, g.MissingFrom, g.MissingTo)
}

func signatureKey(f api.HealSignatureFailure, payloadHash string) string {
	return fmt.Sprintf("signature_failure:%d:%s:%s", f.Sequence, f.EventID, payloadHash)
}

func strOrNull(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// HealScan answers POST /v1/heal/scan. It writes nothing.
func (a *App) HealScan(ctx context.Context, p Principal, machineID *string) (api.HealScan, error) {
	res, _, err := a.scan(ctx, p.UserID, machineID)
	if err != nil {
		return api.HealScan{}, err
	}
	a.heal.setScan(p.UserID, res)
	return res, nil
}

// keyRing answers which of a machine's keys is in force at a leaf.
type keyRing map[string][]ringKey

type ringKey struct {
	fromLeaf int64
	pub      ed25519.PublicKey // nil: the stored key does not parse (every signature fails)
}

func (r keyRing) at(machine string, leaf int64) (ringKey, bool) {
	ks := r[machine]
	i, _ := slices.BinarySearchFunc(ks, leaf+1, func(k ringKey, t int64) int {
		switch {
		case k.fromLeaf < t:
			return -1
		case k.fromLeaf > t:
			return 1
		}
		return 0
	})
	if i == 0 {
		return ringKey{}, false
	}
	return ks[i-1], true
}

// signedEvent is what the scan reports of an event whose signature fails.
type signedEvent struct {
	sequence  int64
	eventID   string
	machineID string
	payload   string // payload_hash, part of the finding key
	counted   bool   // the event already has a break or gap
}

// scan streams the chain once. The snapshot is the head read after the newest
// block: every event with sequence ≤ the head's, the stored tree of the head's
// size, and a block never larger than that.
func (a *App) scan(ctx context.Context, userID string, machineID *string) (api.HealScan, []finding, error) {
	if machineID != nil && *machineID == "" {
		return api.HealScan{}, nil, domain.Validation(domain.FieldError{Field: "machine_id", Message: "must not be empty; null scans every machine"})
	}
	res := api.HealScan{Breaks: []api.HealBreak{}, Gaps: []api.HealGap{}, SignatureFailures: []api.HealSignatureFailure{}, MerkleRootStatus: RootOK,
		MachineID: machineID, UserID: userID}
	block, err := a.store.LastBlock(ctx, nil, userID)
	hasBlock := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return res, nil, err
	}
	head, err := a.store.Head(ctx, userID)
	if err != nil {
		return res, nil, err
	}
	rootDetail := ""
	mismatch := func(format string, args ...any) {
		if rootDetail == "" {
			rootDetail = fmt.Sprintf(format, args...)
		}
	}
	// The newest block must be the service's, for this account; its root is
	// compared with the events' root at its size while streaming.
	var blockSize uint64
	var blockRoot verify.Hash
	if hasBlock {
		bv, err := verify.NewBlockVerifier(verify.Origin(userID), a.ServicePublicKey())
		if err != nil {
			return res, nil, err
		}
		if cp, err := bv.Next(block.Index, block.Note); err != nil {
			mismatch("the newest block %d does not verify: %v", block.Index, err)
		} else {
			blockSize, blockRoot = cp.Size, cp.Root
		}
	}

	stored, err := a.store.SigningKeys(ctx, userID)
	if err != nil {
		return res, nil, err
	}
	ring := keyRing{}
	for _, k := range stored { // ordered by from_leaf
		pub, _ := verify.ParsePublicKey(k.PublicKey)
		ring[k.MachineID] = append(ring[k.MachineID], ringKey{fromLeaf: k.FromLeaf, pub: pub})
	}

	var findings []finding
	var flagged int64 // events in scope with a finding
	inScope := func(e *store.Event) bool {
		return machineID == nil || (e.MachineID != nil && *e.MachineID == *machineID)
	}

	// Signatures are verified by a pool, so a signed chain scans on every
	// core. Failures come back in the order the workers found them; the scan
	// sorts every finding by sequence (unique per account) at the end.
	var sigs *verify.SignatureChecks[signedEvent]
	var sigMu sync.Mutex
	var sigFailed []signedEvent // complete once stopSigs returned
	stopSigs := func() {
		if sigs != nil {
			sigs.Close()
			sigs = nil
		}
	}
	if len(ring) > 0 {
		workers := runtime.GOMAXPROCS(0)
		sigs = verify.NewSignatureChecks(workers, func(e signedEvent) {
			sigMu.Lock()
			sigFailed = append(sigFailed, e)
			sigMu.Unlock()
		})
		sigs.Start(workers)
		defer stopSigs()
	}

	// The Merkle root is recomputed while streaming, in sequence order,
	// which is leaf order unless a batch stored rows below the tip; then a
	// second pass reads the events in leaf order for the root (leafOrderRoot).
	frontier, _ := verify.NewFrontier(0, nil)
	inLeafOrder := true
	tipLeaf := int64(-1) // the leaf of the last event stored at the tip
	var (
		pos      int64
		prevSeq  int64
		prevHash string
		scratch  []byte
		want     [len(verify.HashPrefix) + 64]byte
	)
	copy(want[:], verify.HashPrefix)
	err = a.store.EventsBySequence(ctx, userID, head.LastSequence, func(e *store.Event) error {
		scope := inScope(e)
		counted := false
		add := func(f finding) {
			if scope {
				findings = append(findings, f)
				if !counted {
					counted = true
					flagged++
				}
			}
		}
		if scope {
			res.TotalEvents++
		}
		// Continuity. A link is judged only between adjacent sequence
		// numbers: across a hole the previous event is missing, and the
		// hole itself is the finding.
		switch {
		case pos == 0 && e.Sequence > 0:
			g := api.HealGap{MissingFrom: 0, MissingTo: e.Sequence - 1}
			add(finding{kind: FindingGap, key: gapKey(g), sequence: e.Sequence, detail: g})
		case pos == 0:
			if e.PrevHash != nil {
				b := api.HealBreak{Sequence: e.Sequence, EventID: e.EventID, FoundPrevHash: e.PrevHash}
				add(finding{kind: FindingBreak, key: breakKey(b), sequence: e.Sequence, detail: b})
			}
		case e.Sequence > prevSeq+1:
			after := prevSeq
			g := api.HealGap{AfterSequence: &after, MissingFrom: prevSeq + 1, MissingTo: e.Sequence - 1}
			add(finding{kind: FindingGap, key: gapKey(g), sequence: e.Sequence, detail: g})
		case e.PrevHash == nil || *e.PrevHash != prevHash:
			expected := prevHash
			b := api.HealBreak{Sequence: e.Sequence, EventID: e.EventID, ExpectedPrevHash: &expected, FoundPrevHash: e.PrevHash}
			add(finding{kind: FindingBreak, key: breakKey(b), sequence: e.Sequence, detail: b})
		}
		// Signature against the machine's key in force at the event's leaf.
		if e.MachineID != nil && sigs != nil {
			if k, ok := ring.at(*e.MachineID, e.LeafIndex); ok {
				if e.Signature == nil {
					f := api.HealSignatureFailure{Sequence: e.Sequence, EventID: e.EventID, MachineID: *e.MachineID, Reason: "missing"}
					add(finding{kind: FindingSignature, key: signatureKey(f, e.PayloadHash), sequence: e.Sequence, detail: f})
				} else if scope { // findings outside the machine filter are not reported
					sigs.Submit(k.pub, e.Raw, *e.Signature, signedEvent{sequence: e.Sequence, eventID: e.EventID,
						machineID: *e.MachineID, payload: e.PayloadHash, counted: counted})
				}
			}
		}
		// The Merkle leaf: the payload_hash recomputed from the stored fields.
		var h verify.Hash
		var herr error
		scratch, h, herr = verify.EventHash(hashedOf(e), scratch)
		hex.Encode(want[len(verify.HashPrefix):], h[:])
		switch {
		case herr != nil:
			mismatch("the event at sequence %d cannot be canonicalised: %v", e.Sequence, herr)
		case string(want[:]) != e.PayloadHash:
			mismatch("the event at sequence %d does not hash to its stored payload_hash", e.Sequence)
		case !e.BelowTip && e.LeafIndex <= tipLeaf:
			// Events stored at the tip take leaves in sequence order (the
			// leaf-order reads rely on it); only a row a batch stored below
			// the tip may sit at a later leaf than a higher sequence.
			mismatch("the event at sequence %d is stored at leaf %d, before the leaf %d of a lower sequence stored at the tip",
				e.Sequence, e.LeafIndex, tipLeaf)
		case e.LeafIndex != pos:
			inLeafOrder = false
		}
		if !e.BelowTip {
			tipLeaf = max(tipLeaf, e.LeafIndex)
		}
		frontier.Append(verify.LeafHash(h[:]))
		pos++
		if inLeafOrder && blockSize > 0 && frontier.Size() == blockSize && frontier.Root() != blockRoot {
			mismatch("the newest block signs root %s at size %d; the events give %s", blockRoot, blockSize, frontier.Root())
		}
		prevSeq, prevHash = e.Sequence, e.PayloadHash
		return nil
	})
	stopSigs()
	if err != nil {
		return res, nil, err
	}
	if !inLeafOrder {
		if frontier, err = a.leafOrderRoot(ctx, userID, head.EventCount, blockSize, blockRoot, mismatch); err != nil {
			return res, nil, err
		}
	}

	// The whole tree: as many events as the head counts, and the stored
	// tree's root equal to the events' root.
	switch {
	case pos != head.EventCount:
		mismatch("the chain head counts %d events; %d are stored up to its sequence", head.EventCount, pos)
	case blockSize > uint64(pos):
		mismatch("the newest block covers %d events; %d are stored", blockSize, pos)
	default:
		// The root reads only hashes below the tree's size: hashes stored
		// past it (written behind the store's back) show in where it ends.
		end, err := a.store.StoredTreeEnd(ctx, userID)
		if err != nil {
			return res, nil, err
		}
		if want := merkle.StoredHashCount(head.EventCount); end > want {
			mismatch("the stored Merkle tree holds hashes up to index %d, past the %d of its %d leaves", end-1, want, head.EventCount)
			break
		}
		if pos == 0 {
			break
		}
		root, err := merkle.Root(head.EventCount, a.store.HashReader(ctx, nil, userID))
		switch {
		case errors.Is(err, store.ErrMissingHash) || errors.Is(err, store.ErrMalformedHash):
			mismatch("the stored Merkle tree is incomplete or malformed: %v", err)
		case err != nil:
			return res, nil, err
		case root != frontier.Root():
			mismatch("the stored tree's root %s differs from the events' root %s", root, frontier.Root())
		}
	}

	for _, j := range sigFailed {
		f := api.HealSignatureFailure{Sequence: j.sequence, EventID: j.eventID, MachineID: j.machineID, Reason: "invalid"}
		findings = append(findings, finding{kind: FindingSignature, key: signatureKey(f, j.payload), sequence: f.Sequence, detail: f})
		if !j.counted {
			flagged++
		}
	}
	slices.SortStableFunc(findings, func(x, y finding) int {
		if x.sequence != y.sequence {
			return cmp.Compare(x.sequence, y.sequence)
		}
		return cmp.Compare(kindOrder(x.kind), kindOrder(y.kind))
	})
	for _, f := range findings {
		switch d := f.detail.(type) {
		case api.HealBreak:
			res.Breaks = append(res.Breaks, d)
		case api.HealGap:
			res.Gaps = append(res.Gaps, d)
		case api.HealSignatureFailure:
			res.SignatureFailures = append(res.SignatureFailures, d)
		}
	}
	if rootDetail != "" {
		res.MerkleRootStatus, res.MerkleRootDetail = RootMismatch, &rootDetail
	}
	res.Verified = res.TotalEvents - flagged
	res.Clean = len(findings) == 0 && res.MerkleRootStatus == RootOK
	res.ScannedAt = domain.FormatTimestamp(a.now())
	return res, findings, nil
}

// leafOrderRoot is the events' tree in leaf order, for a chain whose leaf
// order is not its sequence order (rows a batch stored below the tip): it
// reads the first n leaves' events in leaf order, checking that each sits at
// its stored leaf position, and the newest block's root at its size.
func (a *App) leafOrderRoot(ctx context.Context, userID string, n int64, blockSize uint64, blockRoot verify.Hash,
	mismatch func(string, ...any)) (*verify.Frontier, error) {
	frontier, _ := verify.NewFrontier(0, nil)
	errStop := errors.New("stop")
	err := a.store.EventsFrom(ctx, userID, 0, func(e *store.Event) error {
		if int64(frontier.Size()) == n {
			return errStop
		}
		if e.LeafIndex != int64(frontier.Size()) {
			mismatch("the event at sequence %d is stored at leaf %d; in leaf order it is leaf %d", e.Sequence, e.LeafIndex, frontier.Size())
		}
		h, err := verify.HashBytes(e.PayloadHash)
		if err != nil {
			mismatch("the event at sequence %d has a malformed payload_hash", e.Sequence)
			return errStop
		}
		frontier.Append(verify.LeafHash(h))
		if blockSize > 0 && frontier.Size() == blockSize && frontier.Root() != blockRoot {
			mismatch("the newest block signs root %s at size %d; the events give %s", blockRoot, blockSize, frontier.Root())
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	return frontier, nil
}

func kindOrder(k string) int64 {
	switch k {
	case FindingGap:
		return 0
	case FindingBreak:
		return 1
	}
	return 2
}
