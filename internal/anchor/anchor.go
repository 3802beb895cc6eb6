// Package anchor timestamps chain blocks with an outside party, so a block's
// existence at a time no longer rests on the service's word alone (SPEC.md
// "Operator cron" anchor; docs/decisions/anchor.md). Providers: none (anchoring
// disabled) and rfc3161 (an RFC 3161 Time-Stamp Authority over HTTP).
package anchor

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"time"

	"github.com/digitorus/timestamp"
)

// Provider names accepted by --anchor-provider.
const (
	None    = "none"
	RFC3161 = "rfc3161"
)

// Receipt is a provider's proof that a digest existed at GenTime.
type Receipt struct {
	// Token is the DER TimeStampToken (CMS SignedData over TSTInfo), which a
	// verifier checks with the TSA's certificate; its message imprint is the
	// SHA-256 digest that was anchored.
	Token        []byte
	GenTime      time.Time
	SerialNumber string
	URL          string // the TSA's, without credentials or query
}

// Provider anchors a 32-byte SHA-256 digest.
type Provider interface {
	Name() string
	Timestamp(ctx context.Context, digest [32]byte) (Receipt, error)
}

// New returns the provider name selects. "none" returns nil and no error:
// anchoring is disabled. An unknown name, or rfc3161 without a TSA URL, is an
// error the anchor sweep reports as provider_misconfigured.
func New(name, tsaURL string, client *http.Client) (Provider, error) {
	switch name {
	case None:
		return nil, nil
	case RFC3161:
		if tsaURL == "" {
			return nil, errors.New("anchor provider rfc3161 needs --anchor-tsa-url")
		}
		// Never quoted in an error: the URL may carry a password.
		u, err := url.Parse(tsaURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("--anchor-tsa-url is not an http(s) URL with a host")
		}
		if client == nil {
			client = &http.Client{Timeout: 30 * time.Second}
		}
		shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
		return &TSA{URL: tsaURL, Client: client, shown: shown.String()}, nil
	}
	return nil, fmt.Errorf("unknown anchor provider %q: use none or rfc3161", name)
}

// TSA is an RFC 3161 Time-Stamp Authority reached over HTTP (RFC 3161 §3.4).
type TSA struct {
	URL    string // may carry credentials (user:password@): never printed
	Client *http.Client
	// shown is URL without user, password or query: what a receipt records
	// (receipts go on the chain and into exports) and what errors name.
	shown string
}

// Name implements Provider.
func (t *TSA) Name() string { return RFC3161 }

// maxResponse bounds a TSA answer (a token with its certificate is a few KB).
const maxResponse = 1 << 20

// Timestamp asks the TSA to stamp digest (as a SHA-256 message imprint, so the
// token's imprint is digest itself) with a fresh nonce and the TSA's
// certificate included, then checks the answer: granted, signature valid
// against the included certificate, imprint and nonce ours.
func (t *TSA) Timestamp(ctx context.Context, digest [32]byte) (Receipt, error) {
	nonce, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return Receipt{}, err
	}
	req := timestamp.Request{HashAlgorithm: crypto.SHA256, HashedMessage: digest[:], Certificates: true, Nonce: nonce}
	body, err := req.Marshal()
	if err != nil {
		return Receipt{}, fmt.Errorf("rfc3161 request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return Receipt{}, fmt.Errorf("rfc3161 request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/timestamp-query")
	hreq.Header.Set("Accept", "application/timestamp-reply")
	resp, err := t.Client.Do(hreq)
	if err != nil {
		return Receipt{}, fmt.Errorf("rfc3161 TSA: %w", err)
	}
	defer resp.Body.Close()
	der, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return Receipt{}, fmt.Errorf("rfc3161 TSA: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Receipt{}, fmt.Errorf("rfc3161 TSA answered HTTP %d", resp.StatusCode)
	}
	if len(der) > maxResponse {
		return Receipt{}, fmt.Errorf("rfc3161 TSA answer is larger than %d bytes", maxResponse)
	}
	ts, err := timestamp.ParseResponse(der)
	if err != nil {
		return Receipt{}, fmt.Errorf("rfc3161 TSA answer: %w", err)
	}
	switch {
	case !ts.AddTSACertificate:
		return Receipt{}, errors.New("rfc3161 TSA answer carries no certificate, so its signature cannot be checked")
	case ts.HashAlgorithm != crypto.SHA256 || !bytes.Equal(ts.HashedMessage, digest[:]):
		return Receipt{}, errors.New("rfc3161 TSA stamped another message imprint")
	case ts.Nonce == nil || ts.Nonce.Cmp(nonce) != 0:
		return Receipt{}, errors.New("rfc3161 TSA answer does not echo the request nonce")
	}
	serial := ""
	if ts.SerialNumber != nil {
		serial = ts.SerialNumber.String()
	}
	return Receipt{Token: ts.RawToken, GenTime: ts.Time, SerialNumber: serial, URL: t.shown}, nil
}
