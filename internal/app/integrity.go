package app

// Integrity use cases (CONTRACT.md "Integrity", docs/integrity.md): sealing
// chain blocks, verifying them, inclusion and consistency proofs, and the
// export that pkg/verify checks offline.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/checkpoint"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// BlockEvery is the sealing boundary: whenever blocks are sealed, every
// multiple of BlockEvery the tree passed since the last block gets its own
// block, so block sizes do not depend on when anyone asked (docs/integrity.md
// "Sealing policy").
const BlockEvery = 1000

// Error codes of the integrity routes (docs/integrity.md "Errors").
const (
	CodeInvalidTreeSize = "invalid_tree_size" // 400: a size that is not an integer or is outside the tree
	CodeInvalidRange    = "invalid_range"     // 400: export from/to not integers or outside [0, tree size]
	CodeInvalidEventID  = "invalid_event_id"  // 400: inclusion proof without event_id
	CodeInvalidCursor   = "invalid_cursor"    // 400: blocks cursor not a non-negative integer
	CodeInvalidLimit    = "invalid_limit"     // 400: blocks limit outside 1..1000
)

func badParam(code, param, format string, a ...any) error {
	return (&domain.Error{Code: code, Detail: fmt.Sprintf(format, a...)}).With("param", param)
}

// Seal makes sure the account's tree is covered by a block: if it grew since
// the last block, it seals one block at every multiple of BlockEvery passed
// and one at the tip, under the account's head lock (so two replicas never
// seal the same index: the second sees the first's blocks). It returns the
// newest block; ok is false for an empty chain.
func (a *App) Seal(ctx context.Context, userID string) (last store.BlockRow, ok bool, err error) {
	head, err := a.store.Head(ctx, userID)
	if err != nil || head.EventCount == 0 {
		return store.BlockRow{}, false, err
	}
	last, err = a.store.LastBlock(ctx, nil, userID)
	if err == nil && int64(last.Size) >= head.EventCount {
		return last, true, nil
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.BlockRow{}, false, err
	}
	signer, err := checkpoint.NewSigner(verify.Origin(userID), a.serviceKey)
	if err != nil {
		return store.BlockRow{}, false, err
	}
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		h, err := t.Lock(ctx, userID)
		if err != nil {
			return err
		}
		var prev *checkpoint.Block
		var from int64
		switch row, err := a.store.LastBlock(ctx, t.SQL(), userID); {
		case err == nil:
			last, prev, from = row, &row.Block, int64(row.Size)
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		r := a.store.HashReader(ctx, t.SQL(), userID)
		now := a.now().UnixMicro()
		for _, size := range sealSizes(from, h.EventCount) {
			root, err := merkle.Root(size, r)
			if err != nil {
				return err
			}
			b, err := signer.Seal(prev, uint64(size), root)
			if err != nil {
				return err
			}
			row := store.BlockRow{Block: b, CreatedAt: now}
			if err := a.store.InsertBlock(ctx, t.SQL(), userID, row); err != nil {
				return fmt.Errorf("seal block %d: %w", b.Index, err)
			}
			last, prev = row, &row.Block
		}
		return nil
	})
	return last, err == nil, err
}

// sealSizes lists the block sizes to seal after a block of size from when
// the tree has n leaves: each multiple of BlockEvery in (from, n), then n.
func sealSizes(from, n int64) []int64 {
	if n <= from {
		return nil
	}
	var out []int64
	for k := (from/BlockEvery + 1) * BlockEvery; k < n; k += BlockEvery {
		out = append(out, k)
	}
	return append(out, n)
}

// MaxBlockPage bounds GET /v1/chain/blocks?limit.
const (
	MaxBlockPage = 1000
	DefBlockPage = 100
)

// Blocks lists the account's blocks from index cursor on, sealing the tip first.
func (a *App) Blocks(ctx context.Context, p Principal, cursor int64, limit int) (api.BlockPage, error) {
	if _, _, err := a.Seal(ctx, p.UserID); err != nil {
		return api.BlockPage{}, err
	}
	bs, err := a.store.Blocks(ctx, p.UserID, cursor, limit+1)
	if err != nil {
		return api.BlockPage{}, err
	}
	page := api.BlockPage{Origin: verify.Origin(p.UserID), ServiceKeyID: a.ServiceKeyID(), UserID: p.UserID}
	if len(bs) > limit {
		next := bs[limit].Index
		page.NextCursor = &next
		bs = bs[:limit]
	}
	page.Count, page.Blocks = len(bs), make([]api.Block, len(bs))
	var cosigs map[int64][]string
	if len(bs) > 0 {
		if cosigs, err = a.cosignatures(ctx, p.UserID, bs[0].Index, bs[len(bs)-1].Index); err != nil {
			return api.BlockPage{}, err
		}
	}
	for i := range bs {
		page.Blocks[i] = *blockView(&bs[i], cosigs[bs[i].Index])
	}
	return page, nil
}

