package store

import (
	"context"
	"path/filepath"
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

// The WAL is copied back by the background checkpointer, and after the
// writer's short catch-up the next transaction starts the WAL over: it does
// not grow with the writes, and SQLite's own checkpoint (inside a COMMIT) is
// left with nothing to do.
func TestCheckpointInTheBackgroundLetsTheWALStartOver(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.write.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	write := func(rows int) {
		t.Helper()
		tx, err := s.write.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range rows {
			if _, err := tx.Exec(`INSERT INTO t (v) VALUES (randomblob(3000))`); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	ran := s.CheckpointRan()
	for range 5 {
		write(50)                // ~50 pages each
		s.CatchUpCheckpoint(ctx) // no background run yet: nothing to do
	}
	// A reader on an older snapshot stops the background copy at its frame,
	// as a commit during the background run leaves frames after it.
	reader, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		write(50)
	}
	select {
	case <-ran:
		t.Fatal("a background checkpoint ran before checkpointEvery rows were reported")
	default:
	}
	s.Wrote(checkpointEvery - 1)
	s.Wrote(1)
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("no background checkpoint after checkpointEvery rows")
	}
	if s.Checkpoints() != 1 {
		t.Fatalf("Checkpoints() = %d, want 1", s.Checkpoints())
	}
	reader.Rollback()
	// The writer catches up between two transactions, and the next one
	// starts the WAL over.
	s.CatchUpCheckpoint(ctx)
	write(1)
	if got := walFrames(t, s); got > 10 {
		t.Fatalf("the WAL holds %d frames after the catch-up and one small transaction: it did not start over", got)
	}
}
