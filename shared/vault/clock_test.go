package vault_test

import (
	"sync"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func timeAt(sec int64) *clock { return &clock{t: time.Unix(sec, 0)} }

func (c *clock) get() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
