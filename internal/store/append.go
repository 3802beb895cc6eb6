package store

// Appending events: the store's entry points for every event written, by
// clients or by the service (docs/decisions/record.md "One write seam").
//
//   - AppendEvent: one event at an account's head, inside a transaction that
//     holds the head (both stores) or, on PostgreSQL, as one self-contained
//     statement against a head the caller read (compare-and-set);
//   - AppendRun: a run of one account's events (batch ingest);
//   - AppendAcross (PostgreSQL): single events of several accounts in one
//     statement, the PostgreSQL counterpart of SQLite's shared transaction.
//
// Each of them moves the head, charges the daily quota when asked, numbers
// the events per machine, inserts the rows and grows the account's Merkle
// tree in the same statement or transaction — but for a single append on
// SQLite, whose Merkle rows the writer stores behind it, with its account's
// other rows waiting to be indexed (merkle_behind_sqlite.go). LeafRows
// computes the rows one leaf adds, appendLeaves those of a run, and
// growTails those of the tail. PostgreSQL's statements are in append_pg.go and append_pg_batch.go,
// SQLite's in append_sqlite.go.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/pkg/verify"
)

// Append is one event for AppendEvent or AppendAcross.
type Append struct {
	// Event is the row to store. AppendEvent sets its LeafIndex (the
	// expected head's event count) and its MachineSequence.
	Event *Event
	// Expect is the head the event extends: the head moves only if its
	// event_count, last_sequence and last_hash are still these
	// (compare-and-set). A single event always becomes the tip.
	Expect Head
	// Quota, when set, charges the event against the account's daily quota
	// (client events); nil for the events the service writes, which never
	// spend it (docs/decisions/record.md "Quota").
	Quota *Quota
	// Hashes are the Merkle rows the event's leaf adds (LeafRows). Nil:
	// AppendEvent computes them through its transaction.
	Hashes []merkle.StoredHash
	// TreeCheck, when set, is a Merkle row of the account without which the
	// statement writes nothing, as if the head had moved: the caller computed
	// Hashes from a frontier it remembered, and the row shows the tree those
	// hashes extend is still there (TreeCheckIndex). PostgreSQL only.
	TreeCheck *int64
	// NotifyChannel and NotifyPayload, when the channel is not empty, are
	// sent with pg_notify by the same statement while a replica streams the
	// account (MarkListened); PostgreSQL delivers the notification only if
	// the transaction commits. PostgreSQL only.
	NotifyChannel, NotifyPayload string
	// Remembered, when set, says that Expect was not read under the lock
	// but remembered by the sole writer from its own commits (SQLite;
	// writer/headmemo.go), with what else it remembers of the head row. The
	// row must then also still hold Expect.SigningKeysGen and what
	// Remembered names: a head that is not the row's answers HeadMoved and
	// writes nothing, so that a remembered head that went wrong can never
	// decide an append. SQLite only.
	Remembered *Remembered
}

// Remembered is what the writer remembers of a head row besides its tip:
// the approval rules generation, the row's counters, and the events of the
// event's machine (0: not known). The statements write the values that
// follow and compare the ones they replace, instead of incrementing and
// returning them (a RETURNING costs SQLite a temporary table per
// statement); a row that does not hold them answers HeadMoved (the head's)
// or is incremented as without them (the machine's count).
type Remembered struct {
	RulesGen      int64
	Counters      HeadCounters
	MachineEvents int64
}

// HeadCounters are the counters SQLite keeps in an account's head row
// besides its tip (migration 011): the day the quota counts and its usage
// that day, and the events without a machine.
type HeadCounters struct {
	QuotaDay       *string
	QuotaUsed      int64
	WithoutMachine int64
}

// Quota is the daily quota an append is charged against.
type Quota struct {
	Day   string // the UTC day (domain.QuotaDay)
	Limit int64
}

