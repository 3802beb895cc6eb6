//go:build unix

// Package cputime reads the CPU time this process has used, for benchmarks
// that report CPU per operation beside the rate: on a shared box the rate
// follows the other tenants' load, the CPU cost much less.
package cputime

import (
	"syscall"
	"time"
)

// Process is the user and system time this process has used so far; ok is
// false where the platform does not tell.
func Process() (used time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
