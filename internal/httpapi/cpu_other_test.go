//go:build !unix

package httpapi_test

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
