// Our witness (internal/witness) against transparency-dev's own client and
// witness library: the other program's behaviour decides these tests.
package witnessinterop_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	whttp "github.com/transparency-dev/witness/client/http"
	twitness "github.com/transparency-dev/witness/witness"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/witness"
)

// memLog is an RFC 6962 tree in memory and a note key named by its origin.
type memLog struct {
	t      *testing.T
	origin string
	signer note.Signer
	vkey   string
	stored []tlog.Hash
	size   int64
}

func newMemLog(t *testing.T, origin string, signer note.Signer, vkey string) *memLog {
	return &memLog{t: t, origin: origin, signer: signer, vkey: vkey}
}

func (l *memLog) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = l.stored[x]
		}
		return out, nil
	})
}

func (l *memLog) grow(to int64, tag string) {
	for l.size < to {
		hs, err := tlog.StoredHashes(l.size, fmt.Appendf(nil, "%s %d", tag, l.size), l.reader())
		if err != nil {
			l.t.Fatal(err)
		}
		l.stored = append(l.stored, hs...)
		l.size++
	}
}

func (l *memLog) checkpoint(size int64) []byte {
	h, err := tlog.TreeHash(size, l.reader())
	if err != nil {
		l.t.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: string(log.Checkpoint{Origin: l.origin, Size: uint64(size), Hash: h[:]}.Marshal())}, l.signer)
	if err != nil {
		l.t.Fatal(err)
	}
	return msg
}

func (l *memLog) proof(old, size int64) [][]byte {
	p, err := tlog.ProveTree(size, old, l.reader())
	if err != nil {
		l.t.Fatal(err)
	}
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = p[i][:]
	}
	return out
}

// transparency-dev/witness's own HTTP client (client/http, what its feeders
// use) submits to our witness: it reads our 200s as cosignatures its
// formats version verifies, our 409 as ErrCheckpointStale with our size,
// and our 404, 403 and 422 as its ErrUnknownLog, ErrNoValidSignature and
// ErrInvalidProof.
func TestTransparencyDevClientSubmitsToOurWitness(t *testing.T) {
	ctx := context.Background()
	const origin = "example.com/interop-log"
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	lg := newMemLog(t, origin, signer, vkey)
	lg.grow(20, "a")

	wskey, wvkey, err := witness.GenerateKey("witness.test/ours")
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := witness.NewSigner(wskey)
	if err != nil {
		t.Fatal(err)
	}
	st, err := witness.OpenState(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logs := witness.NewLogs()
	if err := logs.AddLog("", vkey); err != nil {
		t.Fatal(err)
	}
	w, err := witness.New(ws, wvkey, logs, st)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(witness.Handler(w, slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	client := whttp.NewWitness(u, http.DefaultClient)
	theirVerifier, err := fnote.NewVerifierForCosignatureV1(wvkey)
	if err != nil {
		t.Fatal(err)
	}
	cosigned := func(cp, sigs []byte) {
		t.Helper()
		n, err := note.Open(append(bytes.Clone(cp), sigs...), note.VerifierList(theirVerifier))
		if err != nil || len(n.Sigs) != 1 {
			t.Fatalf("our cosignature under their formats' verifier: %v", err)
		}
	}

	cp5 := lg.checkpoint(5)
	sigs, _, err := client.Update(ctx, 0, cp5, nil)
	if err != nil {
		t.Fatalf("first update: %v", err)
	}
	cosigned(cp5, sigs)

	_, size, err := client.Update(ctx, 0, lg.checkpoint(9), nil)
	if !errors.Is(err, twitness.ErrCheckpointStale) || size != 5 {
		t.Fatalf("update from a stale size: %v, size %d; want ErrCheckpointStale and 5", err, size)
	}
	cp9 := lg.checkpoint(9)
	sigs, _, err = client.Update(ctx, size, cp9, lg.proof(5, 9))
	if err != nil {
		t.Fatalf("update with the proof from 5: %v", err)
	}
	cosigned(cp9, sigs)

	if _, _, err := client.Update(ctx, 9, lg.checkpoint(20), lg.proof(8, 20)); !errors.Is(err, twitness.ErrInvalidProof) {
		t.Fatalf("a proof from the wrong size: %v, want ErrInvalidProof", err)
	}
	stranger := newMemLog(t, "example.com/unknown", signer, vkey)
	stranger.grow(3, "s")
	if _, _, err := client.Update(ctx, 0, stranger.checkpoint(3), nil); !errors.Is(err, twitness.ErrUnknownLog) {
		t.Fatalf("an unknown origin: %v, want ErrUnknownLog", err)
	}
	forgerKey, _, _ := note.GenerateKey(rand.Reader, origin)
	forger, _ := note.NewSigner(forgerKey)
	forged := newMemLog(t, origin, forger, "")
	forged.grow(30, "f")
	if _, _, err := client.Update(ctx, 9, forged.checkpoint(30), nil); !errors.Is(err, twitness.ErrNoValidSignature) {
		t.Fatalf("a checkpoint signed by another key: %v, want ErrNoValidSignature", err)
	}
}
