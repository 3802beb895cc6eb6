// Witness cosignatures (docs/integrity.md "Witnesses"): a witness that
// speaks C2SP tlog-witness cosigns a block's checkpoint only after checking it
// is consistent with every checkpoint of that origin it cosigned before, and
// answers a C2SP tlog-cosignature (cosignature/v1) note signature line. The
// service keeps those lines beside the block, never inside its stored note
// (BlockHash covers the note's bytes), and hands them out as the block's
// cosignatures: appending each line to the note gives the cosigned note.
//
// The cosignature/v1 format is transparency-dev/formats' note package; the
// signed-note grammar is golang.org/x/mod/sumdb/note's. Nothing here
// re-implements either.

package verify

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// Witness is a witness whose cosignatures a verifier trusts: its name (the
// key name of its vkey) and its cosignature/v1 verifier.
type Witness struct {
	Name     string
	VKey     string
	verifier note.Verifier
}

// NewWitness parses a witness's note verifier key ("<name>+<hash>+<base64>"),
// an Ed25519 cosignature/v1 key (algorithm 0x04), or a plain Ed25519 key
// (0x01), which transparency-dev/formats treats as the same key signing
// cosignature/v1.
//
// The key hash in the vkey must be the one of its name and key (formats
// does not check it): a vkey of a plain Ed25519 key is checked by
// x/mod's note.NewVerifier, a cosignature/v1 one against the verifier's
// own hash.
func NewWitness(vkey string) (Witness, error) {
	vkey = strings.TrimSpace(vkey)
	v, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		return Witness{}, fmt.Errorf("witness key %q: %w", vkey, err)
	}
	if _, err := note.NewVerifier(vkey); err != nil {
		// Not a plain Ed25519 key: its hash must be the cosignature/v1
		// verifier's.
		parts := strings.SplitN(vkey, "+", 3)
		if len(parts) != 3 || parts[1] != fmt.Sprintf("%08x", v.KeyHash()) {
			return Witness{}, fmt.Errorf("witness key %q: the key hash is not that of its name and key", vkey)
		}
	}
	return Witness{Name: v.Name(), VKey: vkey, verifier: v}, nil
}

// ErrCosignature is wrapped by every failure of VerifyCosignature.
var ErrCosignature = errors.New("cosignature does not verify")

// VerifyCosignature checks that line ("— <name> <base64>", with or without
// its newline) is w's valid cosignature/v1 signature on the checkpoint of
// signedNote (its text, whatever signature lines the note already has).
func (w Witness) VerifyCosignature(signedNote []byte, line string) error {
	text, _, ok := strings.Cut(string(signedNote), "\n\n")
	if !ok {
		return fmt.Errorf("%w: the checkpoint is not a signed note", ErrCosignature)
	}
	line = strings.TrimSuffix(line, "\n")
	if strings.Contains(line, "\n") {
		return fmt.Errorf("%w: more than one line", ErrCosignature)
	}
	n, err := note.Open([]byte(text+"\n\n"+line+"\n"), note.VerifierList(w.verifier))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCosignature, err)
	}
	for _, s := range n.Sigs {
		if s.Name == w.Name && s.Hash == w.verifier.KeyHash() {
			return nil
		}
	}
	return fmt.Errorf("%w: not signed by %s", ErrCosignature, w.Name)
}

// Cosigners returns the names, in ws's order, of the witnesses among ws that
// one of lines validly cosigns signedNote for. Lines of unknown witnesses and
// lines that do not verify are ignored.
func Cosigners(signedNote []byte, lines []string, ws []Witness) []string {
	out := []string{}
	for _, w := range ws {
		for _, l := range lines {
			if w.VerifyCosignature(signedNote, l) == nil {
				out = append(out, w.Name)
				break
			}
		}
	}
	return out
}

// Quorum is the outcome of requiring cosignatures on one checkpoint.
type Quorum struct {
	Required int
	// Cosigned names the witnesses with a valid cosignature; Missing the
	// others, in the order the witnesses were given.
	Cosigned []string
	Missing  []string
}

// Met reports whether at least Required witnesses cosigned.
func (q Quorum) Met() bool { return len(q.Cosigned) >= q.Required }

// CheckQuorum requires n of ws to have cosigned signedNote by lines.
func CheckQuorum(signedNote []byte, lines []string, ws []Witness, n int) Quorum {
	q := Quorum{Required: n, Cosigned: Cosigners(signedNote, lines, ws), Missing: []string{}}
	for _, w := range ws {
		if !slices.Contains(q.Cosigned, w.Name) {
			q.Missing = append(q.Missing, w.Name)
		}
	}
	return q
}

// Error is the quorum's shortfall, naming the witnesses missing.
func (q Quorum) Error() string {
	return fmt.Sprintf("witness quorum not met: %d of %d required cosignatures (cosigned: %s; missing: %s)",
		len(q.Cosigned), q.Required, listOrNone(q.Cosigned), listOrNone(q.Missing))
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
