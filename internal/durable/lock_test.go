package durable_test

import (
	"path/filepath"
	"testing"

	"github.com/auditchain/auditchain/internal/durable"
)

// A lock is held by one holder at a time, and free again once released.
func TestTryLockIsHeldByOneHolderAtATime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.lock")
	release, held, err := durable.TryLock(path)
	if err != nil || !held {
		t.Fatalf("first TryLock: held %v, %v", held, err)
	}
	if _, held, err := durable.TryLock(path); err != nil || held {
		t.Fatalf("TryLock while it is held: held %v, %v; want not held", held, err)
	}
	release()
	again, held, err := durable.TryLock(path)
	if err != nil || !held {
		t.Fatalf("TryLock after release: held %v, %v", held, err)
	}
	again()
}
