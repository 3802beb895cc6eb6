package httpapi

// Integrity routes (CONTRACT.md "Integrity", docs/integrity.md): chain blocks,
// chain verification, inclusion and consistency proofs, and the export.
// Hashes are standard base64 (verify.Hash), as in checkpoints and exports.

import (
	"net/http"
	"strconv"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// blockOf is a chain block as the API shows it (nil for none); created_at
// keeps encoding/json's form of a time.
func blockOf(b *store.BlockRow) *api.Block {
	if b == nil {
		return nil
	}
	out := &api.Block{Index: b.Index, TreeSize: int64(b.Size), RootHash: b.Root.String(), BlockHash: b.Hash.String(),
		Note: string(b.Note), CreatedAt: time.UnixMicro(b.CreatedAt).UTC().Format(time.RFC3339Nano)}
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

// queryInt reads an optional non-negative integer query parameter; a present
// but unreadable value is a 400 with code and the parameter's name.
func queryInt(r *http.Request, name, code string) (*int64, error) {
	if !r.URL.Query().Has(name) {
		return nil, nil
	}
	v, err := strconv.ParseInt(r.URL.Query().Get(name), 10, 64)
	if err != nil || v < 0 {
		return nil, (&domain.Error{Code: code,
			Detail: name + " must be a non-negative integer"}).With("param", name)
	}
	return &v, nil
}

func (s *Server) chainBlocks(w http.ResponseWriter, r *http.Request) error {
	cursor, err := queryInt(r, "cursor", app.CodeInvalidCursor)
	if err != nil {
		return err
	}
	limit := int64(app.DefBlockPage)
	if l, err := queryInt(r, "limit", app.CodeInvalidLimit); err != nil {
		return err
	} else if l != nil {
		if *l < 1 || *l > app.MaxBlockPage {
			return (&domain.Error{Code: app.CodeInvalidLimit,
				Detail: "limit must be between 1 and 1000"}).With("param", "limit")
		}
		limit = *l
	}
	var from int64
	if cursor != nil {
		from = *cursor
	}
	p := principal(r)
	page, err := s.app.Blocks(r.Context(), p, from, int(limit))
	if err != nil {
		return err
	}
	out := api.BlockPage{Count: len(page.Blocks), Blocks: make([]api.Block, len(page.Blocks)), NextCursor: page.NextCursor,
		Origin: verify.Origin(p.UserID), ServiceKeyID: s.app.ServiceKeyID(), UserID: p.UserID}
	for i := range page.Blocks {
		out.Blocks[i] = *blockOf(&page.Blocks[i])
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) chainVerify(w http.ResponseWriter, r *http.Request) error {
	v, err := s.app.VerifyChain(r.Context(), principal(r))
	if err != nil {
		return err
	}
	out := api.ChainVerification{Valid: v.Valid, Blocks: v.Blocks, FirstBadBlock: v.FirstBadBlock, TreeSize: v.TreeSize}
	if !v.Valid {
		out.Reason, out.Detail = &v.Reason, &v.Detail
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) inclusionProof(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("event_id")
	if id == "" {
		return (&domain.Error{Code: app.CodeInvalidEventID,
			Detail: "event_id is required: the event to prove"}).With("param", "event_id")
	}
	size, err := queryInt(r, "tree_size", app.CodeInvalidTreeSize)
	if err != nil {
		return err
	}
	p := principal(r)
	pr, err := s.app.InclusionProof(r.Context(), p, id, size)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.InclusionProof{EventID: pr.Event.EventID, Sequence: pr.Event.Sequence,
		LeafIndex: pr.Event.LeafIndex, PayloadHash: pr.Event.PayloadHash, LeafHash: pr.LeafHash.String(),
		TreeSize: pr.TreeSize, Proof: hashStrings(pr.Proof), RootHash: pr.Root.String(), Checkpoint: blockOf(pr.Block),
		Origin: verify.Origin(p.UserID)})
}

func (s *Server) consistencyProof(w http.ResponseWriter, r *http.Request) error {
	first, err := queryInt(r, "first", app.CodeInvalidTreeSize)
	if err != nil {
		return err
	}
	if first == nil {
		return (&domain.Error{Code: app.CodeInvalidTreeSize,
			Detail: "first is required: the smaller tree size"}).With("param", "first")
	}
	second, err := queryInt(r, "second", app.CodeInvalidTreeSize)
	if err != nil {
		return err
	}
	p := principal(r)
	pr, err := s.app.ConsistencyProof(r.Context(), p, *first, second)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.ConsistencyProof{First: pr.First, Second: pr.Second, Proof: hashStrings(pr.Proof),
		FirstRoot: pr.FirstRoot.String(), SecondRoot: pr.SecondRoot.String(), FirstCheckpoint: blockOf(pr.FirstBlock),
		SecondCheckpoint: blockOf(pr.SecondBlock), Origin: verify.Origin(p.UserID)})
}

func (s *Server) chainExport(w http.ResponseWriter, r *http.Request) error {
	from, err := queryInt(r, "from", app.CodeInvalidRange)
	if err != nil {
		return err
	}
	to, err := queryInt(r, "to", app.CodeInvalidRange)
	if err != nil {
		return err
	}
	x, err := s.app.PrepareExport(r.Context(), principal(r), from, to)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="auditchain-export.ndjson"`)
	w.WriteHeader(http.StatusOK)
	if err := x.WriteTo(r.Context(), w); err != nil {
		// Too late for a problem: break the response so the client sees a
		// failed transfer, and the verifier a truncated export.
		s.log.ErrorContext(r.Context(), "export failed", "err", err.Error())
		panic(http.ErrAbortHandler)
	}
	return nil
}
