package sandbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// granted reports whether w has its slot, without waiting.
func granted(w *waiter) bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

// TestAdmissionOrder drives an admission of 3 slots, 2 per key, through
// arrivals and releases, checking after each step which requests hold a
// slot: grants happen within enqueue and release, so every check is
// exact.
func TestAdmissionOrder(t *testing.T) {
	t.Parallel()
	a := newAdmission(3, 2)
	w := map[string]*waiter{}
	steps := []struct {
		do   string // "+name": name (key: its first letter) arrives; "-name": name's slot is released
		held string // the requests holding a slot after the step, sorted
	}{
		{"+a1", "a1"},
		{"+a2", "a1 a2"},
		{"+a3", "a1 a2"},    // "a" at its cap: a3 waits although a slot is free
		{"+b1", "a1 a2 b1"}, // a3, waiting at its cap, does not hold b1 back
		{"+b2", "a1 a2 b1"}, // no slot
		{"+c1", "a1 a2 b1"}, // no slot
		{"-b1", "a1 a2 b2"}, // a3 came first but is at its cap: b2
		{"-a1", "a2 a3 b2"}, // "a" under its cap again, and a3 came before c1
		{"+a4", "a2 a3 b2"}, // waits behind c1
		{"-b2", "a2 a3 c1"}, // c1, not a4 (at its cap)
		{"-a2", "a3 a4 c1"},
		{"+c2", "a3 a4 c1"},
		{"-a3", "a4 c1 c2"},
		{"-a4", "c1 c2"}, // nobody waits: a slot stays free
		{"+c3", "c1 c2"}, // "c" at its cap
		{"-c1", "c2 c3"},
		{"-c2", "c3"},
		{"-c3", ""},
		{"+a5", "a5"}, // a key that released every slot starts afresh
	}
	var order []string
	for i, st := range steps {
		name := st.do[1:]
		switch st.do[0] {
		case '+':
			w[name] = a.enqueue(name[:1])
			order = append(order, name)
		case '-':
			if !granted(w[name]) {
				t.Fatalf("step %d %s: %s holds no slot", i, st.do, name)
			}
			a.release(name[:1])
			delete(w, name)
		}
		var held []string
		waiting := 0
		for _, n := range order {
			if wt, ok := w[n]; ok {
				if granted(wt) {
					held = append(held, n)
				} else {
					waiting++
				}
			}
		}
		slices.Sort(held)
		if got := strings.Join(held, " "); got != st.held {
			t.Fatalf("step %d %s: held by %q, want %q", i, st.do, got, st.held)
		}
		if r, wt := a.stats(); r != len(held) || wt != waiting {
			t.Fatalf("step %d %s: stats %d running %d waiting, want %d and %d", i, st.do, r, wt, len(held), waiting)
		}
	}
}

// TestAdmissionWaitEnds: a waiter whose context ends leaves the queue (it
// holds back no one); one granted just as its context ended passes its
// slot on; closing fails the waiters with ErrClosed.
func TestAdmissionWaitEnds(t *testing.T) {
	t.Parallel()
	t.Run("canceled while queued", func(t *testing.T) {
		t.Parallel()
		a := newAdmission(1, 1)
		first := a.enqueue("a")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		second := a.enqueue("b")
		if err := a.wait(ctx, second, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("wait with a canceled context: %v", err)
		}
		third := a.enqueue("c")
		if r, w := a.stats(); r != 1 || w != 1 {
			t.Fatalf("stats %d running %d waiting, want 1 and 1 (the canceled waiter gone)", r, w)
		}
		if err := a.wait(context.Background(), first, nil); err != nil {
			t.Fatal(err)
		}
		a.release("a")
		if !granted(third) {
			t.Fatal("the slot did not go to the waiter after the canceled one")
		}
	})
	t.Run("granted as canceled", func(t *testing.T) {
		t.Parallel()
		for i := range 50 { // wait's select picks either ready case
			a := newAdmission(1, 1)
			a.enqueue("a")
			second := a.enqueue("b")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			a.release("a")
			if !granted(second) {
				t.Fatal("second not granted")
			}
			third := a.enqueue("c")
			if err := a.wait(ctx, second, nil); err == nil {
				a.release("b") // the caller's slot: it releases it
			}
			if !granted(third) {
				t.Fatalf("round %d: the slot granted to a canceled waiter was not passed on", i)
			}
			a.release("c")
			if r, w := a.stats(); r != 0 || w != 0 {
				t.Fatalf("round %d: stats %d running %d waiting, want none", i, r, w)
			}
		}
	})
	t.Run("closed", func(t *testing.T) {
		t.Parallel()
		a := newAdmission(1, 1)
		a.enqueue("a")
		done := make(chan struct{})
		close(done)
		if err := a.wait(context.Background(), a.enqueue("b"), done); !errors.Is(err, ErrClosed) {
			t.Fatalf("wait after close: %v", err)
		}
		if r, w := a.stats(); r != 1 || w != 0 {
			t.Fatalf("stats %d running %d waiting, want 1 and 0", r, w)
		}
	})
}

// BenchmarkAdmission is one uncontended admission and release, the cost
// the per-caller admission adds to every sandboxed evaluation (compare
// BenchmarkRunToolOverheadSandboxed in shared/toolserver, a whole call).
func BenchmarkAdmission(b *testing.B) {
	a := newAdmission(3, 2)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := a.acquire(ctx, "user", nil); err != nil {
			b.Fatal(err)
		}
		a.release("user")
	}
}
