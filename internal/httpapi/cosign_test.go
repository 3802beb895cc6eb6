package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/verify"
)

// A witness's cosignature stored with a block (as the witness job stores
// it) is served with that block wherever the API shows it — the blocks
// page, the proofs' checkpoints — and carried by the export's checkpoint
// line, where the offline verifier reports it on the last checkpoint; a
// block without one has cosignatures []. Responses are checked against the
// OpenAPI document as every answer here is.
func TestChainBlocksCarryCosignatures(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		c := newIntegChain(e, "cosign@example.com")
		c.addN(t, 3)
		c.verifyChain(t) // seals block 0 at size 3
		skey, vkey, err := note.GenerateKey(rand.Reader, "witness.example/api")
		if err != nil {
			t.Fatal(err)
		}
		signer, _ := fnote.NewSignerForCosignatureV1(skey)
		w, err := verify.NewWitness(vkey)
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.store.LastBlock(context.Background(), nil, c.user)
		if err != nil {
			t.Fatal(err)
		}
		text, _, _ := strings.Cut(string(b.Note), "\n\n")
		signed, err := note.Sign(&note.Note{Text: text + "\n"}, signer)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(signed), "\n"), "\n")
		line := lines[len(lines)-1]
		ctx := context.Background()
		tx, err := e.store.WriteDB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.InsertCosignature(ctx, tx, c.user, b.Index, store.Cosignature{Witness: w.Name, Signature: line}, 1); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		c.addN(t, 2)

		cosigsOf := func(v any) []any { return v.(map[string]any)["cosignatures"].([]any) }
		page := e.do("GET", "/v1/chain/blocks", c.token, nil).JSON(t) // seals block 1 at size 5
		blocks := page["blocks"].([]any)
		if len(blocks) != 2 || len(cosigsOf(blocks[0])) != 1 || cosigsOf(blocks[0])[0] != line || len(cosigsOf(blocks[1])) != 0 {
			t.Fatalf("blocks: %v", blocks)
		}
		if err := w.VerifyCosignature([]byte(blocks[0].(map[string]any)["note"].(string)), cosigsOf(blocks[0])[0].(string)); err != nil {
			t.Fatal(err)
		}
		cp := e.do("GET", "/v1/chain/proof/consistency?first=3", c.token, nil).JSON(t)
		if len(cosigsOf(cp["first_checkpoint"])) != 1 || len(cosigsOf(cp["second_checkpoint"])) != 0 {
			t.Fatalf("consistency proof: %v", cp)
		}
		inc := e.do("GET", "/v1/chain/proof/inclusion?event_id="+c.ids[0]+"&tree_size=3", c.token, nil).JSON(t)
		if len(cosigsOf(inc["checkpoint"])) != 1 {
			t.Fatalf("inclusion proof: %v", inc)
		}

		exp := c.export(t, "?to=3")
		if !bytes.Contains(exp, []byte(`"cosignatures":[`)) {
			t.Fatalf("the export carries no cosignatures:\n%s", exp)
		}
		full := c.export(t, "")
		rep, err := verify.VerifyExport(bytes.NewReader(full), e.app.ServicePublicKey())
		if err != nil {
			t.Fatal(err)
		}
		if rep.LastCheckpoint == nil || rep.LastCheckpoint.Block != 1 || len(rep.LastCheckpoint.Cosignatures) != 0 {
			t.Fatalf("last checkpoint: %+v", rep.LastCheckpoint)
		}
		rep, err = verify.VerifyExport(bytes.NewReader(exp), e.app.ServicePublicKey())
		if err != nil {
			t.Fatal(err)
		}
		if q := verify.CheckQuorum([]byte(rep.LastCheckpoint.Note), rep.LastCheckpoint.Cosignatures, []verify.Witness{w}, 1); q.Met() {
			t.Fatalf("an export ending on block 1 met the quorum of block 0's cosignature: %+v", q)
		}
	})
}
