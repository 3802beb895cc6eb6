package verify_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/internal/checkpoint"
	"github.com/auditchain/auditchain/pkg/verify"
)

// cosigner is a witness's cosignature/v1 signer and its verifier key.
func cosigner(t *testing.T, name string) (note.Signer, string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		t.Fatal(err)
	}
	cvkey, err := fnote.VKeyToCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, cvkey
}

// cosignLine is s's cosignature line on signedNote's text.
func cosignLine(t *testing.T, s note.Signer, signedNote []byte) string {
	t.Helper()
	text, _, _ := strings.Cut(string(signedNote), "\n\n")
	n, err := note.Sign(&note.Note{Text: text + "\n"}, s)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(n), "\n"), "\n")
	return lines[len(lines)-1]
}

// A witness's cosignature verifies on the checkpoint it signed, under its
// key (the cosignature/v1 vkey or the plain Ed25519 one), and on nothing
// else; CheckQuorum counts only valid cosignatures of the witnesses given
// and names the missing ones.
func TestCosignaturesAndQuorum(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := checkpoint.NewSigner(verify.Origin("u1"), key)
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := signer.SignBlock(3, [32]byte{1}, nil)
	other, _ := signer.SignBlock(4, [32]byte{2}, nil)
	sa, va := cosigner(t, "w.example/a")
	sb, vb := cosigner(t, "w.example/b")
	_, vc := cosigner(t, "w.example/c")
	wa, err := verify.NewWitness(va)
	if err != nil {
		t.Fatal(err)
	}
	wb, _ := verify.NewWitness(vb)
	wc, _ := verify.NewWitness(vc)
	la, lb := cosignLine(t, sa, cp), cosignLine(t, sb, cp)

	if err := wa.VerifyCosignature(cp, la); err != nil {
		t.Fatalf("a's cosignature: %v", err)
	}
	if err := wa.VerifyCosignature(cp, la+"\n"); err != nil {
		t.Fatalf("a's cosignature with its newline: %v", err)
	}
	if err := wa.VerifyCosignature(other, la); err == nil {
		t.Fatal("a's cosignature verified on another checkpoint")
	}
	if err := wa.VerifyCosignature(cp, lb); err == nil {
		t.Fatal("b's cosignature verified under a's key")
	}
	if err := wa.VerifyCosignature(cp, strings.Replace(la, "w.example/a", "w.example/b", 1)); err == nil {
		t.Fatal("a renamed line verified")
	}

	q := verify.CheckQuorum(cp, []string{la, lb, "— junk AAAA"}, []verify.Witness{wa, wb, wc}, 2)
	if !q.Met() || strings.Join(q.Cosigned, ",") != "w.example/a,w.example/b" || strings.Join(q.Missing, ",") != "w.example/c" {
		t.Fatalf("quorum 2 of a, b, c: %+v", q)
	}
	q = verify.CheckQuorum(cp, []string{la}, []verify.Witness{wa, wb, wc}, 2)
	if q.Met() || !strings.Contains(q.Error(), "1 of 2") || !strings.Contains(q.Error(), "missing: w.example/b, w.example/c") {
		t.Fatalf("quorum not met: %+v %s", q, q.Error())
	}

	if _, err := verify.NewWitness(strings.Replace(va, va[len("w.example/a+"):len("w.example/a+")+8], "00000000", 1)); err == nil {
		t.Fatal("a vkey with a wrong key hash was accepted")
	}
}