// cosignatures returns the witnesses' cosignature lines on the account's
// blocks with index in [from, to], by index (docs/integrity.md "Witnesses").
func (a *App) cosignatures(ctx context.Context, userID string, from, to int64) (map[int64][]string, error) {
	cs, err := a.store.Cosignatures(ctx, userID, from, to)
	if err != nil {
		return nil, err
	}
	out := make(map[int64][]string, len(cs))
	for b, list := range cs {
		for _, c := range list {
			out[b] = append(out[b], c.Signature)
		}
	}
	return out, nil
}

// blockView is a chain block as the API shows it (nil for none), with the
// witnesses' cosignature lines on it; created_at keeps encoding/json's form
// of a time.
func blockView(b *store.BlockRow, cosignatures []string) *api.Block {
	if b == nil {
		return nil
	}
	if cosignatures == nil {
		cosignatures = []string{}
	}
	out := &api.Block{Index: b.Index, TreeSize: int64(b.Size), RootHash: b.Root.String(), BlockHash: b.Hash.String(),
		Note: string(b.Note), Cosignatures: cosignatures, CreatedAt: time.UnixMicro(b.CreatedAt).UTC().Format(time.RFC3339Nano)}
	if b.PrevHash != nil {
		out.PrevBlockHash = new(b.PrevHash.String())
	}
	return out
}

// hashStrings is hs in their API form (standard base64).
func hashStrings(hs []verify.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.String()
	}
	return out
}

// Reasons GET /v1/chain/verify reports for its first bad block. The first
// three are verify.Kind values, as the offline verifier names them.
const (
	ReasonCheckpointSignature = string(verify.KindCheckpointSignature) // not signed by the service key
	ReasonCheckpointOrigin    = string(verify.KindCheckpointOrigin)    // signed for another account
	ReasonBlockLink           = string(verify.KindBlockLink)           // prev link, index or size order broken
	ReasonBlockRow            = "block_row"                            // stored columns disagree with the signed note
	ReasonStoredTree          = "stored_tree"                          // stored Merkle rows do not give the signed root
	ReasonMerkleRoot          = string(verify.KindMerkleRoot)          // the events do not give the signed root
)

