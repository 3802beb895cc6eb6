package httpapi

// Integrity routes (CONTRACT.md "Integrity", docs/integrity.md): chain blocks,
// chain verification, inclusion and consistency proofs, and the export.
// Hashes are standard base64 (verify.Hash), as in checkpoints and exports.

import (
	"net/http"
	"strconv"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
)

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
	page, err := s.app.Blocks(r.Context(), principal(r), from, int(limit))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}

func (s *Server) chainVerify(w http.ResponseWriter, r *http.Request) error {
	v, err := s.app.VerifyChain(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
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
	pr, err := s.app.InclusionProof(r.Context(), principal(r), id, size)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, pr)
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
	pr, err := s.app.ConsistencyProof(r.Context(), principal(r), *first, second)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, pr)
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
