package cputime

import (
	"crypto/sha256"
	"runtime"
	"testing"
)

// Process time grows with work done.
func TestProcessGrowsWithWork(t *testing.T) {
	before, ok := Process()
	if !ok {
		if runtime.GOOS == "linux" {
			t.Fatal("no process CPU time on linux")
		}
		t.Skip("this platform does not report process CPU time")
	}
	sum := [32]byte{}
	for range 200_000 {
		sum = sha256.Sum256(sum[:])
	}
	after, _ := Process()
	if after <= before {
		t.Fatalf("CPU time %v then %v after hashing: it did not grow", before, after)
	}
}
