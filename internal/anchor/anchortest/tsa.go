// Package anchortest is a fake RFC 3161 Time-Stamp Authority for the tests
// of the anchor and of its callers (app, httpapi, cmd/auditchain).
package anchortest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"io"
	"math/big"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/digitorus/timestamp"
)

// TSA is a minimal RFC 3161 Time-Stamp Authority for tests: it answers
// every well-formed request with a token signed by a throwaway self-signed
// certificate. Serve it with httptest.NewServer. It is not a TSA anyone
// should trust.
type TSA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	// Now stamps tokens (nil: time.Now).
	Now func() time.Time
	// Fail, when set, makes the TSA answer HTTP 500.
	Fail atomic.Bool

	requests atomic.Int64
}

// NewTSA makes a TSA with a fresh P-256 key and certificate.
func NewTSA() (*TSA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "auditchain fake TSA"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &TSA{Cert: cert, key: key}, nil
}

// Requests counts the requests answered (granted or not).
func (f *TSA) Requests() int64 { return f.requests.Load() }

// ServeHTTP answers one RFC 3161 request.
func (f *TSA) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if f.Fail.Load() {
		http.Error(w, "fake TSA told to fail", http.StatusInternalServerError)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	req, err := timestamp.ParseRequest(body)
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	ts := timestamp.Timestamp{HashAlgorithm: req.HashAlgorithm, HashedMessage: req.HashedMessage, Time: now().UTC(),
		Nonce: req.Nonce, Policy: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Accuracy: time.Second,
		AddTSACertificate: req.Certificates}
	resp, err := ts.CreateResponseWithOpts(f.Cert, f.key, crypto.SHA256)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/timestamp-reply")
	w.Write(resp)
}
