package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
)

func TestParseID(t *testing.T) {
	t.Parallel()
	const id = "0b7c7c8e-3f57-4c2e-9a55-5d7c9d3f0a11"
	for _, tc := range []struct {
		in   string
		want job.ID
		ok   bool
	}{
		{id + ":1", job.ID{Stream: id, Seq: 1}, true},
		{id + ":123", job.ID{Stream: id, Seq: 123}, true},
		{"0B7C7C8E-3F57-4C2E-9A55-5D7C9D3F0A11:7", job.ID{Stream: id, Seq: 7}, true},
		{id + ":0", job.ID{}, false},
		{id + ":-1", job.ID{}, false},
		{id + ":01", job.ID{}, false},
		{id + ":+1", job.ID{}, false},
		{id + ":x", job.ID{}, false},
		{id, job.ID{}, false},
		{id + ":", job.ID{}, false},
		{"abc:1", job.ID{}, false},
		{id + ":1:2", job.ID{}, false},
		{"", job.ID{}, false},
	} {
		got, err := job.ParseID(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseID(%q) = %+v, %v", tc.in, got, err)
		}
		if !tc.ok && errs.CodeOf(err) != job.CodeInvalidEventID {
			t.Errorf("ParseID(%q): code %q", tc.in, errs.CodeOf(err))
		}
		if tc.ok && got.String() != tc.want.Stream+":"+fmt.Sprint(tc.want.Seq) {
			t.Errorf("String() = %q", got.String())
		}
	}
}

// batches records the writes of an Appender.
type batches struct {
	mu       sync.Mutex
	got      [][]int64
	fail     error
	until    []time.Time
	reserved []int64
	block    chan struct{} // when set, each write waits for a receive
}

func (b *batches) append(_ context.Context, recs []job.Record, l job.Lease) error {
	if b.block != nil {
		<-b.block
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return b.fail
	}
	var seqs []int64
	for _, r := range recs {
		seqs = append(seqs, r.Seq)
	}
	b.got = append(b.got, seqs)
	b.until = append(b.until, l.Until)
	b.reserved = append(b.reserved, l.Reserved)
	return nil
}

func (b *batches) snapshot() [][]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]int64(nil), b.got...)
}

func data(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)) }

// TestWriterBatches: events added faster than MaxDelay go out in writes of
// MaxBatch, in order, numbered from the first sequence number; a lone
// event goes out after MaxDelay; silence brings lease renewals. Each part
// waits for the writes it expects, however slow the machine: with
// MaxDelay and Heartbeat an hour away only full batches are written.
func TestWriterBatches(t *testing.T) {
	t.Parallel()
	b := &batches{}
	w := job.NewWriter(context.Background(), 2, 1000, b.append, job.Options{MaxBatch: 20, MaxDelay: time.Hour, Heartbeat: time.Hour})
	for i := range 45 {
		if seq := w.Add(data(i)); seq != int64(2+i) {
			t.Fatalf("event %d numbered %d", i, seq)
		}
	}
	eventually(t, "two full batches written", func() bool { return w.Written() >= 41 })
	pending, nextSeq, err := w.Close()
	if len(pending) != 5 || pending[0].Seq != 42 || nextSeq != 47 || err != nil {
		t.Fatalf("Close: %d pending, next %d, %v; want 42-46 pending", len(pending), nextSeq, err)
	}
	next := int64(2)
	for _, batch := range b.snapshot() {
		if len(batch) != 20 {
			t.Errorf("a write of %d events, want 20", len(batch))
		}
		for _, s := range batch {
			if s != next {
				t.Fatalf("batches %v: out of order", b.snapshot())
			}
			next++
		}
	}
	if next != 42 {
		t.Fatalf("batches %v: want events 2-41 in 2 writes", b.snapshot())
	}

	// One event waits at most MaxDelay; then silence renews the lease.
	b = &batches{}
	w = job.NewWriter(context.Background(), 48, 1000, b.append, job.Options{MaxDelay: 20 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
	w.Add(data(99))
	eventually(t, "the lone event written, then a renewal", func() bool {
		lone := false
		for _, batch := range b.snapshot() {
			switch {
			case len(batch) == 1 && batch[0] == 48:
				lone = true
			case len(batch) == 0 && lone:
				return true
			}
		}
		return false
	})
	if pending, nextSeq, err := w.Close(); len(pending) != 0 || nextSeq != 49 || err != nil {
		t.Fatalf("Close: %d pending, next %d, %v", len(pending), nextSeq, err)
	}
}

// eventually polls cond until it holds, failing after ten minutes: a bound
// for a broken Writer, not a measure of its speed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s", what)
		}
	}
}

