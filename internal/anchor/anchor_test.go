package anchor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/digitorus/timestamp"

	"github.com/auditchain/auditchain/internal/anchor"
	"github.com/auditchain/auditchain/internal/anchor/anchortest"
)

func TestNewProvider(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		wantNil   bool
		wantErr   string
	}{
		{name: "none", wantNil: true},
		{name: "rfc3161", url: "http://tsa.example/", wantNil: false},
		{name: "rfc3161", wantErr: "--anchor-tsa-url"},
		{name: "rfc3161", url: "ftp://user:hunter2@tsa.example/", wantErr: "--anchor-tsa-url is not an http(s) URL"},
		{name: "rfc3161", url: "http://user:hunter2@tsa example/", wantErr: "--anchor-tsa-url is not an http(s) URL"},
		{name: "opentimestamps", url: "http://x", wantErr: `unknown anchor provider "opentimestamps"`},
		{name: "", wantErr: "unknown anchor provider"},
	} {
		p, err := anchor.New(tc.name, tc.url, nil)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New(%q, %q) error %v, want %q", tc.name, tc.url, err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("New(%q, %q) error %v names the password", tc.name, tc.url, err)
			}
			continue
		}
		if err != nil || (p == nil) != tc.wantNil {
			t.Errorf("New(%q, %q) = %v, %v", tc.name, tc.url, p, err)
		}
	}
}

func TestTimestampAgainstFakeTSA(t *testing.T) {
	tsa, err := anchortest.NewTSA()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(tsa)
	defer srv.Close()
	p, err := anchor.New(anchor.RFC3161, srv.URL, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("block note"))
	r, err := p.Timestamp(context.Background(), digest)
	if err != nil {
		t.Fatal(err)
	}
	// The token stands on its own: it parses, its signature checks against
	// the TSA certificate it carries, and its imprint is the digest.
	ts, err := timestamp.Parse(r.Token)
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	if !bytes.Equal(ts.HashedMessage, digest[:]) || !ts.Certificates[0].Equal(tsa.Cert) || r.GenTime.IsZero() || r.SerialNumber == "" || r.URL != srv.URL {
		t.Fatalf("receipt %+v, token %+v", r, ts)
	}
	// A receipt goes on the chain: it names the TSA without the credentials
	// or query its URL carries.
	withAuth := strings.Replace(srv.URL, "://", "://stamp:hunter2@", 1) + "/tsa?token=hunter2"
	p, err = anchor.New(anchor.RFC3161, withAuth, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if r, err := p.Timestamp(context.Background(), digest); err != nil || r.URL != srv.URL+"/tsa" {
		t.Fatalf("receipt URL %q (%v), want %s/tsa", r.URL, err, srv.URL)
	}

	tsa.Fail.Store(true)
	if _, err := p.Timestamp(context.Background(), digest); err == nil || !strings.Contains(err.Error(), "HTTP 500") {
		t.Fatalf("failing TSA: %v", err)
	}
}

// A TSA that stamps something else, or answers garbage, is refused.
func TestTimestampRefusesWrongAnswers(t *testing.T) {
	tsa, err := anchortest.NewTSA()
	if err != nil {
		t.Fatal(err)
	}
	other := sha256.Sum256([]byte("something else"))
	for name, h := range map[string]http.HandlerFunc{
		"garbage": func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("not DER")) },
		"another imprint": func(w http.ResponseWriter, r *http.Request) {
			body := new(bytes.Buffer)
			body.ReadFrom(r.Body)
			req, _ := timestamp.ParseRequest(body.Bytes())
			req.HashedMessage = other[:]
			der, _ := req.Marshal()
			r2, _ := http.NewRequest("POST", "/", bytes.NewReader(der))
			tsa.ServeHTTP(w, r2)
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			p, _ := anchor.New(anchor.RFC3161, srv.URL, srv.Client())
			if _, err := p.Timestamp(context.Background(), sha256.Sum256([]byte("x"))); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
