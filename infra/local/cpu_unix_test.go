//go:build unix

package local_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used (user and system),
// the embedded engine's included: in process, the work of the requests
// between two readings whatever share of a loaded machine's cores they
// got (their wall time also waits for the cores). 0 when getrusage fails.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
