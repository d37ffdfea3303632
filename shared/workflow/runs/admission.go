package runs

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/toolclient"
)

// Large tool inputs in flight (docs/limits.md). A call whose input is
// over toolclient.InlineBytes of JSON (it travels by reference) is
// admitted by that size before its input is resolved (the text its
// templates interpolate is built only once it is admitted), and holds
// its admission until its call ends. In the process that runs the
// engine, one admitted byte costs at most two: the text a template
// interpolates (none for a whole-value reference, which shares the value
// it names) and the one buffer of its JSON the tool client sends
// (toolclient.EncodeValue). The dev server's tool server, in the same
// process, adds its own read and decoding of each input, and the tool's
// copy: about four more (docs/benchmarks.md measures it).
const (
	// MaxUserValueBytes bounds the large inputs one user's runs have in
	// flight at once in a process: four calls each reading 8 MiB, say.
	// A call over it waits for the others, within its step's timeout.
	MaxUserValueBytes = 32 << 20
	// MaxProcessValueBytes bounds those of all users together in an
	// Engine, a process's (the dev server runs every user's runs in its
	// one Runner; in AWS one runner invocation runs one run attempt,
	// under MaxUserValueBytes).
	MaxProcessValueBytes = 2 * MaxUserValueBytes
)

// valueGate admits the tool calls with a large input by the bytes of
// input each user (MaxUserValueBytes) and the process (every user's,
// MaxProcessValueBytes) have in flight; smaller calls pass at once. It
// is shared by every run an Engine executes.
type valueGate struct {
	// user and process are the bounds (the constants above; tests set
	// others).
	user, process int64
	mu            sync.Mutex
	users         map[string]*userValues
	all           *semaphore.Weighted
}

func newValueGate(user, process int64) *valueGate {
	return &valueGate{user: user, process: process, users: map[string]*userValues{}, all: semaphore.NewWeighted(process)}
}

// userValues is one user's admission and how many calls hold or wait
// for it (the entry is dropped at zero).
type userValues struct {
	sem   *semaphore.Weighted
	calls int
}

// admit waits until a tool call for userID whose input is n bytes of
// JSON (MinJSONSize: Scope.ResolvedSize before it is resolved) may be in
// flight, and returns the function that ends its admission. An input
// over a bound counts as the bound (it waits for every other). It fails
// when ctx ends first (the caller reports its step's timeout).
func (g *valueGate) admit(ctx context.Context, userID string, n int) (func(), error) {
	if n <= toolclient.InlineBytes {
		return func() {}, nil
	}
	user, all := min(int64(n), g.user), min(int64(n), g.process)
	g.mu.Lock()
	u := g.users[userID]
	if u == nil {
		u = &userValues{sem: semaphore.NewWeighted(g.user)}
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
	// The user's share first, then the process's: a call holding the
	// process's never waits for a user's, so the two cannot deadlock,
	// and one user's queue holds none of the process's.
	if err := u.sem.Acquire(ctx, user); err != nil {
		done()
		return nil, errs.Wrap("runs.admit", err)
	}
	if err := g.all.Acquire(ctx, all); err != nil {
		u.sem.Release(user)
		done()
		return nil, errs.Wrap("runs.admit", err)
	}
	return func() { g.all.Release(all); u.sem.Release(user); done() }, nil
}
