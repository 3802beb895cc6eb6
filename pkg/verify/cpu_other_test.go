//go:build !unix

package verify_test

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
