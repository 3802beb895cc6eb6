package schedule

import (
	"context"
	"sync"
	"time"
)

// Lease decides which replica runs a job's period. Acquire returns true for
// exactly one caller per (job, period start) across all replicas sharing the
// lease, and false for every other caller. A lease is never released: a
// replica that dies mid-run keeps its period, and the next period is a new
// key that any live replica can take, so a dead holder blocks nothing.
//
// MemoryLease serves a single process (SQLite, or one replica); over
// PostgreSQL the store provides one backed by a unique row per job and period.
type Lease interface {
	Acquire(ctx context.Context, job string, period time.Time) (bool, error)
}

// MemoryLease is the in-process Lease. It keeps only the latest period
// granted per job: a period at or before that one is refused. Periods are
// asked for in order, so this grants each exactly once in bounded memory.
// The zero value is ready to use.
type MemoryLease struct {
	mu     sync.Mutex
	latest map[string]time.Time
}

// Acquire implements Lease.
func (l *MemoryLease) Acquire(_ context.Context, job string, period time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, ok := l.latest[job]; ok && !period.After(last) {
		return false, nil
	}
	if l.latest == nil {
		l.latest = map[string]time.Time{}
	}
	l.latest[job] = period
	return true, nil
}
