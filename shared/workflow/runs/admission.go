package runs

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/workflow"
)

// MaxUserValueBytes bounds the large tool inputs (over
// toolclient.InlineBytes, which travel by reference) one user's runs have
// in flight at once in a process: each costs a few copies of itself on
// its way to the tool and back, so without a bound a forEach of 16 calls
// each reading one 8 MiB value, in a few runs at once, holds gigabytes.
// A call over the bound waits for the others, within its step's timeout.
const MaxUserValueBytes = 64 << 20

// valueGate admits the tool calls with a large input by the bytes of
// input each user has in flight (MaxUserValueBytes); smaller calls pass
// at once. It is shared by every run an Engine executes.
type valueGate struct {
	mu    sync.Mutex
	users map[string]*userValues
}

// userValues is one user's admission and how many calls hold or wait
// for it (the entry is dropped at zero).
type userValues struct {
	sem   *semaphore.Weighted
	calls int
}

// admit waits until input, a tool call's resolved input for userID, may
// be in flight, and returns the function that ends its admission. It
// fails when ctx ends first (the caller reports its step's timeout).
func (g *valueGate) admit(ctx context.Context, userID string, input map[string]any) (func(), error) {
	n := int64(workflow.MinJSONSize(input, MaxValueBytes+1))
	if n <= toolclient.InlineBytes {
		return func() {}, nil
	}
	n = min(n, MaxUserValueBytes)
	g.mu.Lock()
	if g.users == nil {
		g.users = map[string]*userValues{}
	}
	u := g.users[userID]
	if u == nil {
		u = &userValues{sem: semaphore.NewWeighted(MaxUserValueBytes)}
		g.users[userID] = u
	}
	u.calls++
	g.mu.Unlock()
	done := func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if u.calls--; u.calls == 0 {
			delete(g.users, userID)
		}
	}
	if err := u.sem.Acquire(ctx, n); err != nil {
		done()
		return nil, errs.Wrap("runs.admit", err)
	}
	return func() { u.sem.Release(n); done() }, nil
}
