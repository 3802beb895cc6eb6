package writer

import (
	"context"
	"sync/atomic"

	"github.com/auditchain/auditchain/internal/store"
)

// The heads SQLite's writer remembers (docs/decisions/record.md "Remembered
// heads"). On SQLite one goroutine runs every write (groupcommit.go), so the
// head each kept append left is known without reading it back: the
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

// maxRememberedHeads and maxRememberedMachines bound the memory: an entry
// is a head, two generations and the head row's counters, about 250 bytes;
// a machine's count about 100.
const (
	maxRememberedHeads    = 8192
	maxRememberedMachines = 65536
)

// rememberedHead is an account's head row as the writer's last job that
// appended to it left it: the head, with its signing keys generation
// (never 0 here), the approval rules generation and the row's counters, so
// that the append's statements write the next values instead of returning
// them (store.Remembered). Staged in a Tx, it also carries the count
// of the machine its append was for (machine_heads), which the writer keeps
// beside the heads (headMemo.machines).
type rememberedHead struct {
	head     store.Head
	rulesGen int64
	counters store.HeadCounters
	// machine and machineEvents: the append's machine ("" for none) and its
	// events after it.
	machine       string
	machineEvents int64
}

// machineKey names a machine of an account.
type machineKey struct{ userID, machineID string }

// headMemo is used only on the group committer's goroutine; only its
// counters are read elsewhere (Writer.Stats).
type headMemo struct {
	m map[string]rememberedHead
	// machines are the events of the machines appended for: a count is
	// compared by the statement that moves it, so one an account's
	// forgetting leaves behind costs nothing but a miss.
	machines map[machineKey]int64
	// hits counts appends stored against a remembered head, stale the
	// remembered heads the row did not match (each one a defect to find:
	// every write of a head row goes through a job that forgets or
	// remembers it).
	hits, stale atomic.Int64
}

func newHeadMemo() *headMemo {
	return &headMemo{m: make(map[string]rememberedHead), machines: make(map[machineKey]int64)}
}

func (m *headMemo) get(userID string) (rememberedHead, bool) {
	if m == nil {
		return rememberedHead{}, false
	}
	h, ok := m.m[userID]
	return h, ok
}

func (m *headMemo) put(userID string, h rememberedHead) {
	makeRoom(m.m, userID, maxRememberedHeads)
	m.m[userID] = rememberedHead{head: h.head, rulesGen: h.rulesGen, counters: h.counters}
	if h.machine == "" {
		return
	}
	k := machineKey{userID, h.machine}
	makeRoom(m.machines, k, maxRememberedMachines)
	m.machines[k] = h.machineEvents
}

// makeRoom makes room in m, a cache of at most limit entries, for k: when k
// is new and m is full it evicts an arbitrary entry (map order is random),
// which costs only a read later.
func makeRoom[K comparable, V any](m map[K]V, k K, limit int) {
	if _, ok := m[k]; ok || len(m) < limit {
		return
	}
	for old := range m {
		delete(m, old)
		return
	}
}

// machineEvents is the remembered count of an account's machine, 0 when
// not known.
func (m *headMemo) machineEvents(userID, machineID string) int64 {
	return m.machines[machineKey{userID, machineID}]
}

func (m *headMemo) forget(userID string) {
	if m != nil {
		delete(m.m, userID)
	}
}

func (m *headMemo) forgetAll() {
	if m != nil {
		clear(m.m)
		clear(m.machines)
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
// transaction's writes are kept, the head row as an append (out, of
// machine, nil for none) left it: after, at the generations of the head it
// extended (before; an append changes neither), with the machine's count. Only a head read or remembered with
// its generations, in a transaction that did not lock it for writes of its
// own, is remembered; otherwise what an earlier append of the transaction
// recorded is dropped.
func (t *Tx) rememberAfter(userID string, before, after store.Head, machine *string, out store.Appended) {
	if t.w.memo == nil {
		return
	}
	gen, ok := t.rulesGen[userID]
	if !ok || before.SigningKeysGen == 0 || t.lockedToWrite[userID] {
		// Neither what an earlier append of t recorded nor what the writer
		// remembers from before t is the row any more.
		delete(t.remember, userID)
		t.w.memo.forget(userID)
		return
	}
	after.SigningKeysGen = before.SigningKeysGen
	next := rememberedHead{head: after, rulesGen: gen, counters: out.Counters}
	if machine != nil {
		next.machine, next.machineEvents = *machine, out.MachineEvents
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
