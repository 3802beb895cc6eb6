package witness

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/storage/posix"
	"golang.org/x/mod/sumdb/note"
)

// Interop with a log no one here wrote: a Tessera log (transparency-dev/tessera
// v1.0.4, POSIX storage in a temporary directory) with our witness as the one
// witness its policy requires. Tessera's own witness client submits every
// checkpoint (its request body, its consistency proofs from the tiles) and
// publishes a checkpoint only once our cosignature verifies under our vkey.
// Then the log is restarted against a second witness of the same key that
// holds nothing (a witness whose state was lost): Tessera sends its old size,
// reads our 409 (text/x.tlog.size "0"), resubmits from 0 and is cosigned.
func TestTesseraLogIsWitnessed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const origin = "example.com/tessera-interop"
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	logSigner, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	logVerifier, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	logs := NewLogs()
	if err := logs.AddLog("", vkey); err != nil {
		t.Fatal(err)
	}
	wkey, _, err := GenerateKey("witness.test/w1")
	if err != nil {
		t.Fatal(err)
	}
	tw := openTestWitness(t, "", wkey, logs)
	cosigVerifier, err := fnote.NewVerifierForCosignatureV1(tw.vkey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	// run starts Tessera on dir, adds n entries and returns the checkpoint
	// published with them.
	entry := 0
	run := func(tw *testWitness, n int) log.Checkpoint {
		t.Helper()
		// Tessera's loops run until their context ends: one per run, so
		// that a restarted log is the only one writing dir.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		base, _ := url.Parse(tw.url)
		ours, err := tessera.NewWitness(tw.vkey, base)
		if err != nil {
			t.Fatalf("tessera.NewWitness with our vkey: %v", err)
		}
		driver, err := posix.New(ctx, posix.Config{Path: dir})
		if err != nil {
			t.Fatal(err)
		}
		appender, shutdown, reader, err := tessera.NewAppender(ctx, driver, tessera.NewAppendOptions().
			WithCheckpointSigner(logSigner).
			WithBatching(16, 20*time.Millisecond).
			WithCheckpointInterval(100*time.Millisecond).
			WithWitnesses(tessera.NewWitnessGroup(1, ours), &tessera.WitnessOptions{Timeout: 20 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := shutdown(ctx); err != nil {
				t.Errorf("tessera shutdown: %v", err)
			}
		}()
		awaiter := tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, 20*time.Millisecond)
		var last tessera.IndexFuture
		for range n {
			last = appender.Add(ctx, tessera.NewEntry(fmt.Appendf(nil, "entry %d", entry)))
			entry++
		}
		waitCtx, stop := context.WithTimeout(ctx, 60*time.Second)
		defer stop()
		idx, published, err := awaiter.Await(waitCtx, last)
		if err != nil {
			t.Fatalf("tessera did not publish entry %d: %v", entry-1, err)
		}
		// Tessera published it, so its policy (our cosignature) was met;
		// check it ourselves too: the log's signature and ours.
		nt, err := note.Open(published, note.VerifierList(logVerifier, cosigVerifier))
		if err != nil || len(nt.Sigs) != 2 {
			t.Fatalf("published checkpoint of index %d does not carry the log's signature and our cosignature (%v):\n%s", idx.Index, err, published)
		}
		var cp log.Checkpoint
		if _, err := cp.Unmarshal([]byte(nt.Text)); err != nil {
			t.Fatal(err)
		}
		return cp
	}

	first := run(tw, 10)
	second := run(tw, 25)
	if second.Size <= first.Size {
		t.Fatalf("sizes %d then %d", first.Size, second.Size)
	}
	if rec, err := tw.state.Get(ctx, origin); err != nil || rec.Size < second.Size {
		t.Fatalf("our record of the Tessera log: size %d (%v), want at least the published %d", rec.Size, err, second.Size)
	}

	fresh := openTestWitness(t, "", wkey, logs)
	before := fresh.conflicts()
	third := run(fresh, 5)
	if fresh.conflicts() == before {
		t.Fatalf("the fresh witness answered no 409 (%v): Tessera's client did not meet the conflict path", fresh.statuses)
	}
	if rec, err := fresh.state.Get(ctx, origin); err != nil || rec.Size < third.Size {
		t.Fatalf("the fresh witness's record: size %d (%v), want at least %d", rec.Size, err, third.Size)
	}
}
