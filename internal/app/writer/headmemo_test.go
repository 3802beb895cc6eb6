package writer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/verify"
)

// memoWriter is a Writer over a fresh SQLite store, and a client's chain on
// it (replicaPair's helpers, one replica).
func memoWriter(t *testing.T) (*replicaPair, *testChain) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := New(storetest.Open(t, storetest.DSN(t, storetest.SQLite)), Options{})
	t.Cleanup(w.Close)
	r := &replicaPair{t: t, ctx: ctx, writer: w}
	return r, r.newChain("memo")
}

// rememberedHeads is the writer's counters of remembered heads.
func rememberedHeads(w *Writer) (hits, stale int64) {
	s := w.Stats()
	return s.RememberedHeadHits, s.RememberedHeadStale
}

// wantRemembered fails the test unless w counted these appends placed
// against a remembered head (hits) and remembered heads the row did not
// match (stale).
func wantRemembered(t *testing.T, w *Writer, hits, stale int64) {
	t.Helper()
	if h, s := rememberedHeads(w); h != hits || s != stale {
		t.Fatalf("remembered heads: %d hits, %d stale; want %d and %d", h, s, hits, stale)
	}
}

// commitDirectly runs fns as the jobs of one shared transaction (one alone
// when there is one), the writer's loop bypassed, and returns their errors.
func commitDirectly(w *Writer, fns ...func(*Tx) error) []error {
	ctx := context.Background()
	batch := make([]*groupJob, len(fns))
	for i, fn := range fns {
		batch[i] = &groupJob{ctx: ctx, fn: fn, t: &Tx{w: w}, done: make(chan struct{})}
	}
	w.engine.(*groupCommitter).commit(batch)
	errs := make([]error, len(batch))
	for i, j := range batch {
		<-j.done
		errs[i] = j.err
	}
	return errs
}

// appendJob is a job that appends the chain's next event (without advancing
// the chain) and then returns fail, whatever the append did.
func appendJob(c *testChain, id string, fail error) func(*Tx) error {
	return func(t *Tx) error {
		if _, err := t.Append(context.Background(), clientAppend(c.next(id))); err != nil {
			return err
		}
		return fail
	}
}

// Each append after an account's first is placed against the head the last
// one left, without reading the head row, and the chain is whole.
func TestRememberedHeadsServeTheNextAppends(t *testing.T) {
	r, c := memoWriter(t)
	other := r.newChain("other")
	for range 5 {
		r.append(c, nil)
		r.append(other, nil)
	}
	machine := "m1"
	r.append(c, &machine) // a machine's event too
	wantRemembered(t, r.writer, 9, 0)
	intact(t, r.writer.store, c.userID, 6)
	intact(t, r.writer.store, other.userID, 5)
}

