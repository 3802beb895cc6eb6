package client

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// Integrity (CONTRACT.md "Integrity"): blocks, verification, proofs, the
// export, and their offline checks through pkg/verify. The offline checks
// trust only the service public key the caller passes: pin it (from
// configuration, or read once with ServicePublicKey and kept), since a key
// read from the same service at check time proves only that the service
// agrees with itself.

// Blocks reads a page of the account's signed checkpoints (GET
// /v1/chain/blocks); cursor nil starts at block 0, limit 0 is the
// service's default.
func (c *Client) Blocks(ctx context.Context, cursor *int64, limit int) (*api.BlockPage, error) {
	v := url.Values{}
	if cursor != nil {
		v.Set("cursor", strconv.FormatInt(*cursor, 10))
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	return get[api.BlockPage](ctx, c, "/v1/chain/blocks", v)
}

// VerifyChain asks the service to verify the account's blocks (GET
// /v1/chain/verify). For a check that does not trust the service, use
// VerifyExport.
func (c *Client) VerifyChain(ctx context.Context) (*api.ChainVerification, error) {
	return get[api.ChainVerification](ctx, c, "/v1/chain/verify", nil)
}

// InclusionProof reads the proof that eventID is in the account's tree of
// treeSize leaves (nil: the newest block's).
func (c *Client) InclusionProof(ctx context.Context, eventID string, treeSize *uint64) (*api.InclusionProof, error) {
	v := url.Values{"event_id": {eventID}}
	if treeSize != nil {
		v.Set("tree_size", strconv.FormatUint(*treeSize, 10))
	}
	return get[api.InclusionProof](ctx, c, "/v1/chain/proof/inclusion", v)
}

// ConsistencyProof reads the proof that the tree of first leaves is a prefix
// of the tree of second (nil: the newest block's).
func (c *Client) ConsistencyProof(ctx context.Context, first uint64, second *uint64) (*api.ConsistencyProof, error) {
	v := url.Values{"first": {strconv.FormatUint(first, 10)}}
	if second != nil {
		v.Set("second", strconv.FormatUint(*second, 10))
	}
	return get[api.ConsistencyProof](ctx, c, "/v1/chain/proof/consistency", v)
}

// Export writes the account's export (NDJSON, docs/integrity.md) to w: the
// leaves from..to (nil: from the first, to the last). It is not resent: a
// transfer cut part-way is an error, and what w got is a truncated export
// (which VerifyExport refuses).
func (c *Client) Export(ctx context.Context, from, to *int64, w io.Writer) error {
	v := url.Values{}
	if from != nil {
		v.Set("from", strconv.FormatInt(*from, 10))
	}
	if to != nil {
		v.Set("to", strconv.FormatInt(*to, 10))
	}
	resp, err := c.open(ctx, request{method: http.MethodGet, path: "/v1/chain/export", query: v, idempotent: true})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("client: export: %w", err)
	}
	return nil
}

// ServicePublicKey reads and parses the service identity's public key (GET
// /v1/delegation/public-key), which signs checkpoints and delegation tokens.
func (c *Client) ServicePublicKey(ctx context.Context) (ed25519.PublicKey, error) {
	k, err := c.DelegationPublicKey(ctx)
	if err != nil {
		return nil, err
	}
	pub, err := verify.ParsePublicKey(k.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("client: the service public key: %w", err)
	}
	if id := verify.ServiceKeyID(pub); id != k.KeyID {
		return nil, fmt.Errorf("client: the service public key's id is %s, the service named %s", id, k.KeyID)
	}
	return pub, nil
}

// VerifyExport downloads the account's whole export and verifies it offline
// against servicePub (verify.VerifyExport: every payload_hash, every
// signature, the links, the blocks and their roots). A nil error says the
// record is intact and continuous.
func (c *Client) VerifyExport(ctx context.Context, servicePub ed25519.PublicKey) (verify.Report, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := c.Export(ctx, nil, nil, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	rep, err := verify.VerifyExport(pr, servicePub)
	pr.CloseWithError(errors.New("client: verification ended"))
	if derr := <-done; derr != nil && err == nil {
		err = derr
	}
	return rep, err
}

// VerifyInclusion reads the inclusion proof of eventID in the newest block
// and checks it offline: the block's note is signed by servicePub for the
// account's origin, its root is the proof's, and the proof leads from the
// event's payload_hash to that root. It returns the checked proof.
func (c *Client) VerifyInclusion(ctx context.Context, eventID string, servicePub ed25519.PublicKey) (*api.InclusionProof, error) {
	p, err := c.InclusionProof(ctx, eventID, nil)
	if err != nil {
		return nil, err
	}
	if p.Checkpoint == nil {
		return p, fmt.Errorf("client: no block of size %d signs the proof's root", p.TreeSize)
	}
	cp, err := verify.OpenCheckpoint([]byte(p.Checkpoint.Note), servicePub, p.Origin)
	if err != nil {
		return p, err
	}
	if p.TreeSize < 0 || cp.Size != uint64(p.TreeSize) {
		return p, fmt.Errorf("client: the block covers %d leaves, the proof %d", cp.Size, p.TreeSize)
	}
	leaf, err := verify.HashBytes(p.PayloadHash)
	if err != nil {
		return p, err
	}
	path := make([]verify.Hash, len(p.Proof))
	for i, h := range p.Proof {
		if err := path[i].UnmarshalText([]byte(h)); err != nil {
			return p, fmt.Errorf("client: proof hash %d: %w", i, err)
		}
	}
	if err := verify.VerifyInclusion(uint64(p.LeafIndex), cp.Size, verify.LeafHash(leaf), path, cp.Root); err != nil {
		return p, err
	}
	return p, nil
}

// VerifyDelegation checks a delegation token (GrantCreated.Delegation)
// offline against servicePub.
func VerifyDelegation(token []byte, servicePub ed25519.PublicKey) (*verify.DelegationToken, error) {
	return verify.VerifyToken(token, servicePub)
}
