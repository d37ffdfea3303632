//go:build !unix

package tools

import "time"

// processStart stands in for the CPU time where getrusage is missing: the
// wall clock, which never reads less than one thread's CPU time.
var processStart = time.Now()

// cpuTime is the time since the process started.
func cpuTime() time.Duration { return time.Since(processStart) }