// TestWriterFailure: the first failed write ends the Writer; later events
// are still numbered and returned by Close with the error.
func TestWriterFailure(t *testing.T) {
	t.Parallel()
	stop := errors.New("stop requested")
	b := &batches{fail: stop}
	w := job.NewWriter(context.Background(), 1, 1000, b.append, job.Options{MaxDelay: time.Millisecond})
	w.Add(data(1))
	select {
	case <-w.Done():
	case <-time.After(10 * time.Minute):
		t.Fatal("the Writer did not end")
	}
	w.Add(data(2))
	pending, next, err := w.Close()
	if !errors.Is(err, stop) || !errors.Is(w.Err(), stop) || next != 3 || len(pending) != 2 || pending[0].Seq != 1 || pending[1].Seq != 2 {
		t.Errorf("Close: %+v, %d, %v", pending, next, err)
	}
}

// TestFollow reads a log that grows while it is followed: every record
// once, in order, up to the last; a record read after a gap waits for the
// gap to fill.
func TestFollow(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	log := []job.Record{{Seq: 1, Data: data(1)}, {Seq: 2, Prev: 1, Data: data(2)}, {Seq: 4, Prev: 3, Data: data(4)}}
	reads := 0
	read := func(_ context.Context, after int64) ([]job.Record, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		if reads == 3 { // the gap fills, and the log ends
			log = job.Chain(0, 1, data(1), data(2), data(3), data(4), json.RawMessage(`"last"`))
		}
		var out []job.Record
		for _, r := range log {
			if r.Seq > after {
				out = append(out, r)
			}
		}
		return out, true, nil
	}
	var got []int64
	err := job.Follow(context.Background(), read, 0, job.FollowOptions{MinWait: time.Millisecond,
		IsLast: func(r job.Record) bool { return string(r.Data) == `"last"` }},
		func(r job.Record) error { got = append(got, r.Seq); return nil })
	if err != nil || fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Errorf("followed %v, %v", got, err)
	}

	// A log that stops growing without a last record ends the follow.
	done := func(_ context.Context, after int64) ([]job.Record, bool, error) { return nil, false, nil }
	if err := job.Follow(context.Background(), done, 3, job.FollowOptions{}, func(job.Record) error { return nil }); err != nil {
		t.Errorf("inactive log: %v", err)
	}
	// ctx ends a follow that waits.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	idle := func(_ context.Context, after int64) ([]job.Record, bool, error) { return nil, true, nil }
	if err := job.Follow(ctx, idle, 0, job.FollowOptions{}, func(job.Record) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("follow of an idle log: %v", err)
	}
}

// TestWriterReservation: each write reserves Window ids past its last
// event; Add never hands out an id beyond the reservation, and waits for
// the write that extends it.
func TestWriterReservation(t *testing.T) {
	t.Parallel()
	b := &batches{block: make(chan struct{})}
	w := job.NewWriter(context.Background(), 2, 5, b.append, job.Options{Window: 4, MaxDelay: time.Hour, Heartbeat: time.Hour})
	for i := range 4 { // ids 2..5 are within the first reservation
		if seq := w.Add(data(i)); seq != int64(2+i) {
			t.Fatalf("event %d numbered %d", i, seq)
		}
	}
	added := make(chan int64)
	go func() { added <- w.Add(data(5)) }()
	select {
	case seq := <-added:
		t.Fatalf("Add beyond the reservation returned %d before a write", seq)
	case b.block <- struct{}{}: // the starved writer writes 2..5, reserving up to 9
	}
	if seq := <-added; seq != 6 {
		t.Fatalf("Add after the write: %d, want 6", seq)
	}
	close(b.block)
	pending, next, err := w.Close()
	if err != nil || next != 7 {
		t.Fatalf("Close: %v, next %d", err, next)
	}
	if got := b.snapshot(); len(got) == 0 || fmt.Sprint(got[0]) != "[2 3 4 5]" || b.reserved[0] != 9 {
		t.Errorf("writes %v reserving %v: want [2 3 4 5] reserving up to 9", got, b.reserved)
	}
	_ = pending
}

// TestWriterPendingBytes: an Add that would let the pending events hold
// MaxPendingBytes or more waits for a write, whatever the reservation and
// the delay allow, so Close never hands back more than MaxPendingBytes
// plus one event; and no write carries more than MaxBatchBytes unless it
// is one event alone.
func TestWriterPendingBytes(t *testing.T) {
	t.Parallel()
	b := &batches{block: make(chan struct{})}
	var mu sync.Mutex
	var sizes []int
	app := func(ctx context.Context, recs []job.Record, l job.Lease) error {
		n := 0
		for _, r := range recs {
			n += len(r.Data)
		}
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		return b.append(ctx, recs, l)
	}
	w := job.NewWriter(context.Background(), 1, 1000, app, job.Options{MaxDelay: time.Hour, Heartbeat: time.Hour})
	big := json.RawMessage(`"` + strings.Repeat("x", 100<<10) + `"`) // about 100 KiB
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 30 { // about 3 MiB in all
			w.Add(big)
		}
	}()
	// The writer is blocked: the Adds stop at the byte bound.
	time.Sleep(100 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("30 events of 100 KiB were all queued while no write could happen")
	default:
	}
	close(b.block)
	<-done
	pending, _, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, r := range pending {
		held += len(r.Data)
	}
	if held > job.MaxPendingBytes+len(big) {
		t.Errorf("Close handed back %d bytes, over %d plus one event", held, job.MaxPendingBytes)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range sizes {
		if n > job.MaxBatchBytes+len(big) {
			t.Errorf("a write of %d bytes", n)
		}
	}
}

