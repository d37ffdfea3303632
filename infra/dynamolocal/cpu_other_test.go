//go:build !unix

package dynamolocal

import "time"

// cpuTime is 0 where getrusage is not available.
func cpuTime() time.Duration { return 0 }
