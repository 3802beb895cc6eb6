package console

// The export panel: the account's chain as GET /v1/chain/export writes it
// (pkg/verify's format), the service's public key as GET
// /v1/delegation/public-key answers it, and the command that checks the one
// against the other offline, with nothing from this server.

import (
	"net/http"

	"github.com/auditchain/auditchain/pkg/api"
)

// Names the downloads are saved under, as the verify command names them.
const (
	exportFile    = "auditchain-export.ndjson"
	publicKeyFile = "auditchain-public-key.json"
)

type exportPage struct {
	Tip        api.ChainTip
	ExportFile string
	KeyFile    string
	KeyID      string
	Connect    connectHelp
}

func (c *Console) export(w http.ResponseWriter, r *http.Request) error {
	tip, err := c.App.ChainTip(r.Context(), viewerOf(r).Principal)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "export", "Export", exportPage{Tip: tip, ExportFile: exportFile, KeyFile: publicKeyFile,
		KeyID: c.App.ServiceKeyID(), Connect: connect(r)})
	return nil
}

// exportDownload streams the whole chain, as GET /v1/chain/export does: the
// tip is sealed and the range checked before the first byte, so a refusal is
// still a page; a failure after it breaks the transfer, so the verifier sees
// a truncated export rather than a short one that looks whole.
func (c *Console) exportDownload(w http.ResponseWriter, r *http.Request) error {
	x, err := c.App.PrepareExport(r.Context(), viewerOf(r).Principal, nil, nil)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="`+exportFile+`"`)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := x.WriteTo(r.Context(), w); err != nil {
		c.Log.ErrorContext(r.Context(), "console export failed", "err", err.Error())
		panic(http.ErrAbortHandler)
	}
	return nil
}

// exportPublicKey is GET /v1/delegation/public-key's document as a file:
// `auditchain verify export --service-key` takes it as is.
func (c *Console) exportPublicKey(w http.ResponseWriter, r *http.Request) error {
	b, err := api.Marshal(c.App.DelegationKey())
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", `attachment; filename="`+publicKeyFile+`"`)
	w.Write(b)
	return nil
}
