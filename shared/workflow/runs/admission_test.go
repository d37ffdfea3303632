package runs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/toolclient"
)

// The gate admits large inputs up to each user's bound and the process's,
// counted to the byte: what fits exactly passes at once, a byte more
// waits (here until its context ends) until enough is released; small
// inputs always pass; an input over a bound counts as the bound.
func TestValueGateCountsInFlightBytesExactly(t *testing.T) {
	const m = 1 << 20
	large := toolclient.InlineBytes + 1 // the smallest input that counts
	g := newValueGate(4*m, 6*m)
	ctx := context.Background()
	admit := func(user string, n int) func() {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 10*time.Second) // a wrong wait fails, not hangs
		defer cancel()
		release, err := g.admit(c, user, n)
		if err != nil {
			t.Fatalf("admit(%s, %d): %v, want at once", user, n, err)
		}
		return release
	}
	waits := func(user string, n int) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		release, err := g.admit(c, user, n)
		if err == nil {
			release()
			t.Fatalf("admit(%s, %d) passed, want it to wait", user, n)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("admit(%s, %d): %v", user, n, err)
		}
	}

	a3 := admit("a", 3*m)
	a1 := admit("a", m) // a: 4 MiB, its bound exactly
	waits("a", large)
	small := admit("a", toolclient.InlineBytes) // travels inline: not counted
	small()
	b2 := admit("b", 2*m) // the process: 6 MiB, its bound exactly
	waits("b", large)     // b is under its own bound, the process is not
	waits("c", large)
	a3()
	c3 := admit("c", 3*m) // what a released
	waits("a", large)     // the process is full again
	a1()
	b2()
	c3()

	huge := admit("a", 100*m) // over both bounds: counts as the user's
	waits("a", large)
	huge()
	if len(g.users) != 0 {
		t.Errorf("%d users left in the gate after every release, want 0", len(g.users))
	}
	// Every byte was released: the bounds are whole again.
	r1, r2 := admit("a", 4*m), admit("b", 2*m)
	r1()
	r2()
}
