//go:build !unix

package metrics

// processCPU is not read where getrusage is missing.
var processCPU func() float64
