package writer

import (
	"context"
	"maps"
	"sync/atomic"

	"github.com/auditchain/auditchain/internal/store"
)

// The heads SQLite's writer remembers (docs/decisions/record.md "Remembered
// heads"). On SQLite one goroutine runs every write (groupcommit.go), so the
// head each committed append left is known without reading it back: the
// next append of the account takes it from memory instead of reading the
// head row under the lock, one statement fewer per append.
//
// A remembered head never decides anything alone. The append's UPDATE of
// the head row compares the head and both of its generations (approval
// rules, signing keys) with the row (store.Append.Remembered), and an
// append that the row does not match, or that Place refuses, is placed again
// against the head read under the lock (Tx.Append). So a wrong entry costs
// one read, never a wrong answer.
//
// The entries follow the transaction, not the commit: a job's heads are
// remembered once its savepoint is released, because the jobs after it in
// the same shared transaction see its writes; a transaction that then fails
// to commit forgets them all (groupCommitter.commit).

// maxRememberedHeads bounds the memory: an entry is a head, two
// generations, the head row's counters and up to maxRememberedMachines
// machines' counts, well under 2 KB.
const (
	maxRememberedHeads    = 8192
	maxRememberedMachines = 16
)

// rememberedHead is an account's head row as the writer's last job that
// appended to it left it: the head, with its signing keys generation
// (never 0 here), the approval rules generation and the row's counters; and
// the events of the machines it appended for (machine_heads), so that the
// append's statements write the next values instead of returning them
// (store.Append.Counters).
type rememberedHead struct {
	head     store.Head
	rulesGen int64
	counters store.HeadCounters
	machines map[string]int64 // never changed once remembered: replaced
}

// headMemo is used only on the group committer's goroutine; only its
// counters are read elsewhere (Writer.Stats).
type headMemo struct {
	m map[string]rememberedHead
	// hits counts appends stored against a remembered head, stale the
	// remembered heads the row did not match (each one a defect to find:
	// every write of a head row goes through a job that forgets or
	// remembers it).
	hits, stale atomic.Int64
}

func newHeadMemo() *headMemo {
	return &headMemo{m: make(map[string]rememberedHead)}
}

func (m *headMemo) get(userID string) (rememberedHead, bool) {
	if m == nil {
		return rememberedHead{}, false
	}
	h, ok := m.m[userID]
	return h, ok
}

func (m *headMemo) put(userID string, h rememberedHead) {
	if _, ok := m.m[userID]; !ok && len(m.m) >= maxRememberedHeads {
		for k := range m.m { // evict an arbitrary entry: map order is random
			delete(m.m, k)
			break
		}
	}
	m.m[userID] = h
}

func (m *headMemo) forget(userID string) {
	if m != nil {
		delete(m.m, userID)
	}
}

func (m *headMemo) forgetAll() {
	if m != nil {
		clear(m.m)
	}
}

// lockForAppend is lock for Append, which may take the head the writer
// remembers instead of reading it (r is then that memory; SQLite).
func (t *Tx) lockForAppend(ctx context.Context, userID string) (head store.Head, r *rememberedHead, err error) {
	if h, ok := t.heads[userID]; ok {
		return h, nil, nil
	}
	if m, ok := t.w.memo.get(userID); ok {
		t.setHead(userID, m.head)
		if t.rulesGen == nil {
			t.rulesGen = make(map[string]int64, 1)
		}
		t.rulesGen[userID] = m.rulesGen
		return m.head, &m, nil
	}
	head, err = t.lock(ctx, userID)
	return head, nil, err
}

// rememberAfter records, for the writer to remember once this
// transaction's writes are kept, the head row as e's append (out) left it,
// at the generations of the head it extended (before; an append changes
// neither), and the machines' counts of used, the memory the append was
// placed against (nil: read). Only a head read or remembered with its
// generations, in a transaction that did not lock it for writes of its own,
// is remembered; otherwise what an earlier append of the transaction
// recorded is dropped.
func (t *Tx) rememberAfter(userID string, before store.Head, used *rememberedHead, e *store.Event, out store.Appended) {
	if t.w.memo == nil {
		return
	}
	gen, ok := t.rulesGen[userID]
	if !ok || before.SigningKeysGen == 0 || t.lockedToWrite[userID] {
		delete(t.remember, userID)
		return
	}
	after := headAfter(before, e)
	after.SigningKeysGen = before.SigningKeysGen
	next := rememberedHead{head: after, rulesGen: gen, counters: out.Counters}
	if used != nil {
		next.machines = used.machines
	}
	if m := e.MachineID; m != nil {
		if _, known := next.machines[*m]; known || len(next.machines) < maxRememberedMachines {
			next.machines = maps.Clone(next.machines)
			if next.machines == nil {
				next.machines = make(map[string]int64, 1)
			}
			next.machines[*m] = out.MachineEvents
		}
	}
	if t.remember == nil {
		t.remember = make(map[string]rememberedHead, 1)
	}
	t.remember[userID] = next
}

// kept tells t that its writes are kept in the transaction (its savepoint
// released): the writer remembers the heads its appends left.
func (t *Tx) kept() {
	for userID, h := range t.remember {
		t.w.memo.put(userID, h)
	}
	t.remember = nil
}
