package writer

import (
	"context"
	"errors"
	"fmt"

	"github.com/auditchain/auditchain/internal/store"
)

// Append is one event to append at its account's tip (Tx.Append,
// Writer.Append): a client's, or one the service writes.
type Append struct {
	// Event is the row to store, its payload_hash computed. Its LeafIndex
	// and MachineSequence are set by the append.
	Event *store.Event
	// Quota, when set, charges the event against the daily quota (client
	// events); nil for the events the service writes, which never spend it.
	Quota *store.Quota
	// Locked asks for the head's lock even where the engine could append
	// without it: a machine's events, whose signing key Place checks again
	// under the lock a key registration also takes (from the head's signing
	// keys generation, or by reading it).
	Locked bool
	// Place decides, against the head the event would extend, whether and
	// how it extends it: a client event that names its place is checked for
	// continuity (an error refuses it, nothing written); a service event, or
	// a client event the service numbers, is numbered after the head (Place
	// then sets Event, and keeps its account when it fails). q reads the account's state as of that head: the transaction, or
	// for an optimistic append the pool, whose later writes the append's
	// compare-and-set on the head rules out. Place may run more than once
	// (against a cached head, then a fresh one) and must not keep state
	// between runs but what its last run decided.
	Place func(ctx context.Context, head store.Head, q store.Querier) error
}

// Appended is an event as stored.
type Appended struct {
	Event store.Event
	// QuotaUsed is the day's usage after a charged event.
	QuotaUsed int64
}

// ErrEventIDTaken refuses an event whose event_id the account already
// stores: the use case tells a replay from a conflict (the stored event is
// immutable, so it can read it after the refusal).
var ErrEventIDTaken = errors.New("the event_id is already stored")

// QuotaExceeded refuses a charged event, or a run, the daily quota does not
// admit; Used is the day's usage.
type QuotaExceeded struct{ Used int64 }

func (e *QuotaExceeded) Error() string {
	return fmt.Sprintf("the daily quota is used up (%d events today)", e.Used)
}

// Append appends a.Event at its account's tip inside the transaction, which
// holds the head from then on. A refusal (Place's error, ErrEventIDTaken,
// *QuotaExceeded) may leave writes behind in the transaction: the caller
// must return it, so that the write rolls back.
func (t *Tx) Append(ctx context.Context, a Append) (Appended, error) {
	userID := a.Event.UserID
	head, remembered, err := t.lockForAppend(ctx, userID)
	if err != nil {
		return Appended{}, err
	}
	out, refused, err := t.appendAt(ctx, a, head, remembered)
	if remembered != nil && err == nil && (refused != nil || out.HeadMoved) {
		// A remembered head decides nothing alone (headmemo.go): the row
		// did not match it, or Place refused against it. Read the head
		// under the lock; unless it is the remembered one (a refusal then
		// stands), place the event again against it.
		delete(t.heads, userID)
		if head, err = t.lock(ctx, userID); err != nil {
			return Appended{}, err
		}
		if out.HeadMoved || !head.SameTip(remembered.head) || head.SigningKeysGen != remembered.head.SigningKeysGen ||
			t.rulesGen[userID] != remembered.rulesGen {
			t.w.memo.stale.Add(1)
			t.w.memo.forget(userID)
			remembered = nil
			out, refused, err = t.appendAt(ctx, a, head, nil)
		}
	}
	if err != nil {
		return Appended{}, err
	}
	if refused != nil {
		return Appended{}, refused
	}
	if out.HeadMoved {
		return Appended{}, fmt.Errorf("append: the locked head of %s moved", userID)
	}
	if !out.QuotaOK {
		used, err := t.w.store.QuotaUsed(ctx, t.tx, userID, a.Quota.Day)
		if err != nil {
			return Appended{}, err
		}
		return Appended{}, &QuotaExceeded{Used: used}
	}
	if !out.Inserted {
		return Appended{}, ErrEventIDTaken
	}
	e := a.Event
	after := headAfter(head, e)
	t.setHead(userID, after)
	if remembered != nil {
		t.w.memo.hits.Add(1)
	}
	t.rememberAfter(userID, head, after, e.MachineID, out.Appended)
	if out.NotifyChannel == "" {
		t.publishAfterCommit(e)
	}
	return Appended{Event: *e, QuotaUsed: out.QuotaUsed}, nil
}

