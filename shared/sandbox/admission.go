package sandbox

import (
	"container/list"
	"context"
	"fmt"
	"sync"
)

// admission hands out a fixed number of slots to keys: at most perKey
// slots to one key at once, and, among the requests that wait, to the
// earliest whose key is under its cap. A waiter whose key is at its cap
// does not hold back the waiters behind it. It is safe for concurrent use.
type admission struct {
	mu      sync.Mutex
	free    int            // slots nobody holds
	perKey  int            // slots one key may hold
	held    map[string]int // slots held, per key with any
	waiting *list.List     // of *waiter, in arrival order
}

// waiter is a request for a slot. ready is closed, under mu, when the
// slot is granted (granted is then true); until then elem is its place in
// waiting.
type waiter struct {
	key     string
	ready   chan struct{}
	granted bool
	elem    *list.Element
}

func newAdmission(slots, perKey int) *admission {
	return &admission{free: slots, perKey: perKey, held: map[string]int{}, waiting: list.New()}
}

// acquire waits for a slot for key, in arrival order, until ctx ends or
// done is closed. It returns nil when the slot is the caller's (it must
// call release(key) once), ctx's error wrapped when ctx ended first, and
// ErrClosed when done was closed first.
func (a *admission) acquire(ctx context.Context, key string, done <-chan struct{}) error {
	return a.wait(ctx, a.enqueue(key), done)
}

// enqueue queues a request for key, granting it at once when it can.
func (a *admission) enqueue(key string) *waiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := &waiter{key: key, ready: make(chan struct{})}
	w.elem = a.waiting.PushBack(w)
	a.grant()
	return w
}

// wait waits for w's slot; see acquire.
func (a *admission) wait(ctx context.Context, w *waiter, done <-chan struct{}) error {
	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = fmt.Errorf("sandbox: waiting for a free worker: %w", ctx.Err())
	case <-done:
		err = ErrClosed
	}
	a.mu.Lock()
	granted := w.granted
	if !granted {
		a.waiting.Remove(w.elem)
	}
	a.mu.Unlock()
	if granted {
		// Granted as the wait ended: pass the slot on.
		a.release(w.key)
	}
	return err
}

// release returns a slot key held.
func (a *admission) release(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.free++
	if a.held[key]--; a.held[key] <= 0 {
		delete(a.held, key)
	}
	a.grant()
}

// grant gives the free slots to the earliest waiters whose keys are under
// their cap. Called with mu held after every change.
func (a *admission) grant() {
	for e := a.waiting.Front(); e != nil && a.free > 0; {
		next := e.Next()
		if w := e.Value.(*waiter); a.held[w.key] < a.perKey {
			a.waiting.Remove(e)
			a.free--
			a.held[w.key]++
			w.granted = true
			close(w.ready)
		}
		e = next
	}
}

// stats reports the slots held and the requests waiting.
func (a *admission) stats() (running, waiting int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.held {
		running += n
	}
	return running, a.waiting.Len()
}
