package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// counter passes requests to the real server and lists "METHOD path status".
type counter struct {
	mu  sync.Mutex
	log []string
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		c.mu.Lock()
		c.log = append(c.log, r.Method+" "+r.URL.Path+" "+http.StatusText(resp.StatusCode))
		c.mu.Unlock()
	}
	return resp, err
}

func (c *counter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.log
	c.log = nil
	return l
}

// A 409 prev_hash_mismatch is followed with the problem's
// expected_prev_hash and last_sequence: one refused attempt, one stored,
// no read of the tip. Events the service writes itself (a signing key's
// registration, governance transitions) move the tip the same way.
func TestAppendFollowsA409(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		userID, token := s.Account(t, "conflict@example.com")
		ctx := context.Background()
		log := &counter{}
		c := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: log}))
		if _, err := c.Append(ctx, client.Event{EventType: "note"}); err != nil {
			t.Fatal(err)
		}
		if got := log.take(); !slices.Equal(got, []string{"GET /v1/chain/tip OK", "POST /v1/events OK"}) {
			t.Fatalf("first append: %v", got)
		}

		other := newClient(t, s, token)
		pub, _ := newKey(t)
		if _, err := other.RegisterSigningKey(ctx, "ci", pub); err != nil { // machine.signing_key at 1
			t.Fatal(err)
		}
		res, err := c.Append(ctx, client.Event{EventType: "note"})
		if err != nil {
			t.Fatal(err)
		}
		if got := log.take(); !slices.Equal(got, []string{"POST /v1/events Conflict", "POST /v1/events OK"}) {
			t.Fatalf("append after a server-written event: %v", got)
		}
		if res.Event.Sequence != 2 {
			t.Fatalf("stored at %d, want 2", res.Event.Sequence)
		}

		// Governance: a proposal and its ratification by another key are
		// governance.proposed and governance.ratified at the tip.
		p, err := other.Propose(ctx, api.CreateProposalRequest{Kind: new("policy_note"), Subject: &api.ProposalSubject{Subagent: new("w")},
			Evidence: &api.ProposalEvidence{BlockedAttempts: new(3)}})
		if err != nil {
			t.Fatal(err)
		}
		second := newClient(t, s, s.Key(t, userID, api.CreateKeyRequest{}))
		if _, err := second.Ratify(ctx, p.ProposalID, nil); err != nil {
			t.Fatal(err)
		}
		if res, err = c.Append(ctx, client.Event{EventType: "note"}); err != nil || res.Event.Sequence != 5 {
			t.Fatalf("append after governance events: %+v, %v", res, err)
		}
		if got := log.take(); !slices.Equal(got, []string{"POST /v1/events Conflict", "POST /v1/events OK"}) {
			t.Fatalf("append after governance events: %v", got)
		}
		checkChain(t, c, 6)
		log.take()

		// A refusal that is not about continuity is returned, not followed.
		_, err = c.Append(ctx, client.Event{EventID: "not-an-event-id", EventType: "note"})
		var pe *client.Error
		if !errors.As(err, &pe) || pe.Status != 422 || len(log.take()) != 1 {
			t.Fatalf("a bad event id: %v", err)
		}
	})
}
