package writer

import (
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

// maxRememberedHeads bounds the memory: an entry is a head and two
// generations, about 200 bytes.
const maxRememberedHeads = 8192

// rememberedHead is an account's head row as the writer's last job that
// appended to it left it: the head, with its signing keys generation
// (never 0 here), and the approval rules generation.
type rememberedHead struct {
	head     store.Head
	rulesGen int64
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
