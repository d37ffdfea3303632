package local

import (
	"os"
	"strings"
	"sync"
	"time"
)

// FileClock returns a clock that runs ahead of the wall clock by the Go
// duration written in the file at path ("90s", "2m"; absent, empty or
// malformed: no offset), read again whenever the file's modification time
// or size changes. End-to-end tests move a running dev server's time
// forward with it (DEV_CLOCK_FILE), to bring schedules, human steps'
// deadlines and leases due without waiting; the offset never goes back
// by itself, and time keeps running between changes.
func FileClock(path string) func() time.Time {
	var (
		mu     sync.Mutex
		mod    time.Time
		size   int64 = -1
		offset time.Duration
	)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if fi, err := os.Stat(path); err == nil && (!fi.ModTime().Equal(mod) || fi.Size() != size) {
			mod, size = fi.ModTime(), fi.Size()
			offset = 0
			if b, err := os.ReadFile(path); err == nil {
				if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
					offset = d
				}
			}
		}
		return time.Now().Add(offset)
	}
}
