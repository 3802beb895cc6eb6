package client

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
	"github.com/gowebpki/jcs"
)

// Event is what a caller appends; the client fills in the rest (sequence,
// prev_hash, ts, machine_id and the signature when it has a signer).
type Event struct {
	// EventID is evt-… ; empty: the client makes one (evt- and 32 hex digits).
	EventID   string
	EventType string
	// Raw is the event's structure: any value that encodes to a JSON object
	// (hashes and ids, not text). nil: no raw.
	Raw      any
	Decision *string
	Tool     *string
	ParentID *string
	// TS is the event's time as sent (RFC 3339 with an offset); nil: the
	// client's clock when the call starts. A caller that sends an event
	// again in a later call (a spool) keeps its TS, so that the service
	// answers the resend with the stored event.
	TS *string
}

// ErrHashMismatch is returned when the service stored an event whose
// payload_hash is not the one the client computed for what it sent.
var ErrHashMismatch = errors.New("client: the service's payload_hash differs from the one computed locally")

// maxTipFollows bounds how many times one Append follows a moved tip.
const maxTipFollows = 16

// Append appends ev at the account's tip and returns the service's answer.
// It reads the tip once per Client, follows a 409 prev_hash_mismatch or
// non_monotonic_sequence to the tip the service names, checks the stored
// payload_hash against its own, and resends the identical event when an
// answer is lost (the service answers a resent event with the stored one).
func (c *Client) Append(ctx context.Context, ev Event) (*api.AppendResponse, error) {
	n, err := c.eventInput("Append", ev)
	if err != nil {
		return nil, err
	}
	in := api.EventInput{EventID: n.EventID, EventType: n.EventType, Raw: n.Raw, Decision: n.Decision, Tool: n.Tool,
		MachineID: n.MachineID, ParentID: n.ParentID, TS: n.TS, Signature: n.Signature, SignatureKey: n.SignatureKey}

	c.appendMu.Lock()
	defer c.appendMu.Unlock()
	if c.tip == nil {
		tip, err := c.Tip(ctx)
		if err != nil {
			return nil, err
		}
		c.tip = tip
	}
	for follows := 0; ; follows++ {
		in.Sequence, in.PrevHash = 0, nil
		if c.tip.Sequence != nil {
			in.Sequence = *c.tip.Sequence + 1
			in.PrevHash = c.tip.PayloadHash
		}
		want, err := verify.PayloadHash(hashedOf(&in))
		if err != nil {
			return nil, err
		}
		var out api.AppendResponse
		err = c.do(ctx, request{method: "POST", path: "/v1/events", body: &in, idempotent: true}, &out)
		var pe *Error
		if errors.As(err, &pe) && follows < maxTipFollows && c.followTip(ctx, pe) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if out.Event.PayloadHash != want {
			c.tip = nil // read it again next time
			return &out, fmt.Errorf("%w: sent %s, stored %s", ErrHashMismatch, want, out.Event.PayloadHash)
		}
		seq, hash, id := out.Event.Sequence, out.Event.PayloadHash, out.Event.EventID
		c.tip = &api.ChainTip{Sequence: &seq, PayloadHash: &hash, EventID: &id, EventCount: c.tip.EventCount + 1}
		return &out, nil
	}
}

// eventInput is ev as sent, without its place: an event_id made when ev
// has none (evt- and 32 hex digits), raw in its RFC 8785 bytes, ts stamped
// once, and the signature over raw when the client has a signer.
func (c *Client) eventInput(method string, ev Event) (api.NextEventInput, error) {
	if ev.EventType == "" {
		return api.NextEventInput{}, fmt.Errorf("client: %s needs an EventType", method)
	}
	in := api.NextEventInput{EventID: ev.EventID, EventType: ev.EventType, Decision: ev.Decision, Tool: ev.Tool,
		ParentID: ev.ParentID, TS: ev.TS}
	if in.EventID == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return in, err
		}
		in.EventID = "evt-" + hex.EncodeToString(b[:])
	}
	if ev.Raw != nil {
		raw, err := canonical(ev.Raw)
		if err != nil {
			return in, fmt.Errorf("client: raw: %w", err)
		}
		in.Raw = raw
	}
	if in.TS == nil {
		ts := formatTimestamp(c.now())
		in.TS = &ts
	}
	if c.signer != nil {
		msg := []byte(in.Raw)
		if msg == nil {
			msg = []byte("null")
		}
		sig := base64.StdEncoding.EncodeToString(ed25519.Sign(c.signer, msg))
		machine, fp := c.machine, c.fingerprint
		in.Signature, in.SignatureKey, in.MachineID = &sig, &fp, &machine
	}
	return in, nil
}

// AppendNext appends ev at the account's tip as the service numbers it
// (POST /v1/events/append): it sends no sequence or prev_hash and needs no
// tip, so it never meets a 409 for a moved tip, and it goes on whatever
// the tip is (the 2^52 cap binds only sequences a client chooses). The
// client checks the stored payload_hash against its own for the place the
// service gave the event, and resends the identical event when an answer
// is lost (the service answers it with the stored event, header
// Idempotent-Replayed). The stored event becomes the client's tip when it
// is newer, so a following Append needs no tip read.
func (c *Client) AppendNext(ctx context.Context, ev Event) (*api.AppendResponse, error) {
	in, err := c.eventInput("AppendNext", ev)
	if err != nil {
		return nil, err
	}
	out, err := call[api.AppendResponse](ctx, c, request{method: "POST", path: "/v1/events/append", body: &in, idempotent: true})
	if err != nil {
		return nil, err
	}
	placed := api.EventInput{EventID: in.EventID, EventType: in.EventType, Sequence: out.Event.Sequence, PrevHash: out.Event.PrevHash,
		Raw: in.Raw, Decision: in.Decision, Tool: in.Tool, MachineID: in.MachineID, ParentID: in.ParentID, TS: in.TS,
		Signature: in.Signature, SignatureKey: in.SignatureKey}
	want, err := verify.PayloadHash(hashedOf(&placed))
	if err != nil {
		return nil, err
	}
	if out.Event.PayloadHash != want {
		return out, fmt.Errorf("%w: sent %s at sequence %d, stored %s", ErrHashMismatch, want, out.Event.Sequence, out.Event.PayloadHash)
	}
	c.keepTip(out.Event.Event, 1)
	return out, nil
}

