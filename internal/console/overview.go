package console

// The overview / integrity panel: what "verified" means right now, in words
// and numbers (issue #37), from the read use cases the API's routes use.

import (
	"encoding/base64"
	"net/http"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/pkg/api"
)

type overviewPage struct {
	Now        time.Time
	Tip        api.ChainTip
	Checkpoint *api.Block
	// CheckpointAt is the checkpoint's created_at, parsed.
	CheckpointAt     time.Time
	ServiceKeyID     string
	ServicePublicKey string
	Heal             api.HealStatus
	Anchor           *app.AnchorReceipt
	AnchorProvider   string
	Usage            api.Usage
	Connect          connectHelp
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) error {
	p := viewerOf(r).Principal
	ctx := r.Context()
	tip, err := c.App.ChainTip(ctx, p)
	if err != nil {
		return err
	}
	o := overviewPage{Now: c.App.Now(), Tip: tip, ServiceKeyID: c.App.ServiceKeyID(),
		ServicePublicKey: base64.StdEncoding.EncodeToString(c.App.ServicePublicKey()),
		Heal:             c.App.HealStatus(p), AnchorProvider: c.App.AnchorProvider(), Connect: connect(r)}
	if tip.EventCount > 0 {
		if o.Checkpoint, err = c.App.LatestCheckpoint(ctx, p); err != nil {
			return err
		}
		if o.Checkpoint != nil {
			o.CheckpointAt = parseTS(o.Checkpoint.CreatedAt)
		}
		if o.Anchor, err = c.App.LastAnchor(ctx, p); err != nil {
			return err
		}
	}
	// Today's figures only: no count that grows with the account's grants.
	if o.Usage, err = c.App.UsageToday(ctx, p); err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "overview", "Overview", o)
	return nil
}
