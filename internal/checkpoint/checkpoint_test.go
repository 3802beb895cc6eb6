package checkpoint

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/pkg/verify"
)

const userID = "0190f3a2-7c4e-7000-8000-000000000001"

func testKey(seed string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte(seed))
	return ed25519.NewKeyFromSeed(s[:])
}

// sign is the signed note of block 0 of size and root under origin.
func sign(t *testing.T, origin string, size uint64, root [32]byte, key ed25519.PrivateKey) []byte {
	t.Helper()
	s, err := NewSigner(origin, key)
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.SignBlock(size, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSignOpenRoundTrip(t *testing.T) {
	key := testKey("service")
	pub := key.Public().(ed25519.PublicKey)
	origin := verify.Origin(userID)
	s, err := NewSigner(origin, key)
	if err != nil {
		t.Fatal(err)
	}
	root := [32]byte(sha256.Sum256([]byte("root")))
	b0, err := s.Seal(nil, 5, root)
	if err != nil {
		t.Fatal(err)
	}
	b1, err := s.Seal(&b0, 9, sha256.Sum256([]byte("root2")))
	if err != nil {
		t.Fatal(err)
	}
	if b1.Index != 1 || *b1.PrevHash != b0.Hash {
		t.Fatalf("block 1 index %d prev %v, want 1 and %v", b1.Index, b1.PrevHash, b0.Hash)
	}
	if want := "auditchain/" + userID + "\n9\n"; !strings.HasPrefix(string(b1.Note), want) {
		t.Fatalf("note starts %q", b1.Note)
	}
	if !strings.Contains(string(b1.Note), "\nprev "+b0.Hash.String()+"\n\n— "+origin+" ") {
		t.Fatalf("note lacks the prev line and origin-named signature:\n%s", b1.Note)
	}
	if again := sign(t, origin, 5, root, key); string(again) != string(b0.Note) {
		t.Fatal("SignBlock is not deterministic")
	}

	cp, err := verify.OpenCheckpoint(b1.Note, pub, origin)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size != 9 || cp.Prev == nil || *cp.Prev != b0.Hash || cp.Origin != origin {
		t.Fatalf("opened %+v", cp)
	}

	// Independent C2SP parser: transparency-dev/formats with an x/mod verifier.
	vkey, err := verify.CheckpointVerifierKey(origin, pub)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	fcp, ext, _, err := log.ParseCheckpoint(b1.Note, origin, v)
	if err != nil {
		t.Fatal(err)
	}
	if fcp.Size != 9 || verify.Hash(fcp.Hash) != cp.Root || string(ext) != "prev "+b0.Hash.String()+"\n" {
		t.Fatalf("formats parsed %+v ext %q", fcp, ext)
	}
}

func TestOpenRejects(t *testing.T) {
	key := testKey("service")
	pub := key.Public().(ed25519.PublicKey)
	origin := verify.Origin(userID)
	good := sign(t, origin, 3, sha256.Sum256([]byte("r")), key)
	other := sign(t, verify.Origin("someone-else"), 3, sha256.Sum256([]byte("r")), key)
	tamperedRoot := []byte(strings.Replace(string(good), "\n3\n", "\n4\n", 1))
	badSig := append([]byte(nil), good...)
	badSig[len(badSig)-3] ^= 1
	for _, tc := range []struct {
		name string
		note []byte
		pub  ed25519.PublicKey
		want error
	}{
		{"tampered body", tamperedRoot, pub, verify.ErrCheckpointSignature},
		{"tampered signature", badSig, pub, verify.ErrCheckpointSignature},
		{"another key", good, testKey("other").Public().(ed25519.PublicKey), verify.ErrCheckpointSignature},
		{"another account", other, pub, verify.ErrCheckpointOrigin},
		{"not a note", []byte("hello\n"), pub, verify.ErrCheckpointMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := verify.OpenCheckpoint(tc.note, tc.pub, origin)
			if !errors.Is(err, tc.want) {
				t.Fatalf("OpenCheckpoint = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestParseCheckpointBody(t *testing.T) {
	root := verify.Hash(sha256.Sum256([]byte("r"))).String()
	for _, tc := range []struct {
		name, text string
		ok         bool
	}{
		{"plain", "o\n1\n" + root + "\n", true},
		{"with prev and extension", "o\n1\n" + root + "\nprev " + root + "\nwitness x\n", true},
		{"two prev lines", "o\n1\n" + root + "\nprev " + root + "\nprev " + root + "\n", false},
		{"size with sign", "o\n+1\n" + root + "\n", false},
		{"size with leading zero", "o\n01\n" + root + "\n", false},
		{"short root", "o\n1\nAAAA\n", false},
		{"no final newline", "o\n1\n" + root, false},
		{"empty origin", "\n1\n" + root + "\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := verify.ParseCheckpointBody(tc.text)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestBlockVerifier(t *testing.T) {
	key := testKey("service")
	pub := key.Public().(ed25519.PublicKey)
	s, _ := NewSigner(verify.Origin(userID), key)
	var blocks []Block
	var prev *Block
	for i := range 4 {
		b, err := s.Seal(prev, uint64(3*i+1), sha256.Sum256([]byte{byte(i)}))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
		prev = &blocks[len(blocks)-1]
	}
	run := func(idx []int) error {
		bv, err := verify.NewBlockVerifier(verify.Origin(userID), pub)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range idx {
			if _, err := bv.Next(blocks[i].Index, blocks[i].Note); err != nil {
				return err
			}
		}
		return nil
	}
	if err := run([]int{0, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := run([]int{2, 3}); err != nil { // a fragment may start mid-chain
		t.Fatal(err)
	}
	var e *verify.Error
	if err := run([]int{0, 2}); !errors.As(err, &e) || e.Kind != verify.KindBlockLink || e.Block != 2 {
		t.Fatalf("missing block: %v", err)
	}
	if _, err := s.Seal(&blocks[3], 2, [32]byte{}); !errors.Is(err, ErrShrink) {
		t.Fatalf("shrinking block: %v", err)
	}
}