// Appended is how an append turned out.
type Appended struct {
	// HeadMoved is true when the head was no longer Expect, or the Merkle
	// row TreeCheck names is missing: nothing was written (only appends
	// without a transaction, and remembered heads, can see it; a head read
	// under the lock cannot move).
	HeadMoved bool
	// QuotaOK is false when a charged event would exceed the daily quota;
	// QuotaUsed is not filled then (read it with QuotaUsed). Always true for
	// an uncharged event.
	QuotaOK   bool
	QuotaUsed int64
	// Inserted is false when the event_id is already stored (ErrConflict's
	// case).
	Inserted bool
	// Counters are the head row's counters after a stored append, and
	// MachineEvents the events of the event's machine (0 for an event
	// without one). SQLite only.
	Counters      HeadCounters
	MachineEvents int64
}

// Stored reports whether the event, its Merkle rows and the head's move
// are all written.
func (c Appended) Stored() bool { return !c.HeadMoved && c.QuotaOK && c.Inserted }

// AppendEvent appends a.Event at the head a.Expect. With tx (both stores),
// tx holds the account's head (LockHead), read as a.Expect; a refusal
// (QuotaOK or Inserted false) may have moved the head and the quota, so the
// caller must roll tx back. Without tx (PostgreSQL only) the append is one
// statement that writes everything or nothing: Stored() or nothing written —
// the head had moved, or the quota or the event_id refused the event — and
// the caller must take the locked path, which orders the append against the
// others and tells those outcomes apart. With a remembered head (SQLite,
// Append.Remembered), HeadMoved reports a head that was not the row's.
func (s *Store) AppendEvent(ctx context.Context, tx *sql.Tx, a Append) (Appended, error) {
	a.Event.LeafIndex = a.Expect.EventCount
	if a.Remembered != nil && (s.Dialect != SQLite || tx == nil) {
		return Appended{}, errors.New("a remembered head is SQLite's, in a transaction")
	}
	if tx == nil {
		if s.Dialect != Postgres {
			return Appended{}, errors.New("an append without a transaction is PostgreSQL only")
		}
		if a.Hashes == nil {
			return Appended{}, errors.New("an append without a transaction needs its Merkle rows")
		}
		out, err := s.appendStatement(ctx, s.write, a, true)
		if errors.Is(err, errAppendAborted) {
			return Appended{}, nil
		}
		return out, err
	}
	if s.Dialect == SQLite {
		// No Merkle row: the row is the tail's, whose tree is built behind
		// (merkle_behind_sqlite.go).
		return s.appendEventSQLite(ctx, tx, a)
	}
	if a.Hashes == nil {
		var err error
		if a.Hashes, err = s.LeafRows(ctx, tx, a.Event, nil); err != nil {
			return Appended{}, err
		}
	}
	out, err := s.appendStatement(ctx, tx, a, false)
	if err == nil && out.HeadMoved {
		return out, fmt.Errorf("append: the locked head of %s moved", a.Event.UserID)
	}
	return out, err
}

// LeafRows returns the Merkle rows that appending e's leaf (at e.LeafIndex)
// adds. With tree, they are computed from the hashes it serves (a frontier
// the caller holds; a missing one is ErrMissingHash); otherwise they are read
// through tx, and an account whose tree is missing rows is built first
// (LeafHashes).
func (s *Store) LeafRows(ctx context.Context, tx *sql.Tx, e *Event, tree merkle.HashReader) ([]merkle.StoredHash, error) {
	if tree == nil {
		return s.LeafHashes(ctx, tx, e)
	}
	leaf, err := verify.HashBytes(e.PayloadHash)
	if err != nil {
		return nil, err
	}
	return merkle.AppendLeaf(e.LeafIndex, leaf, tree)
}

// TreeCheckIndex is the stored hash the append of leaf n > 0 checks when it
// reads none from the store: the tree of n leaves' last, the top hash leaf
// n-1's append wrote. Any complete tree of n leaves holds it, and a tree cut
// short at its end does not (leaf n-1's first hash, checked before, missed a
// lost top row of an append that wrote several; on SQLite, the second row of
// a run of more than four).
func TreeCheckIndex(n int64) int64 { return tlog.StoredHashIndex(0, n) - 1 }

