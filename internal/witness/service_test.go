package witness

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
	"github.com/auditchain/auditchain/pkg/verify"
)

// The witness follows a real auditchain service's account log: every block
// from GET /v1/chain/blocks, each submitted with the consistency proof the
// service serves from the size the witness holds, is cosigned, and the
// cosignature verifies with formats' cosignature/v1 verifier beside the
// service's signature. A block older than what it holds is refused with 409.
func TestWitnessCosignsARealServiceLog(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		srv := httpapitest.Start(t, dsn, apptest.Options{})
		userID, token := srv.Account(t, "witnessed@example.com")
		c, err := client.New(srv.URL, token)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := c.ServicePublicKey(ctx)
		if err != nil {
			t.Fatal(err)
		}
		logs := NewLogs()
		if err := logs.AddService(pub); err != nil {
			t.Fatal(err)
		}
		tw := newTestWitness(t, "", logs)
		cosigV, err := fnote.NewVerifierForCosignatureV1(tw.vkey)
		if err != nil {
			t.Fatal(err)
		}
		serviceV, err := verify.CheckpointVerifier(verify.Origin(userID), pub)
		if err != nil {
			t.Fatal(err)
		}

		appendEvents := func(n int) {
			for range n {
				if _, err := c.AppendNext(ctx, client.Event{EventType: "tool_call", Raw: map[string]any{"n": 1}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// submit sends a block from the size the witness holds, with the
		// service's proof, and checks the cosignature.
		var held uint64
		submit := func(b api.Block) {
			t.Helper()
			var proof [][]byte
			if held > 0 && uint64(b.TreeSize) != held {
				second := uint64(b.TreeSize)
				p, err := c.ConsistencyProof(ctx, held, &second)
				if err != nil {
					t.Fatal(err)
				}
				if p.SecondCheckpoint == nil || p.SecondCheckpoint.Note != b.Note {
					t.Fatalf("the proof's second checkpoint is not block %d", b.Index)
				}
				for _, h := range p.Proof {
					raw, err := base64.StdEncoding.DecodeString(h)
					if err != nil {
						t.Fatal(err)
					}
					proof = append(proof, raw)
				}
			}
			cosig := tw.mustCosign(held, proof, []byte(b.Note))
			n, err := note.Open(append([]byte(b.Note), cosig...), note.VerifierList(cosigV, serviceV))
			if err != nil || len(n.Sigs) != 2 {
				t.Fatalf("block %d with its cosignature: %v (sigs %+v)", b.Index, err, n)
			}
			held = uint64(b.TreeSize)
		}

		appendEvents(3)
		blocks := allBlocks(t, c)
		if len(blocks) == 0 || blocks[0].TreeSize == 0 {
			t.Fatalf("no block after 3 appends: %+v", blocks)
		}
		for _, b := range blocks {
			submit(b)
		}
		first := blocks[len(blocks)-1]
		appendEvents(5)
		blocks = allBlocks(t, c)
		for _, b := range blocks {
			if uint64(b.TreeSize) > held {
				submit(b)
			}
		}
		newest := blocks[len(blocks)-1]
		if held != uint64(newest.TreeSize) || held < 8 {
			t.Fatalf("witness holds size %d, the newest block has %d (8 appends)", held, newest.TreeSize)
		}
		// The block it cosigned first, sent again from 0 or as news: 409.
		tw.mustConflict(addBody(0, nil, []byte(first.Note)), held)
		if status, _, _ := tw.add(addBody(held, nil, []byte(first.Note))); status != http.StatusBadRequest {
			t.Fatalf("old %d with the older block of size %d: %d, want 400", held, first.TreeSize, status)
		}
		// The monitoring path serves the last block with both signatures.
		cp, ok, err := tw.w.Checkpoint(ctx, OriginHash(verify.Origin(userID)))
		if err != nil || !ok {
			t.Fatalf("monitoring checkpoint: %v %v", ok, err)
		}
		if n, err := note.Open(cp, note.VerifierList(cosigV, serviceV)); err != nil || len(n.Sigs) != 2 {
			t.Fatalf("the served checkpoint does not carry both signatures: %v", err)
		}
		// The service's own check of a block ignores the cosignature.
		if _, err := verify.OpenCheckpoint(cp, pub, verify.Origin(userID)); err != nil {
			t.Fatalf("verify.OpenCheckpoint of the cosigned block: %v", err)
		}
		if !bytes.HasPrefix(cp, []byte(newest.Note)) {
			t.Fatalf("served checkpoint is not the newest block:\n%s", cp)
		}
	})
}

// allBlocks reads every block of the account, oldest first.
func allBlocks(t *testing.T, c *client.Client) []api.Block {
	t.Helper()
	var out []api.Block
	var cursor *int64
	for {
		page, err := c.Blocks(context.Background(), cursor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Blocks...)
		if page.NextCursor == nil {
			return out
		}
		cursor = page.NextCursor
	}
}

// The attack witnesses exist for: a second database from the same service
// key (a backup restored beside the live store, here a snapshot of its
// SQLite file at 3 events) grows another history of the same account. The
// witness, which cosigned the live one, refuses every checkpoint of the
// fork, and keeps the live one. (The witness sees only checkpoints, so one
// store kind shows it: a snapshot of a PostgreSQL database would fork the
// same way.)
func TestWitnessRefusesAForkFromASecondDatabase(t *testing.T) {
	ctx := context.Background()
	dsnA := storetest.DSN(t, storetest.SQLite)
	live := httpapitest.Start(t, dsnA, apptest.Options{})
	userID, token := live.Account(t, "forked@example.com")
	a, err := client.New(live.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	appendN := func(c *client.Client, n int, tag string) {
		t.Helper()
		for i := range n {
			if _, err := c.AppendNext(ctx, client.Event{EventType: "tool_call", Raw: map[string]any{"tag": tag, "i": i}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(a, 3, "shared")
	allBlocks(t, a) // seals the tip

	// The snapshot: a consistent copy of the live file (VACUUM INTO).
	pathB := filepath.Join(t.TempDir(), "fork.db")
	db, err := sql.Open("sqlite", strings.TrimPrefix(dsnA, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, pathB); err != nil {
		t.Fatal(err)
	}
	db.Close()

	pub, err := a.ServicePublicKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logs := NewLogs()
	if err := logs.AddService(pub); err != nil {
		t.Fatal(err)
	}
	tw := newTestWitness(t, "", logs)
	submitProved := func(c *client.Client, old uint64, b api.Block) (int, string) {
		t.Helper()
		var proof [][]byte
		if old > 0 && old < uint64(b.TreeSize) {
			second := uint64(b.TreeSize)
			p, err := c.ConsistencyProof(ctx, old, &second)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range p.Proof {
				raw, _ := base64.StdEncoding.DecodeString(h)
				proof = append(proof, raw)
			}
		}
		status, body, _ := tw.add(addBody(old, proof, []byte(b.Note)))
		return status, body
	}
	newest := func(c *client.Client) api.Block { bs := allBlocks(t, c); return bs[len(bs)-1] }

	appendN(a, 3, "live")
	first := allBlocks(t, a)[0]
	if status, body := submitProved(a, 0, first); status != 200 {
		t.Fatalf("live block of %d: %d %s", first.TreeSize, status, body)
	}
	liveTip := newest(a)
	if status, body := submitProved(a, uint64(first.TreeSize), liveTip); status != 200 {
		t.Fatalf("live block of %d: %d %s", liveTip.TreeSize, status, body)
	}

	fork := httpapitest.Start(t, "sqlite:"+pathB, apptest.Options{})
	b, err := client.New(fork.URL, token) // the same account, key and service key
	if err != nil {
		t.Fatal(err)
	}
	if forkPub, err := b.ServicePublicKey(ctx); err != nil || !forkPub.Equal(pub) {
		t.Fatalf("the fork's service key: %v", err)
	}
	appendN(b, 3, "forked")
	allBlocks(t, b) // a block at the live tip's size, another root
	appendN(b, 2, "forked more")
	forkTip := newest(b)
	if forkTip.TreeSize <= liveTip.TreeSize || !strings.HasPrefix(forkTip.Note, verify.Origin(userID)+"\n") {
		t.Fatalf("fork tip %d (live %d):\n%s", forkTip.TreeSize, liveTip.TreeSize, forkTip.Note)
	}
	held := uint64(liveTip.TreeSize)
	if status, body := submitProved(b, held, forkTip); status != http.StatusUnprocessableEntity {
		t.Fatalf("the fork's tip, with the fork's proof from the size held: %d %s, want 422", status, body)
	}
	tw.mustConflict(addBody(0, nil, []byte(forkTip.Note)), held)
	sameSize := 0
	for _, blk := range allBlocks(t, b) {
		if uint64(blk.TreeSize) == held {
			sameSize++
			if status, body := submitProved(b, held, blk); status != http.StatusUnprocessableEntity {
				t.Fatalf("the fork's block of the held size: %d %s, want 422", status, body)
			}
		}
	}
	if sameSize != 1 {
		t.Fatalf("the fork has %d blocks of the held size %d, want 1", sameSize, held)
	}
	rec, err := tw.state.Get(ctx, verify.Origin(userID))
	if err != nil || rec.Size != held || string(rec.Checkpoint[:len(liveTip.Note)]) != liveTip.Note {
		t.Fatalf("the witness's record after the fork: size %d (%v), want the live block of %d", rec.Size, err, held)
	}
}