// VerifyChain seals the tip, then rechecks every block in order: its service
// signature, origin and prev link (verify.BlockVerifier), its stored columns,
// its root against the stored Merkle tree, and its root against a tree rebuilt
// from the events themselves — each payload_hash recomputed from the stored
// fields — streamed in leaf order with constant memory. A changed, deleted or
// reordered event row therefore fails at the first block covering it. Blocks
// counts the blocks that verified (all of them when Valid); TreeSize is the
// size of the newest block, which covers the whole chain.
func (a *App) VerifyChain(ctx context.Context, p Principal) (api.ChainVerification, error) {
	last, ok, err := a.Seal(ctx, p.UserID)
	if err != nil || !ok {
		return api.ChainVerification{Valid: true}, err
	}
	res := api.ChainVerification{Valid: true, TreeSize: int64(last.Size)}
	bv, err := verify.NewBlockVerifier(verify.Origin(p.UserID), a.ServicePublicKey())
	if err != nil {
		return res, err
	}
	stored := a.store.HashReader(ctx, nil, p.UserID)
	rebuilt, _ := verify.NewFrontier(0, nil)
	var streamErr error
	next, stop := iter.Pull(a.events(ctx, p.UserID, 0, int64(last.Size), &streamErr))
	defer stop()
	var suspect string // the first event whose own fields disagree with what was stored

	errStop := errors.New("stop")
	err = a.store.BlocksFrom(ctx, p.UserID, 0, func(b *store.BlockRow) error {
		if b.Index > last.Index {
			return errStop
		}
		fail := func(reason, format string, args ...any) error {
			i := b.Index
			res.Valid, res.FirstBadBlock, res.Reason, res.Detail = false, &i, &reason, new(fmt.Sprintf(format, args...))
			return errStop
		}
		if b.Index != res.Blocks { // BlockVerifier lets a fragment start anywhere; the stored chain starts at 0
			missing := res.Blocks
			res.Valid, res.FirstBadBlock, res.Reason = false, &missing, new(ReasonBlockLink)
			res.Detail = new(fmt.Sprintf("block %d is missing; the next stored block is %d", missing, b.Index))
			return errStop
		}
		cp, err := bv.Next(b.Index, b.Note)
		if err != nil {
			var ve *verify.Error
			if errors.As(err, &ve) {
				return fail(string(ve.Kind), "%v", ve.Err)
			}
			return err
		}
		if cp.Size != b.Size || cp.Root != b.Root || verify.BlockHash(b.Note) != b.Hash ||
			(cp.Prev == nil) != (b.PrevHash == nil) || (cp.Prev != nil && *cp.Prev != *b.PrevHash) {
			return fail(ReasonBlockRow, "the stored size, root, prev or block hash of block %d differ from its signed note", b.Index)
		}
		root, err := merkle.Root(int64(cp.Size), stored)
		if errors.Is(err, store.ErrMissingHash) || errors.Is(err, store.ErrMalformedHash) {
			return fail(ReasonStoredTree, "stored Merkle rows for size %d are missing or malformed: %v", cp.Size, err)
		}
		if err != nil {
			return err
		}
		if root != cp.Root {
			return fail(ReasonStoredTree, "signed root %s at size %d, stored tree gives %s", cp.Root, cp.Size, root)
		}
		for rebuilt.Size() < cp.Size {
			e, ok := next()
			if !ok {
				if streamErr != nil {
					return streamErr
				}
				return fail(ReasonMerkleRoot, "block %d covers %d events, only %d are stored", b.Index, cp.Size, rebuilt.Size())
			}
			h, err := verify.PayloadHash(hashedOf(e))
			if err != nil {
				h = "" // cannot be canonicalised: cannot be the stored leaf either
			}
			if suspect == "" && (h != e.PayloadHash || e.LeafIndex != int64(rebuilt.Size())) {
				suspect = fmt.Sprintf("; first suspect event: sequence %d at leaf position %d (stored leaf_index %d)", e.Sequence, rebuilt.Size(), e.LeafIndex)
			}
			leaf, err := verify.HashBytes(h)
			if err != nil {
				leaf = make([]byte, merkle.LeafSize) // an unhashable event: a leaf no honest tree has
			}
			rebuilt.Append(verify.LeafHash(leaf))
		}
		if got := rebuilt.Root(); got != cp.Root {
			return fail(ReasonMerkleRoot, "signed root %s at size %d, the stored events give %s%s", cp.Root, cp.Size, got, suspect)
		}
		res.Blocks++
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return res, err
	}
	if streamErr != nil {
		return res, streamErr
	}
	return res, nil
}

// events is the account's events with leaf_index in [from, to) as an iterator
// (for iter.Pull beside the block stream); a store error lands in *errp.
func (a *App) events(ctx context.Context, userID string, from, to int64, errp *error) iter.Seq[*store.Event] {
	return func(yield func(*store.Event) bool) {
		errStop := errors.New("stop")
		err := a.store.EventsRange(ctx, userID, from, to, func(e *store.Event) error {
			if !yield(e) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			*errp = err
		}
	}
}

// InclusionProof proves the event is leaf LeafIndex of the tree of treeSize
// (nil: the newest block's size, sealing the tip first). Its checkpoint is
// the block of exactly that size, whose signed note signs the root; nil when
// the caller asked for a size no block has.
func (a *App) InclusionProof(ctx context.Context, p Principal, eventID string, treeSize *int64) (api.InclusionProof, error) {
	last, _, err := a.Seal(ctx, p.UserID)
	if err != nil {
		return api.InclusionProof{}, err
	}
	e, err := a.store.EventByID(ctx, nil, p.UserID, eventID)
	if errors.Is(err, store.ErrNotFound) {
		return api.InclusionProof{}, domain.NotFound(domain.CodeEventNotFound, "event "+eventID)
	}
	if err != nil {
		return api.InclusionProof{}, err
	}
	size := int64(last.Size)
	if treeSize != nil {
		head, err := a.store.Head(ctx, p.UserID)
		if err != nil {
			return api.InclusionProof{}, err
		}
		if *treeSize <= e.LeafIndex || *treeSize > head.EventCount {
			return api.InclusionProof{}, badParam(CodeInvalidTreeSize, "tree_size",
				"tree_size must be above the event's leaf_index %d and at most the tree size %d", e.LeafIndex, head.EventCount)
		}
		size = *treeSize
	}
	if size <= e.LeafIndex { // appended after the seal above; cannot happen for a stored event, but never prove outside the tree
		return api.InclusionProof{}, badParam(CodeInvalidTreeSize, "tree_size", "the event is not yet in a sealed tree; retry")
	}
	r := a.store.HashReader(ctx, nil, p.UserID)
	proof, err := merkle.InclusionProof(e.LeafIndex, size, r)
	if err != nil {
		return api.InclusionProof{}, err
	}
	root, err := merkle.Root(size, r)
	if err != nil {
		return api.InclusionProof{}, err
	}
	leaf, err := verify.HashBytes(e.PayloadHash)
	if err != nil {
		return api.InclusionProof{}, err
	}
	block, err := a.blockOfSize(ctx, p.UserID, size)
	if err != nil {
		return api.InclusionProof{}, err
	}
	return api.InclusionProof{EventID: e.EventID, Sequence: e.Sequence, LeafIndex: e.LeafIndex, PayloadHash: e.PayloadHash,
		LeafHash: verify.LeafHash(leaf).String(), TreeSize: size, Proof: hashStrings(proof), RootHash: root.String(),
		Checkpoint: block, Origin: verify.Origin(p.UserID)}, nil
}

// blockOfSize is the account's block of exactly size as the API shows it,
// with its cosignatures; nil when no block has that size.
func (a *App) blockOfSize(ctx context.Context, userID string, size int64) (*api.Block, error) {
	b, err := a.store.BlockBySize(ctx, userID, size)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cosigs, err := a.cosignatures(ctx, userID, b.Index, b.Index)
	if err != nil {
		return nil, err
	}
	return blockView(&b, cosigs[b.Index]), nil
}

// ConsistencyProof proves the tree of size first is a prefix of the tree of
// size second (nil: the newest block's size, sealing the tip first).
func (a *App) ConsistencyProof(ctx context.Context, p Principal, first int64, second *int64) (api.ConsistencyProof, error) {
	last, _, err := a.Seal(ctx, p.UserID)
	if err != nil {
		return api.ConsistencyProof{}, err
	}
	head, err := a.store.Head(ctx, p.UserID)
	if err != nil {
		return api.ConsistencyProof{}, err
	}
	n2 := int64(last.Size)
	if second != nil {
		if *second < 0 || *second > head.EventCount {
			return api.ConsistencyProof{}, badParam(CodeInvalidTreeSize, "second", "second must be between 0 and the tree size %d", head.EventCount)
		}
		n2 = *second
	}
	if first < 0 || first > n2 {
		return api.ConsistencyProof{}, badParam(CodeInvalidTreeSize, "first", "first must be between 0 and second (%d)", n2)
	}
	r := a.store.HashReader(ctx, nil, p.UserID)
	proof, err := merkle.ConsistencyProof(first, n2, r)
	if err != nil {
		return api.ConsistencyProof{}, err
	}
	firstRoot, err := merkle.Root(first, r)
	if err != nil {
		return api.ConsistencyProof{}, err
	}
	secondRoot, err := merkle.Root(n2, r)
	if err != nil {
		return api.ConsistencyProof{}, err
	}
	firstBlock, err := a.blockOfSize(ctx, p.UserID, first)
	if err != nil {
		return api.ConsistencyProof{}, err
	}
	secondBlock, err := a.blockOfSize(ctx, p.UserID, n2)
	if err != nil {
		return api.ConsistencyProof{}, err
	}
	return api.ConsistencyProof{First: first, Second: n2, Proof: hashStrings(proof), FirstRoot: firstRoot.String(),
		SecondRoot: secondRoot.String(), FirstCheckpoint: firstBlock, SecondCheckpoint: secondBlock,
		Origin: verify.Origin(p.UserID)}, nil
}

// Export is a prepared GET /v1/chain/export: the range is checked and the tip
// sealed before the first byte goes out, so errors can still be problems.
type Export struct {
	a          *App
	userID     string
	start, end int64
	// treeSize is the newest block's size when the export was prepared:
	// the tree the range is cut from.
	treeSize uint64
	// cosigs holds the cosignatures of blocks cosigFrom..cosigTo (writeCheckpoint).
	cosigs             map[int64][]string
	cosigFrom, cosigTo int64
}

// PrepareExport seals the tip and checks the leaf range [from, to) (nil: the
// whole chain as the newest block covers it).
func (a *App) PrepareExport(ctx context.Context, p Principal, from, to *int64) (*Export, error) {
	last, _, err := a.Seal(ctx, p.UserID)
	if err != nil {
		return nil, err
	}
	head, err := a.store.Head(ctx, p.UserID)
	if err != nil {
		return nil, err
	}
	x := &Export{a: a, userID: p.UserID, end: int64(last.Size), treeSize: last.Size}
	if to != nil {
		if *to < 0 || *to > head.EventCount {
			return nil, badParam(CodeInvalidRange, "to", "to must be between 0 and the tree size %d", head.EventCount)
		}
		x.end = *to
	}
	if from != nil {
		if *from < 0 || *from > x.end {
			return nil, badParam(CodeInvalidRange, "from", "from must be between 0 and to (%d)", x.end)
		}
		x.start = *from
	}
	return x, nil
}

// WriteTo streams the export (pkg/verify format) to w with constant memory:
// header, for a fragment the frontier and its anchor block, then events in
// leaf order with the machine keys before the events they govern and each
// block after the event that completes it, then the first block past the
// range, then the end line.
func (x *Export) WriteTo(ctx context.Context, w io.Writer) error {
	a, userID := x.a, x.userID
	r := a.store.HashReader(ctx, nil, userID)
	out, err := verify.NewExportWriter(w, verify.ExportHeader{UserID: userID, ServiceKeyID: a.ServiceKeyID(),
		ServicePublicKey: base64.StdEncoding.EncodeToString(a.ServicePublicKey()), Start: uint64(x.start),
		ExportedAt: a.now().UTC().Format(time.RFC3339Nano), TreeSize: &x.treeSize})
	if err != nil {
		return err
	}
	nextBlock := int64(0)
	if x.start > 0 {
		fr, err := merkle.Frontier(x.start, r)
		if err != nil {
			return err
		}
		llp, err := merkle.InclusionProof(x.start-1, x.start, r)
		if err != nil {
			return err
		}
		f := verify.ExportFrontier{TreeSize: uint64(x.start), Hashes: fr, LastLeafProof: llp}
		// The event at leaf start-1, whose payload_hash last_leaf_proof
		// proves: the verifier judges the fragment's links from it. A row
		// that is gone leaves the fields out (the fragment's lowest
		// sequence is then not linked; a full export shows the gap).
		switch last, err := a.store.EventAtLeaf(ctx, userID, x.start-1); {
		case err == nil:
			f.LastLeafSequence, f.LastLeafPayloadHash = &last.Sequence, &last.PayloadHash
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := out.WriteFrontier(f); err != nil {
			return err
		}
		// The anchor block: the last one at or below start, tied to the frontier.
		switch anchor, err := a.store.BlockAtOrBelow(ctx, userID, x.start); {
		case err == nil:
			if int64(anchor.Size) < x.start {
				proof, err := merkle.ConsistencyProof(int64(anchor.Size), x.start, r)
				if err != nil {
					return err
				}
				if err := out.WriteConsistency(verify.ExportConsistency{From: anchor.Size, To: uint64(x.start), Proof: proof}); err != nil {
					return err
				}
			}
			if err := x.writeCheckpoint(ctx, out, &anchor); err != nil {
				return err
			}
			nextBlock = anchor.Index + 1
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
	}

	keys, err := a.store.SigningKeys(ctx, userID)
	if err != nil {
		return err
	}
	keyLine := func(k store.SigningKey, effective int64) error {
		return out.WriteMachineKey(verify.ExportMachineKey{MachineID: k.MachineID, PublicKey: k.PublicKey,
			RegisteredAt: time.UnixMicro(k.RegisteredAt).UTC().Format(time.RFC3339Nano), EffectiveFromSequence: effective,
			EffectiveFromLeaf: k.FromLeaf})
	}
	// Keys registered before the range: in force from the sequence after the
	// event at leaf from_leaf-1 (the account's next sequence at registration).
	for len(keys) > 0 && keys[0].FromLeaf <= x.start {
		effective := int64(0)
		if keys[0].FromLeaf > 0 {
			prev, err := a.store.EventAtLeaf(ctx, userID, keys[0].FromLeaf-1)
			if err != nil {
				return fmt.Errorf("export: event before key of %s: %w", keys[0].MachineID, err)
			}
			effective = prev.Sequence + 1
		}
		if err := keyLine(keys[0], effective); err != nil {
			return err
		}
		keys = keys[1:]
	}

	var blockErr error
	nextB, stopB := iter.Pull(a.blocks(ctx, userID, nextBlock, &blockErr))
	defer stopB()
	pending, havePending := nextB()
	var prevSeq int64
	err = a.store.EventsRange(ctx, userID, x.start, x.end, func(e *store.Event) error {
		for len(keys) > 0 && keys[0].FromLeaf <= e.LeafIndex {
			if err := keyLine(keys[0], prevSeq+1); err != nil {
				return err
			}
			keys = keys[1:]
		}
		ev := verify.ExportEvent{HashedEvent: *hashedOf(e), PayloadHash: e.PayloadHash}
		if err := out.WriteEvent(&ev); err != nil {
			return err
		}
		prevSeq = e.Sequence
		// Blocks completed by this event. (A smaller one is left only when
		// rows are missing; it is written anyway, and the verifier reports
		// the gap it covers.)
		for havePending && int64(pending.Size) <= e.LeafIndex+1 {
			if err := x.writeCheckpoint(ctx, out, &pending); err != nil {
				return err
			}
			pending, havePending = nextB()
		}
		return nil
	})
	if err != nil {
		return err
	}
	if blockErr != nil {
		return blockErr
	}
	for havePending && int64(pending.Size) <= x.end { // only when trailing rows are missing
		if err := x.writeCheckpoint(ctx, out, &pending); err != nil {
			return err
		}
		pending, havePending = nextB()
	}
	// The first block past the range covers its tail with a signature.
	if havePending {
		proof, err := merkle.ConsistencyProof(x.end, int64(pending.Size), r)
		if err != nil {
			return err
		}
		if err := out.WriteConsistency(verify.ExportConsistency{From: uint64(x.end), To: pending.Size, Proof: proof}); err != nil {
			return err
		}
		if err := x.writeCheckpoint(ctx, out, &pending); err != nil {
			return err
		}
	}
	if blockErr != nil {
		return blockErr
	}
	return out.Close()
}

// cosignatureWindow is how many blocks' cosignatures an export reads at once.
const cosignatureWindow = 500

// writeCheckpoint writes block b's checkpoint line with the witnesses'
// cosignatures on it, read a window of blocks at a time (blocks are written
// in index order).
func (x *Export) writeCheckpoint(ctx context.Context, out *verify.ExportWriter, b *store.BlockRow) error {
	if x.cosigs == nil || b.Index < x.cosigFrom || b.Index > x.cosigTo {
		cs, err := x.a.cosignatures(ctx, x.userID, b.Index, b.Index+cosignatureWindow-1)
		if err != nil {
			return err
		}
		x.cosigs, x.cosigFrom, x.cosigTo = cs, b.Index, b.Index+cosignatureWindow-1
	}
	return out.WriteCheckpoint(b.Index, b.Note, x.cosigs[b.Index]...)
}

// blocks is the account's blocks from index from on, as an iterator.
func (a *App) blocks(ctx context.Context, userID string, from int64, errp *error) iter.Seq[store.BlockRow] {
	return func(yield func(store.BlockRow) bool) {
		errStop := errors.New("stop")
		err := a.store.BlocksFrom(ctx, userID, from, func(b *store.BlockRow) error {
			if !yield(*b) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			*errp = err
		}
	}
}

// LatestCheckpoint is the account's newest signed block as stored (nil
// when none is): what the console's overview shows as the last checkpoint.
// It reads and never seals: a page view writes nothing. The tip may be
// past it; a block covering it is sealed when a proof or the blocks are
// asked for (Seal).
func (a *App) LatestCheckpoint(ctx context.Context, p Principal) (*api.Block, error) {
	last, err := a.store.LastBlock(ctx, nil, p.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cosigs, err := a.cosignatures(ctx, p.UserID, last.Index, last.Index)
	if err != nil {
		return nil, err
	}
	return blockView(&last, cosigs[last.Index]), nil
}