// keepTip makes ev, just stored, the client's tip when it is newer than
// the one kept; added is how many events the call stored. The tip is a
// hint: while an Append holds it (it may be waiting to retry), it is not
// waited for.
func (c *Client) keepTip(ev api.Event, added int64) {
	if !c.appendMu.TryLock() {
		return
	}
	defer c.appendMu.Unlock()
	if c.tip == nil || c.tip.Sequence == nil || *c.tip.Sequence < ev.Sequence {
		seq, hash, id := ev.Sequence, ev.PayloadHash, ev.EventID
		var count int64 // unknown without a tip; not used by Append
		if c.tip != nil {
			count = c.tip.EventCount + added
		}
		c.tip = &api.ChainTip{Sequence: &seq, PayloadHash: &hash, EventID: &id, EventCount: count}
	}
}

// followTip moves the client's tip to the one a continuity refusal names
// (expected_prev_hash and last_sequence), or reads it; it reports whether the
// append should be tried again.
func (c *Client) followTip(ctx context.Context, pe *Error) bool {
	switch pe.Code {
	case "prev_hash_mismatch", "non_monotonic_sequence", "prev_hash_for_genesis":
	default:
		return false
	}
	var hash string
	var seq int64
	if pe.Member("expected_prev_hash", &hash) && pe.Member("last_sequence", &seq) {
		c.tip = &api.ChainTip{Sequence: &seq, PayloadHash: &hash, EventCount: c.tip.EventCount}
		return true
	}
	tip, err := c.Tip(ctx)
	if err != nil {
		return false
	}
	c.tip = tip
	return true
}

// ForgetTip makes the next Append read the tip from the service again.
func (c *Client) ForgetTip() {
	c.appendMu.Lock()
	c.tip = nil
	c.appendMu.Unlock()
}

// SetTip makes the next Append continue from tip instead of reading it: a
// tip kept by an earlier process of the same account. A stale tip costs the
// 409 that Append follows.
func (c *Client) SetTip(tip api.ChainTip) {
	c.appendMu.Lock()
	c.tip = &tip
	c.appendMu.Unlock()
}

func hashedOf(in *api.EventInput) *verify.HashedEvent {
	return &verify.HashedEvent{EventID: in.EventID, EventType: in.EventType, Sequence: in.Sequence, PrevHash: in.PrevHash,
		Raw: in.Raw, Decision: in.Decision, Tool: in.Tool, MachineID: in.MachineID, ParentID: in.ParentID, TS: in.TS,
		Signature: in.Signature, SignatureKey: in.SignatureKey}
}

// canonical encodes v as RFC 8785 JSON: the bytes a signature signs, sent as
// they are so the service stores exactly what was signed.
func canonical(v any) (json.RawMessage, error) {
	b, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	return jcs.Transform(b)
}

// AppendBatch sends up to 500 events as they are (POST /v1/events/batch):
// rows are checked for shape only, and a resent row with identical content is
// skipped, so a batch whose answer was lost is resent safely.
func (c *Client) AppendBatch(ctx context.Context, req api.BatchRequest) (*api.BatchResponse, error) {
	return call[api.BatchResponse](ctx, c, request{method: "POST", path: "/v1/events/batch", body: &req, idempotent: true})
}

// Search runs POST /v1/events/search (newest first).
func (c *Client) Search(ctx context.Context, req api.SearchRequest) (*api.SearchResponse, error) {
	return call[api.SearchResponse](ctx, c, request{method: "POST", path: "/v1/events/search", body: &req, idempotent: true})
}

// Event reads one event and its ancestry (GET /v1/events/{event_id}).
func (c *Client) Event(ctx context.Context, eventID string) (*api.EventRead, error) {
	return call[api.EventRead](ctx, c, request{method: "GET", path: "/v1/events/" + escape(eventID), idempotent: true})
}

// Tip reads the account's chain tip (GET /v1/chain/tip).
func (c *Client) Tip(ctx context.Context) (*api.ChainTip, error) {
	return call[api.ChainTip](ctx, c, request{method: "GET", path: "/v1/chain/tip", idempotent: true})
}

// RegisterSigningKey registers machineID's Ed25519 public key (PUT
// /v1/machines/{machine_id}/signing-key); from then on the service checks
// the signature of every event of that machine. The service writes each
// registration on the chain (machine.signing_key), so it is not resent after
// a lost answer: a resend would record a second registration.
func (c *Client) RegisterSigningKey(ctx context.Context, machineID string, pub ed25519.PublicKey) (*api.SigningKeyRegistered, error) {
	return call[api.SigningKeyRegistered](ctx, c, request{method: http.MethodPut, path: "/v1/machines/" + escape(machineID) + "/signing-key",
		body: api.SigningKeyRequest{PublicKey: base64.StdEncoding.EncodeToString(pub)}})
}
