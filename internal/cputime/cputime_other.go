//go:build !unix

// Package cputime reads the CPU time this process has used (not on this
// platform).
package cputime

import "time"

// Process reports ok false: this platform does not tell.
func Process() (used time.Duration, ok bool) { return 0, false }
