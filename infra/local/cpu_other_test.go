//go:build !unix

package local_test

import "time"

// processCPU is not measured here (see cpu_unix_test.go): 0.
func processCPU() time.Duration { return 0 }
