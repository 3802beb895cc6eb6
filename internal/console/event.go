package console

// An event's page: every stored field (raw included: the account's own data,
// as in the export), its neighbours on the chain, and its inclusion proof
// against the latest checkpoint, which assets/proof.js checks in the browser
// (RFC 6962 with WebCrypto SHA-256).

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/pkg/api"
)

type eventPage struct {
	Event     api.StoredEvent
	LeafIndex int64
	// Raw is raw indented for reading ("" when absent).
	Raw string
	// Prev and Next are the events just below and above in sequence
	// order; PrevLinked says Event.prev_hash names Prev's payload_hash.
	Prev, Next *api.Event
	PrevLinked bool
	Proof      api.InclusionProof
}

func (c *Console) event(w http.ResponseWriter, r *http.Request) error {
	p := viewerOf(r).Principal
	ctx := r.Context()
	id := r.PathValue("event_id")
	e, leaf, err := c.App.StoredEvent(ctx, p, id)
	if err != nil {
		return err
	}
	pg := eventPage{Event: e, LeafIndex: leaf}
	if len(e.Raw) > 0 {
		var buf bytes.Buffer
		if json.Indent(&buf, e.Raw, "", "  ") == nil {
			pg.Raw = buf.String()
		} else {
			pg.Raw = string(e.Raw)
		}
	}
	one := 1
	neighbour := func(cursor int64) (*api.Event, error) {
		evs, _, err := c.App.SearchEvents(ctx, p, app.EventQuery{SearchRequest: api.SearchRequest{Cursor: &cursor, Limit: &one}})
		if err != nil || len(evs) == 0 {
			return nil, err
		}
		return &evs[0], nil
	}
	if pg.Prev, err = neighbour(e.Sequence); err != nil {
		return err
	}
	pg.PrevLinked = pg.Prev != nil && e.PrevHash != nil && *e.PrevHash == pg.Prev.PayloadHash
	if nx, err := neighbour(e.Sequence + 2); err != nil {
		return err
	} else if nx != nil && nx.Sequence > e.Sequence {
		pg.Next = nx
	}
	if pg.Proof, err = c.App.InclusionProof(ctx, p, id, nil); err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "event", "Event "+e.EventID, pg)
	return nil
}
