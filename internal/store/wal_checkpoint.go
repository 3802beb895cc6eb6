package store

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// WAL checkpoints off the writer (SQLite).
//
// A WAL checkpoint copies the pages committed to the WAL back into the
// database file and fsyncs it. Run by SQLite's automatic checkpoint it happens
// inside the writer's COMMIT, so every few thousand appends one group commit
// stalled for the whole copy, several normal batches long, and every request
// queued behind it waited too: that stall was the append p99
// (docs/performance.md).
//
// Instead the writer's connection counts the WAL frames it commits and, past
// walCheckpointEveryFrames, asks a background goroutine to checkpoint PASSIVE on a
// connection of its own: the bulk copy runs on the other core while the writer
// goes on committing. A passive checkpoint stops at the frames that existed
// when it began, and SQLite only rewinds the WAL once every frame is copied, so
// the background goroutine checkpoints in rounds until little is left, and then
// the writer runs one more passive checkpoint between two batches: it copies
// only the frames committed during the last round. The next write then starts
// the WAL from its beginning again. SQLite's own automatic checkpoint stays on,
// at a larger size (walAutocheckpointPages), as the backstop that bounds the
// WAL if the background one cannot keep up.
//
// Frames, not events, are what a checkpoint copies and what the WAL's size is:
// a single append writes three to four (one page of most B-trees its row
// touches), a batch row well under one, since a batch's rows share their pages.
// Counted in events, batch ingest checkpointed — and the writer caught up, with
// an fsync of the database file — far more often than appends for the same
// WAL (docs/performance.md). They are counted in frames whatever the page
// size, so a database of 2 KiB pages checkpoints half the bytes, twice as
// often; counting them in bytes of WAL instead saved ~5 % of an append's
// bytes and showed nothing else (docs/performance.md "2 KiB pages and a
// smaller writer's cache").
const (
	// walCheckpointEveryFrames is the WAL frames committed between background
	// checkpoints: ~47 MiB of 2 KiB pages (~94 MiB of 4 KiB), about 6,000
	// single appends.
	walCheckpointEveryFrames = 24000
	// walAutocheckpointPages is SQLite's own checkpoint, the backstop.
	walAutocheckpointPages = 40000
	// catchUpFrames is what the writer may be left to copy; walCheckpointRounds
	// bounds the background runs that shrink the remainder down to it.
	catchUpFrames       = 300
	walCheckpointRounds = 8
)

type walCheckpointer struct {
	db *sql.DB
	// frames counts the WAL frames committed since the last background
	// checkpoint began; every is its threshold (walCheckpointEveryFrames; tests
	// lower it).
	frames atomic.Int64
	every  int64
	// written counts every WAL frame the writer's commits wrote since the
	// store opened: the pages its transactions dirtied (Store.WALFramesWritten).
	written atomic.Int64
	kick    chan struct{}
	// copied is set when a background checkpoint left the writer a small
	// remainder to copy (CatchUpWALCheckpoint).
	copied  atomic.Bool
	stop    chan struct{}
	stopped sync.WaitGroup
	closing sync.Once
	// runs counts background checkpoints (Store.WALCheckpoints); faults counts
	// checkpoint connections replaced after a storage fault. They are kept
	// apart from Store.IOFaults: the frames a failed checkpoint did not copy
	// are still in the WAL, so no write of the writer is in doubt.
	runs, faults atomic.Int64
	// Tests only: ran hears of every finished background run; afterRound
	// runs after each checkpoint round (to commit during a run).
	ran        chan struct{}
	afterRound func()
}

func newWALCheckpointer() *walCheckpointer {
	return &walCheckpointer{every: walCheckpointEveryFrames, kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// start runs the background loop on db, the WAL checkpointer's own connection.
func (c *walCheckpointer) start(db *sql.DB) {
	c.db = db
	c.stopped.Add(1)
	go c.loop()
}

func (c *walCheckpointer) loop() {
	defer c.stopped.Done()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		// An error (SQLITE_BUSY while another checkpoint runs, or a storage
		// fault, after which the connection is replaced) only means this run
		// copied less; the automatic checkpoint remains the backstop.
		ran, leftover := c.copyBulk()
		if ran {
			c.runs.Add(1)
		}
		if leftover {
			c.copied.Store(true)
		}
		if c.ran != nil {
			select {
			case c.ran <- struct{}{}:
			default:
			}
		}
	}
}

// copyBulk checkpoints in rounds, each copying what the writer committed
// during the previous one, until a round left little to copy (fewer than
// catchUpFrames frames behind the WAL's end), so that the writer's catch-up is
// short. It reports whether it copied anything (ran) and whether the writer
// should catch up (leftover). A reader on an old snapshot can hold the copy
// back: then the writer must not catch up (it would copy the bulk itself,
// the stall this avoids); the next run, or SQLite's backstop, goes on.
func (c *walCheckpointer) copyBulk() (ran, leftover bool) {
	prev := int64(-1)
	for range walCheckpointRounds {
		var busy, log, copied int64
		err := c.db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &copied)
		if c.afterRound != nil {
			c.afterRound()
		}
		if err != nil || busy != 0 || copied < 0 {
			// Busy: another checkpoint holds the lock (the writer's catch-up
			// or SQLite's backstop); rounds before this one still count.
			return prev >= 0, false
		}
		if log < prev {
			return true, false // the WAL started over meanwhile
		}
		if log-copied >= catchUpFrames {
			prev = log
			continue // held back by a reader, or far behind: try again
		}
		if prev >= 0 && log-prev < catchUpFrames {
			return true, true // little new since the last round, little left
		}
		prev = log
	}
	return prev >= 0, false
}

func (c *walCheckpointer) close() error {
	var err error
	c.closing.Do(func() {
		close(c.stop)
		c.stopped.Wait()
		err = c.db.Close()
	})
	return err
}

// Checkpoints is how many background checkpoints completed (0 on PostgreSQL).
func (s *Store) WALCheckpoints() int64 {
	if s.walCkpt == nil {
		return 0
	}
	return s.walCkpt.runs.Load()
}

// WALFramesWritten is how many WAL frames the writer's commits wrote since
// the store opened (0 on PostgreSQL): one per page a transaction dirtied, so
// divided by the appends it is the pages an append writes before the
// checkpoint copies them (docs/bench.md "The report").
func (s *Store) WALFramesWritten() int64 {
	if s.walCkpt == nil {
		return 0
	}
	return s.walCkpt.written.Load()
}

// WALCheckpointFaults is how many background checkpoint connections were
// replaced after a storage fault (0 on PostgreSQL).
func (s *Store) WALCheckpointFaults() int64 {
	if s.walCkpt == nil {
		return 0
	}
	return s.walCkpt.faults.Load()
}

// committed hears of a commit of the writer's connection and the WAL frames
// it wrote (cachingConn.reportFrames).
func (c *walCheckpointer) committed(frames int64) {
	c.written.Add(frames)
	if c.frames.Add(frames) < c.every {
		return
	}
	c.frames.Store(0)
	select {
	case c.kick <- struct{}{}:
	default: // one is already pending
	}
}

// CatchUpWALCheckpoint runs on the writer between two transactions: after a
// background checkpoint it copies the few frames committed meanwhile, so that
// the WAL can start over. It is a no-op otherwise and on PostgreSQL.
func (s *Store) CatchUpWALCheckpoint(ctx context.Context) {
	c := s.walCkpt
	if c == nil || !c.copied.Swap(false) {
		return
	}
	s.write.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)") // errors: see loop
}
