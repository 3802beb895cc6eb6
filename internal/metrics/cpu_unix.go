//go:build unix

package metrics

import (
	"math"
	"syscall"
	"time"
)

// processCPU is the process's user and system CPU time, in seconds.
var processCPU = func() float64 {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return math.NaN()
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()).Seconds()
}