// A head row written behind the writer's back (what a write that bypassed
// it would do; none does) is never trusted: the append's compare-and-set
// sees that the row's generations or tip are not the remembered ones, and
// the event is placed against the row, read under the lock.
func TestARememberedHeadTheRowDoesNotMatchIsReadAgain(t *testing.T) {
	for _, behind := range []struct {
		name, update string
	}{
		{"signing keys generation", `UPDATE chain_heads SET signing_keys_gen = signing_keys_gen + 1 WHERE user_id = $1`},
		{"approval rules generation", `UPDATE chain_heads SET approval_rules_gen = approval_rules_gen + 1 WHERE user_id = $1`},
	} {
		t.Run(behind.name, func(t *testing.T) {
			r, c := memoWriter(t)
			r.append(c, nil)
			if _, err := r.writer.store.WriteDB().Exec(behind.update, c.userID); err != nil {
				t.Fatal(err)
			}
			r.append(c, nil)
			wantRemembered(t, r.writer, 0, 1)
			r.append(c, nil) // remembered again, at the row's generations
			wantRemembered(t, r.writer, 1, 1)
			intact(t, r.writer.store, c.userID, 3)
		})
	}
	t.Run("tip", func(t *testing.T) {
		// The tip moved behind the writer: Place refuses the client's next
		// event against the remembered tip, and accepts it against the row.
		r, c := memoWriter(t)
		r.append(c, nil)
		behind := c.next("evt-behind")
		if err := r.writer.store.InTx(r.ctx, func(tx *sql.Tx) error {
			head, err := r.writer.store.LockHead(r.ctx, tx, c.userID)
			if err != nil {
				return err
			}
			out, err := r.writer.store.AppendEvent(r.ctx, tx, store.Append{Event: behind, Expect: head})
			if err == nil && !out.Stored() {
				err = fmt.Errorf("not stored: %+v", out)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		h := behind.PayloadHash
		c.prev, c.seq = &h, c.seq+1
		r.append(c, nil)
		wantRemembered(t, r.writer, 0, 1)
		intact(t, r.writer.store, c.userID, 3)
	})
}

// A refusal against a remembered head that is the row's too is answered as
// refused, and not counted as a remembered head gone wrong; the memory stays.
func TestARefusalAgainstARememberedHeadIsTheRowsToo(t *testing.T) {
	r, c := memoWriter(t)
	r.append(c, nil)
	stray := c.next("evt-stray")
	stray.Sequence = 0 // not after the tip
	_, err := r.writer.Append(r.ctx, clientAppend(stray))
	if _, ok := errorAs[*notAtTip](err); !ok {
		t.Fatalf("append before the tip: %v, want notAtTip", err)
	}
	wantRemembered(t, r.writer, 0, 0)
	r.append(c, nil)
	if hits, _ := rememberedHeads(r.writer); hits != 1 {
		t.Fatalf("remembered heads after the refusal: %d hits, want 1", hits)
	}
}

// Only what is kept is remembered: the head an append left is forgotten
// when its job fails after it (its savepoint rolled back, or its lone
// transaction), and when the shared transaction that kept it fails to
// commit. Each case would otherwise place the next append against a head
// that was never stored (counted stale). The append that was dropped was
// placed against the head remembered before it (a hit).
func TestHeadsOfWritesNotKeptAreNotRemembered(t *testing.T) {
	refused := errors.New("refused after appending")
	t.Run("a job of a shared transaction", func(t *testing.T) {
		r, c := memoWriter(t)
		r.append(c, nil)
		errs := commitDirectly(r.writer, appendJob(c, "evt-dropped", refused), func(*Tx) error { return nil })
		if !errors.Is(errs[0], refused) || errs[1] != nil {
			t.Fatalf("jobs: %v", errs)
		}
		r.append(c, nil)
		wantRemembered(t, r.writer, 2, 0)
	})
	t.Run("a job alone", func(t *testing.T) {
		r, c := memoWriter(t)
		r.append(c, nil)
		if errs := commitDirectly(r.writer, appendJob(c, "evt-dropped", refused)); !errors.Is(errs[0], refused) {
			t.Fatalf("job: %v", errs[0])
		}
		r.append(c, nil)
		wantRemembered(t, r.writer, 2, 0)
	})
	t.Run("a savepoint inside a job", func(t *testing.T) {
		r, c := memoWriter(t)
		r.append(c, nil)
		errs := commitDirectly(r.writer, func(t *Tx) error {
			err := t.Savepoint(context.Background(), func() error { return appendJob(c, "evt-dropped", refused)(t) })
			if !errors.Is(err, refused) {
				return fmt.Errorf("savepoint: %v", err)
			}
			return nil
		})
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
		r.append(c, nil)
		wantRemembered(t, r.writer, 2, 0)
	})
	t.Run("a shared transaction that does not commit", func(t *testing.T) {
		r, c := memoWriter(t)
		bigTable(t, r.writer)
		r.append(c, nil)
		errs := commitDirectly(r.writer, appendJob(c, "evt-lost", nil), fillTheDisk)
		if errs[0] == nil || !store.IsStorageFault(errs[1]) {
			t.Fatalf("jobs: %v; want both failed by the storage fault", errs)
		}
		r.append(c, nil)
		wantRemembered(t, r.writer, 1, 0)
		intact(t, r.writer.store, c.userID, 2)
	})
}

// A write that locks an account's head for writes of its own (a rule's or a
// key's generation, the quota) makes the writer forget the head: the next
// append reads the row.
func TestAHeadLockedForAWriteIsForgotten(t *testing.T) {
	r, c := memoWriter(t)
	r.append(c, nil)
	errs := commitDirectly(r.writer, func(t *Tx) error {
		if _, err := t.Lock(context.Background(), c.userID); err != nil {
			return err
		}
		_, err := t.tx.Exec(`UPDATE chain_heads SET approval_rules_gen = approval_rules_gen + 1 WHERE user_id = $1`, c.userID)
		return err
	})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	r.append(c, nil)
	wantRemembered(t, r.writer, 0, 0)
	// A job that appends after locking for itself is not remembered either.
	errs = commitDirectly(r.writer, func(t *Tx) error {
		if _, err := t.Lock(context.Background(), c.userID); err != nil {
			return err
		}
		if _, err := t.tx.Exec(`UPDATE chain_heads SET signing_keys_gen = signing_keys_gen + 1 WHERE user_id = $1`, c.userID); err != nil {
			return err
		}
		return appendJob(c, fmt.Sprintf("evt-%d", c.seq), nil)(t)
	})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	c.seq++
	h, err := r.writer.store.Head(r.ctx, c.userID)
	if err != nil {
		t.Fatal(err)
	}
	c.prev = h.LastHash
	r.append(c, nil)
	wantRemembered(t, r.writer, 0, 0)
	intact(t, r.writer.store, c.userID, 4)
}

// The counters an append moves (the quota's usage, the events without a
// machine, each machine's events) are written from memory as their next
// values, and stay exact: every event's machine_sequence counts its
// machine's events (or those without one), and every charged append
// answers the day's usage. A counter moved behind the writer's back is
// found by the compare and counted from the row.
func TestRememberedCountersStayExact(t *testing.T) {
	r, c := memoWriter(t)
	m1, m2 := "m1", "m2"
	machines := []*string{nil, &m1, &m1, nil, &m2, &m1, nil, nil, &m2, &m1}
	appendAll := func(ms []*string, used0 int64) {
		t.Helper()
		for i, m := range ms {
			e := c.next(fmt.Sprintf("evt-%d", c.seq))
			if m != nil {
				e = withMachine(t, e, *m)
			}
			out, err := r.writer.Append(r.ctx, clientAppend(e))
			if err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			if want := used0 + int64(i) + 1; out.QuotaUsed != want {
				t.Fatalf("append %d answered the day's usage %d, want %d", i, out.QuotaUsed, want)
			}
			h := out.Event.PayloadHash
			c.prev, c.seq = &h, c.seq+1
		}
	}
	appendAll(machines, 0)
	if hits, stale := rememberedHeads(r.writer); hits != int64(len(machines)-1) || stale != 0 {
		t.Fatalf("remembered heads: %d hits, %d stale; want %d and 0", hits, stale, len(machines)-1)
	}
	// Behind the writer: one more event of m1 counted, and 5 charges.
	if _, err := r.writer.store.WriteDB().Exec(`UPDATE machine_heads SET events = events + 1 WHERE user_id = $1 AND machine_id = 'm1'`, c.userID); err != nil {
		t.Fatal(err)
	}
	appendAll([]*string{&m1, &m2}, 10)
	if _, err := r.writer.store.WriteDB().Exec(`UPDATE chain_heads SET quota_used = quota_used + 5 WHERE user_id = $1`, c.userID); err != nil {
		t.Fatal(err)
	}
	appendAll([]*string{nil, &m1}, 17)
	if _, stale := rememberedHeads(r.writer); stale != 1 {
		t.Fatalf("remembered heads stale = %d, want 1 (the quota's usage moved behind the writer)", stale)
	}
	want := map[string][]int64{"": {0, 1, 2, 3, 4}, "m1": {0, 1, 2, 3, 5, 6}, "m2": {0, 1, 2}}
	got := map[string][]int64{}
	if err := r.writer.store.EventsFrom(r.ctx, c.userID, 0, func(e *store.Event) error {
		m := ""
		if e.MachineID != nil {
			m = *e.MachineID
		}
		got[m] = append(got[m], e.MachineSequence)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("machine_sequence by machine: %v, want %v (m1's 4 was counted behind the writer)", got, want)
	}
	intact(t, r.writer.store, c.userID, 14)
}

// withMachine is e as machine m's event, its payload_hash computed again.
func withMachine(t *testing.T, e *store.Event, m string) *store.Event {
	t.Helper()
	e.MachineID = &m
	h, err := verify.PayloadHash(&verify.HashedEvent{EventID: e.EventID, EventType: e.EventType, Sequence: e.Sequence,
		PrevHash: e.PrevHash, Raw: e.Raw, MachineID: e.MachineID, TS: &e.TS})
	if err != nil {
		t.Fatal(err)
	}
	e.PayloadHash = h
	return e
}

// A job that appends twice to one account leaves a head the writer cannot
// vouch for (the second append extends the job's own head, whose signing
// keys generation it does not know): the writer forgets the account rather
// than keep the head from before the job.
func TestTwoAppendsInOneJobAreNotRememberedStale(t *testing.T) {
	r, c := memoWriter(t)
	r.append(c, nil)
	errs := commitDirectly(r.writer, func(t *Tx) error {
		for range 2 {
			out, err := t.Append(context.Background(), clientAppend(c.next(fmt.Sprintf("evt-%d", c.seq))))
			if err != nil {
				return err
			}
			h := out.Event.PayloadHash
			c.prev, c.seq = &h, c.seq+1
		}
		return nil
	})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	r.append(c, nil)
	wantRemembered(t, r.writer, 1, 0)
	intact(t, r.writer.store, c.userID, 4)
}

// The quota against a remembered head: a charge on another day than the
// remembered one takes the statement that works the day out (and a
// generation moved behind the writer is still found there), and a charge
// the quota refuses is refused with the row's usage, the memory intact.
func TestRememberedHeadsAndTheQuota(t *testing.T) {
	charged := func(c *testChain, day string, limit int64) Append {
		a := clientAppend(c.next(fmt.Sprintf("evt-%d", c.seq)))
		a.Quota = &store.Quota{Day: day, Limit: limit}
		return a
	}
	advance := func(c *testChain, out Appended) {
		h := out.Event.PayloadHash
		c.prev, c.seq = &h, c.seq+1
	}
	t.Run("another day, a generation moved behind", func(t *testing.T) {
		r, c := memoWriter(t)
		r.append(c, nil)
		if _, err := r.writer.store.WriteDB().Exec(`UPDATE chain_heads SET signing_keys_gen = signing_keys_gen + 1 WHERE user_id = $1`, c.userID); err != nil {
			t.Fatal(err)
		}
		out, err := r.writer.Append(r.ctx, charged(c, "2026-11-23", testLimit))
		if err != nil || out.QuotaUsed != 1 {
			t.Fatalf("append on the next day: %+v, %v; want the day's usage 1", out, err)
		}
		advance(c, out)
		wantRemembered(t, r.writer, 0, 1)
		intact(t, r.writer.store, c.userID, 2)
	})
	t.Run("used up", func(t *testing.T) {
		r, c := memoWriter(t)
		for range 2 {
			out, err := r.writer.Append(r.ctx, charged(c, testDay, 2))
			if err != nil {
				t.Fatal(err)
			}
			advance(c, out)
		}
		_, err := r.writer.Append(r.ctx, charged(c, testDay, 2))
		if q, ok := errorAs[*QuotaExceeded](err); !ok || q.Used != 2 {
			t.Fatalf("the third charge of a quota of 2: %v, want QuotaExceeded at 2", err)
		}
		out, err := r.writer.Append(r.ctx, charged(c, testDay, 3))
		if err != nil || out.QuotaUsed != 3 {
			t.Fatalf("with a quota of 3: %+v, %v", out, err)
		}
		wantRemembered(t, r.writer, 2, 0)
	})
}

// The memory is bounded: past maxRememberedHeads accounts (and
// maxRememberedMachines machines) an arbitrary entry makes room, and a key
// already held is replaced in place.
func TestHeadMemoIsBounded(t *testing.T) {
	m := newHeadMemo()
	for i := range maxRememberedHeads + 10 {
		m.put(fmt.Sprintf("acct-%d", i), rememberedHead{machine: "m", machineEvents: 1})
	}
	if len(m.m) != maxRememberedHeads {
		t.Fatalf("%d remembered heads, want the bound %d", len(m.m), maxRememberedHeads)
	}
	for i := range maxRememberedMachines - len(m.machines) + 10 {
		m.put("acct-x", rememberedHead{machine: fmt.Sprintf("m-%d", i), machineEvents: 1})
	}
	if len(m.machines) != maxRememberedMachines {
		t.Fatalf("%d remembered machines, want the bound %d", len(m.machines), maxRememberedMachines)
	}
	full := len(m.m)
	for k := range m.m {
		m.put(k, rememberedHead{counters: store.HeadCounters{QuotaUsed: 7}})
		if len(m.m) != full || m.m[k].counters.QuotaUsed != 7 {
			t.Fatalf("replacing a held head changed the memory's size to %d (was %d) or lost the value", len(m.m), full)
		}
		break
	}
}

// An event_id the account already holds, appended against a remembered head,
// is refused (ErrEventIDTaken) with nothing written: the head row the
// append's UPDATE moved rolls back with the job, the memory stays the row's,
// and the next append is placed against it (a hit, not stale).
func TestATakenEventIDAgainstARememberedHeadWritesNothing(t *testing.T) {
	r, c := memoWriter(t)
	first := r.append(c, nil)
	r.append(c, nil)
	if _, err := r.writer.Append(r.ctx, clientAppend(c.next(first))); !errors.Is(err, ErrEventIDTaken) {
		t.Fatalf("an event_id already stored: %v, want ErrEventIDTaken", err)
	}
	intact(t, r.writer.store, c.userID, 2)
	r.append(c, nil)
	wantRemembered(t, r.writer, 2, 0) // hits count stored appends: the second and this one
	intact(t, r.writer.store, c.userID, 3)
}
