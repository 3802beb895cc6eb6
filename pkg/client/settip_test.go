package client_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// A tip handed over with SetTip spares the tip read when it is current, and
// costs one followed 409 when another writer moved the chain since.
func TestSetTipSparesTheTipRead(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "settip@example.com")
		ctx := context.Background()
		first := newClient(t, s, token)
		res, err := first.Append(ctx, client.Event{EventType: "tool_call", Raw: map[string]any{"n": 0}})
		if err != nil {
			t.Fatal(err)
		}
		kept := api.ChainTip{Sequence: &res.Event.Sequence, PayloadHash: &res.Event.PayloadHash}

		cnt := &counter{}
		second := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: cnt}))
		second.SetTip(kept)
		if _, err := second.Append(ctx, client.Event{EventType: "tool_call", Raw: map[string]any{"n": 1}}); err != nil {
			t.Fatal(err)
		}
		if got := cnt.take(); !slices.Equal(got, []string{"POST /v1/events OK"}) {
			t.Fatalf("with a current tip: %v", got)
		}
		// The kept tip is now one behind.
		third := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: cnt}))
		third.SetTip(kept)
		out, err := third.Append(ctx, client.Event{EventType: "tool_call", Raw: map[string]any{"n": 2}})
		if err != nil {
			t.Fatal(err)
		}
		if got := cnt.take(); !slices.Equal(got, []string{"POST /v1/events Conflict", "POST /v1/events OK"}) || out.Event.Sequence != 2 {
			t.Fatalf("with a stale tip: %v, stored at %d", got, out.Event.Sequence)
		}
		checkChain(t, first, 3)
	})
}