// attempt is how appendAt turned out.
type attempt struct {
	store.Appended
	NotifyChannel string
}

// appendAt places a.Event against head, remembered or not (nil), and
// appends it there. refused is Place's error: nothing was appended.
func (t *Tx) appendAt(ctx context.Context, a Append, head store.Head, remembered *rememberedHead) (out attempt, refused, err error) {
	e := a.Event
	if a.Place != nil {
		if err := a.Place(ctx, head, t.tx); err != nil {
			return attempt{}, err, nil
		}
	}
	e.LeafIndex = head.EventCount // the frame names the event's leaf
	sa := store.Append{Event: e, Expect: head, Quota: a.Quota}
	if remembered != nil {
		sa.Remembered = &store.Remembered{RulesGen: remembered.rulesGen, Counters: remembered.counters}
		if e.MachineID != nil {
			sa.Remembered.MachineEvents = t.w.memo.machineEvents(e.UserID, *e.MachineID)
		}
	}
	if err := t.w.notification(e, &sa.NotifyChannel, &sa.NotifyPayload); err != nil {
		return attempt{}, nil, err
	}
	stored, err := t.w.store.AppendEvent(ctx, t.tx, sa)
	return attempt{Appended: stored, NotifyChannel: sa.NotifyChannel}, nil, err
}

// headAfter is the head once e, appended at head, became the tip. Its
// signing keys generation is not known (0): the write that appended e may
// have changed the account's keys (a key registration does).
func headAfter(head store.Head, e *store.Event) store.Head {
	hash, id := e.PayloadHash, e.EventID
	return store.Head{LastSequence: e.Sequence, LastHash: &hash, LastEventID: &id, EventCount: head.EventCount + 1}
}

// Append stores one client event and returns once it is committed. On
// SQLite it joins the group commit like any write; on PostgreSQL an event
// without a.Locked is first tried without the head's lock (optimistic.go),
// and goes the locked way only when that does not end cleanly.
func (w *Writer) Append(ctx context.Context, a Append) (Appended, error) {
	if w.optimistic != nil {
		if !a.Locked {
			out, done, err := w.optimistic.append(ctx, a)
			if done || err != nil {
				w.optimistic.byPath.optimistic.Add(1) // stored, or refused
				return out, err
			}
		}
		w.optimistic.byPath.locked.Add(1)
	}
	var out Appended
	err := w.Write(ctx, func(t *Tx) error {
		var err error
		out, err = t.Append(ctx, a)
		return err
	})
	return out, err
}

// AppendRun stores a run of the account's events (batch ingest) after its
// head: each takes the next leaf, in the order given, with any unused
// sequence. The quota admits the whole run or refuses it (*QuotaExceeded).
// The caller has made sure no event_id or sequence of the run is stored; a
// conflict anyway is store.ErrConflict.
func (t *Tx) AppendRun(ctx context.Context, userID string, evs []store.Event, quota store.Quota) (store.RunOutcome, error) {
	head, err := t.Lock(ctx, userID)
	if err != nil {
		return store.RunOutcome{}, err
	}
	run := store.Run{UserID: userID, Head: head, Events: evs, Quota: quota}
	if t.w.bus != nil {
		run.NotifyPayloads = make([]string, len(evs))
		for i := range evs {
			evs[i].LeafIndex = head.EventCount + int64(i) // as AppendRun places them: the frame names the leaf
			if err := t.w.notification(&evs[i], &run.NotifyChannel, &run.NotifyPayloads[i]); err != nil {
				return store.RunOutcome{}, err
			}
		}
	}
	out, err := t.w.store.AppendRun(ctx, t.tx, run)
	if err != nil {
		return out, err
	}
	if !out.QuotaOK {
		return out, &QuotaExceeded{Used: out.QuotaUsed}
	}
	t.setHead(userID, out.Head)
	if run.NotifyChannel == "" {
		for i := range evs {
			t.publishAfterCommit(&evs[i])
		}
	}
	return out, nil
}
