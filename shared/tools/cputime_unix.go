//go:build unix

package tools

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used (user and system). A
// sandbox worker runs one evaluation at a time, so what it spends from an
// evaluation's start is that evaluation's.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