// TestWriterFailureReleasesAdd: an Add waiting for a reservation returns
// once the Writer fails, rather than waiting forever.
func TestWriterFailureReleasesAdd(t *testing.T) {
	t.Parallel()
	b := &batches{fail: errors.New("gone")}
	w := job.NewWriter(context.Background(), 1, 1, b.append, job.Options{Window: 1, MaxDelay: time.Hour, Heartbeat: time.Hour})
	w.Add(data(1))
	done := make(chan int64)
	go func() { done <- w.Add(data(2)) }()
	select {
	case seq := <-done:
		if seq != 2 {
			t.Errorf("Add after the failure: %d", seq)
		}
	case <-time.After(10 * time.Minute):
		t.Fatal("Add still waits after the Writer failed")
	}
	if _, _, err := w.Close(); err == nil {
		t.Error("Close: no error")
	}
}

// TestFollowSkippedIDs: after an interruption the closing events are
// numbered past the reservation (their first's Prev is the last stored
// event). A follower goes straight on, whether it resumes from the last
// stored id or from an id that was handed out but never stored.
func TestFollowSkippedIDs(t *testing.T) {
	t.Parallel()
	log := append(job.Chain(0, 1, data(1), data(2), data(3)), job.Chain(3, 210, data(210), json.RawMessage(`"last"`))...)
	read := func(_ context.Context, after int64) ([]job.Record, bool, error) {
		var out []job.Record
		for _, r := range log {
			if r.Seq > after {
				out = append(out, r)
			}
		}
		return out, false, nil
	}
	for _, tc := range []struct {
		after int64
		want  string
	}{
		{0, "[1 2 3 210 211]"},
		{3, "[210 211]"},
		{7, "[210 211]"}, // handed out live, never stored
		{210, "[211]"},
		{211, "[]"},
	} {
		var got []int64
		err := job.Follow(context.Background(), read, tc.after, job.FollowOptions{MinWait: time.Millisecond,
			IsLast: func(r job.Record) bool { return string(r.Data) == `"last"` }},
			func(r job.Record) error { got = append(got, r.Seq); return nil })
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("after %d: followed %v, %v; want %s", tc.after, got, err, tc.want)
		}
	}
}

// TestHeadClosing: an interrupted job closes after every id its process
// may have handed out.
func TestHeadClosing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		h    job.Head
		want int64
	}{
		{job.Head{LastSeq: 28, Reserved: 228}, 229},
		{job.Head{LastSeq: 5}, 6}, // a run: nothing handed out before it is written
		{job.Head{LastSeq: 9, Reserved: 4}, 10},
	} {
		if got := tc.h.Closing(); got != tc.want {
			t.Errorf("%+v.Closing() = %d, want %d", tc.h, got, tc.want)
		}
	}
}

// TestWriterFillsWrites: events that fill a write (Fill bytes) are
// written at once, without waiting for the delay, each write carrying
// only what is new and at most Fill bytes; the rest waits for its delay.
// The lease is renewed by the first write after half of it has passed
// since the last renewal (the Writer's start counts as one), and only by
// that one.
func TestWriterFillsWrites(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	at := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return at }
	advance := func(d time.Duration) { mu.Lock(); at = at.Add(d); mu.Unlock() }
	b := &batches{}
	w := job.NewWriter(context.Background(), 1, 1000, b.append, job.Options{Fill: 300, MaxDelay: time.Hour, Heartbeat: time.Hour, Lease: time.Minute, Now: clock})
	event := json.RawMessage(`{"n":"` + strings.Repeat("x", 92) + `"}`) // 100 bytes
	for range 7 {
		w.Add(event)
	}
	waitWritten := func(seq int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); w.Written() < seq; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("written %d, want %d (writes %v)", w.Written(), seq, b.snapshot())
			}
		}
	}
	waitWritten(6) // two full writes of 3; the seventh waits
	advance(31 * time.Second)
	for range 3 {
		w.Add(event)
	}
	waitWritten(9)
	pending, next, err := w.Close()
	if err != nil || next != 11 || len(pending) != 1 || pending[0].Seq != 10 {
		t.Fatalf("Close: %v pending, next %d, %v", seqs(pending), next, err)
	}
	got := b.snapshot()
	if fmt.Sprint(got) != "[[1 2 3] [4 5 6] [7 8 9]]" {
		t.Errorf("writes %v, want [[1 2 3] [4 5 6] [7 8 9]]", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.until) != 3 || !b.until[0].IsZero() || !b.until[1].IsZero() || !b.until[2].Equal(at.Add(time.Minute)) {
		t.Errorf("renewals %v: want only the write after 31 s, to a minute ahead", b.until)
	}
}

func seqs(recs []job.Record) []int64 {
	var out []int64
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}
