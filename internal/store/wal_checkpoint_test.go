package store

import (
	"context"
	"testing"
	"time"
)

// walFrames checkpoints what it can and reports the frames in the WAL.
func walFrames(t *testing.T, s *Store) int64 {
	t.Helper()
	var busy, log, copied int64
	if err := s.write.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &copied); err != nil {
		t.Fatal(err)
	}
	return log
}

// checkpointStore opens a store whose background checkpoint runs every
// everyFrames WAL frames, counted from its return, and a write function that
// commits rows of about a page each.
func checkpointStore(t *testing.T, everyFrames int64) (*Store, func(rows int)) {
	t.Helper()
	ctx := context.Background()
	s := testSQLiteStore(t)
	if _, err := s.write.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	s.walCkpt.every = everyFrames
	s.walCkpt.frames.Store(0)
	write := func(rows int) {
		t.Helper()
		tx, err := s.write.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range rows {
			if _, err := tx.Exec(`INSERT INTO t (v) VALUES (randomblob($1))`, sqlitePageSize*3/4); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return s, write
}

func awaitCheckpoint(t *testing.T, ran <-chan struct{}) {
	t.Helper()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("no background checkpoint after its threshold of frames was committed")
	}
}

// The WAL is copied back by the background WAL checkpointer; frames committed
// during its last round are left to the writer's short catch-up, after which
// the next transaction starts the WAL over: it does not grow with the writes,
// and SQLite's own checkpoint (inside a COMMIT) is left with nothing to do.
func TestWALCheckpointInTheBackgroundLetsTheWALStartOver(t *testing.T) {
	ctx := context.Background()
	s, write := checkpointStore(t, 800)
	ran := s.WALCheckpointRan()
	for range 10 {
		write(50)                   // ~50 pages each
		s.CatchUpWALCheckpoint(ctx) // no background run yet: nothing to do
	}
	select {
	case <-ran:
		t.Fatal("a background checkpoint ran before its threshold of frames was committed")
	default:
	}
	// A commit lands while the background run copies (after its rounds
	// have looked at the WAL), as under load.
	rounds := 0
	s.AfterWALCheckpointRound(func() {
		if rounds++; rounds == 2 {
			write(50)
		}
	})
	write(500) // past the threshold: the commit kicks the background run
	awaitCheckpoint(t, ran)
	if s.WALCheckpoints() != 1 {
		t.Fatalf("Checkpoints() = %d, want 1", s.WALCheckpoints())
	}
	s.CatchUpWALCheckpoint(ctx)
	write(1)
	if got := walFrames(t, s); got > 10 {
		t.Fatalf("the WAL holds %d frames after the catch-up and one small transaction: it did not start over", got)
	}
}

// WALFramesWritten counts the frames the writer's commits append to the
// WAL, one per page a transaction dirtied: the pages per append bench
// reports (docs/bench.md). Here the WAL starts over before the writes, so
// its length afterwards is exactly what they wrote.
func TestWALFramesWrittenIsWhatTheWritersCommitsAppendedToTheWAL(t *testing.T) {
	s, write := checkpointStore(t, 1<<40) // no background checkpoint
	write(1)
	walFrames(t, s) // copies the WAL back: the next write starts it over
	before := s.WALFramesWritten()
	write(20) // ~20 pages
	write(5)
	got := s.WALFramesWritten() - before
	if want := walFrames(t, s); got != want || got < 25 {
		t.Fatalf("WALFramesWritten grew by %d over two commits; the WAL holds %d frames (want equal, at least 25)", got, want)
	}
}

// The count goes on across background checkpoints, which start the
// checkpointer's own count of frames over.
func TestWALFramesWrittenCountsAcrossCheckpoints(t *testing.T) {
	s, write := checkpointStore(t, 30)
	ran := s.WALCheckpointRan()
	before := s.WALFramesWritten()
	write(40) // past the threshold: a background checkpoint runs
	awaitCheckpoint(t, ran)
	write(20)
	if got := s.WALFramesWritten() - before; got < 60 {
		t.Fatalf("WALFramesWritten grew by %d over 60 rows of about a page each, across a checkpoint", got)
	}
}

// A reader on an old snapshot holds the background copy back. The writer
// must not then copy the bulk itself in its catch-up (the stall this design
// avoids): it is left to the next run once the reader is gone.
func TestWALCheckpointHeldBackByAReaderIsNotLeftToTheWriter(t *testing.T) {
	ctx := context.Background()
	s, write := checkpointStore(t, 500)
	ran := s.WALCheckpointRan()
	write(50)
	reader, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		write(50)
	}
	awaitCheckpoint(t, ran)
	if s.walCkpt.copied.Load() {
		t.Fatal("a run held back by a reader left its copy to the writer")
	}
	reader.Rollback()
	write(600)
	awaitCheckpoint(t, ran)
	s.CatchUpWALCheckpoint(ctx)
	write(1)
	if got := walFrames(t, s); got > 10 {
		t.Fatalf("the WAL holds %d frames after the reader left and a second run: it did not start over", got)
	}
}

// Closing twice is harmless (cleanup paths do).
func TestStoreCloseTwice(t *testing.T) {
	s, _ := checkpointStore(t, walCheckpointEveryFrames)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.Close()
}