// Run is a run of one account's events for AppendRun (batch ingest).
type Run struct {
	UserID string
	// Head is the account's head, locked by the caller's transaction.
	Head Head
	// Events are stored in this order, each taking the next leaf; any
	// sequence not stored yet, below or above the tip, with gaps. AppendRun
	// sets their LeafIndex, MachineSequence and BelowTip.
	Events []Event
	// Quota charges len(Events) against the daily quota; a run is refused
	// whole, even an empty one, once the quota is used up (CONTRACT.md
	// "Batch": an account over its quota gets 429 whatever it sent).
	Quota Quota
	// NotifyChannel and NotifyPayloads (one per event), as for Append.
	// PostgreSQL only.
	NotifyChannel  string
	NotifyPayloads []string
}

// RunOutcome is how AppendRun turned out.
type RunOutcome struct {
	// QuotaOK is false when the run does not fit the daily quota: nothing
	// was written. QuotaUsed is the day's usage either way.
	QuotaOK   bool
	QuotaUsed int64
	// Head is the account's head after the run.
	Head Head
}

// AppendRun stores run.Events inside tx, which holds the account's head
// (run.Head): the quota, then the rows (one multi-row INSERT per chunk),
// their Merkle leaves (computed from the tree's frontier, written in one
// statement per chunk), the machine counters and one head update. The
// caller has checked that no event_id or sequence is stored; a conflict
// anyway is ErrConflict, and the caller must roll tx back.
func (s *Store) AppendRun(ctx context.Context, tx *sql.Tx, run Run) (RunOutcome, error) {
	n := int64(len(run.Events))
	used, ok, err := s.ConsumeQuota(ctx, tx, run.UserID, run.Quota.Day, n, run.Quota.Limit)
	if err != nil || !ok {
		return RunOutcome{QuotaUsed: used, Head: run.Head}, err
	}
	out := RunOutcome{QuotaOK: true, QuotaUsed: used, Head: run.Head}
	if n == 0 {
		return out, nil
	}
	evs := run.Events
	// machine_sequence counts each machine's stored events: read the
	// counters of the run's machines once, number the rows, store once.
	counts, err := s.MachineSequences(ctx, tx, run.UserID, machinesOf(evs))
	if err != nil {
		return out, err
	}
	head := run.Head
	for i := range evs {
		e := &evs[i]
		e.LeafIndex = head.EventCount
		m := machineOf(e)
		e.MachineSequence = counts[m]
		counts[m]++
		// The tip is the stored event with the highest sequence (CONTRACT.md
		// "Batch"); a row below it is marked, for the leaf-order reads.
		if head.EventCount == 0 || e.Sequence > head.LastSequence {
			head.LastSequence, head.LastHash, head.LastEventID = e.Sequence, &e.PayloadHash, &e.EventID
		} else {
			e.BelowTip = true
		}
		head.EventCount++
	}
	if err := s.insertEvents(ctx, tx, run.UserID, evs); err != nil {
		return out, err
	}
	if err := s.appendLeaves(ctx, tx, evs); err != nil {
		return out, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE chain_heads SET last_sequence = $2, last_hash = $3, last_event_id = $4, event_count = $5
		WHERE user_id = $1`, run.UserID, head.LastSequence, head.LastHash, head.LastEventID, head.EventCount); err != nil {
		return out, err
	}
	if err := s.SetMachineSequences(ctx, tx, run.UserID, counts); err != nil {
		return out, err
	}
	if err := s.notifyRun(ctx, tx, run); err != nil {
		return out, err
	}
	out.Head = head
	return out, nil
}

// machineOf is the machine counter an event counts on ("" without machine_id).
func machineOf(e *Event) string {
	if e.MachineID == nil {
		return ""
	}
	return *e.MachineID
}

// machinesOf lists the distinct machine counters of evs.
func machinesOf(evs []Event) []string {
	seen := make(map[string]bool, 1)
	var out []string
	for i := range evs {
		if m := machineOf(&evs[i]); !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}
