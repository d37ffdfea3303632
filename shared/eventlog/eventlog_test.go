package eventlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/eventlog"
)

func TestParseID(t *testing.T) {
	t.Parallel()
	const id = "0b7c7c8e-3f57-4c2e-9a55-5d7c9d3f0a11"
	for _, tc := range []struct {
		in   string
		want eventlog.ID
		ok   bool
	}{
		{id + ":1", eventlog.ID{Stream: id, Seq: 1}, true},
		{id + ":123", eventlog.ID{Stream: id, Seq: 123}, true},
		{"0B7C7C8E-3F57-4C2E-9A55-5D7C9D3F0A11:7", eventlog.ID{Stream: id, Seq: 7}, true},
		{id + ":0", eventlog.ID{}, false},
		{id + ":-1", eventlog.ID{}, false},
		{id + ":01", eventlog.ID{}, false},
		{id + ":+1", eventlog.ID{}, false},
		{id + ":x", eventlog.ID{}, false},
		{id, eventlog.ID{}, false},
		{id + ":", eventlog.ID{}, false},
		{"abc:1", eventlog.ID{}, false},
		{id + ":1:2", eventlog.ID{}, false},
		{"", eventlog.ID{}, false},
	} {
		got, err := eventlog.ParseID(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseID(%q) = %+v, %v", tc.in, got, err)
		}
		if !tc.ok && errs.CodeOf(err) != eventlog.CodeInvalidEventID {
			t.Errorf("ParseID(%q): code %q", tc.in, errs.CodeOf(err))
		}
		if tc.ok && got.String() != tc.want.Stream+":"+fmt.Sprint(tc.want.Seq) {
			t.Errorf("String() = %q", got.String())
		}
	}
}

// batches records the writes of an Appender.
type batches struct {
	mu    sync.Mutex
	got   [][]int64
	fail  error
	until []time.Time
}

func (b *batches) append(_ context.Context, recs []eventlog.Record, until time.Time) error {
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
	b.until = append(b.until, until)
	return nil
}

func (b *batches) snapshot() [][]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]int64(nil), b.got...)
}

func data(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)) }

// TestWriterBatches: 45 events added at once go out as writes of at most
// MaxBatch, in order, numbered from the first sequence number; a lone
// event goes out after MaxDelay; silence brings lease renewals.
func TestWriterBatches(t *testing.T) {
	t.Parallel()
	b := &batches{}
	w := eventlog.NewWriter(context.Background(), 2, b.append, eventlog.Options{MaxDelay: 20 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
	for i := range 45 {
		if seq := w.Add(data(i)); seq != int64(2+i) {
			t.Fatalf("event %d numbered %d", i, seq)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.Written() < 46 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	next := int64(2)
	writes := 0
	for _, batch := range b.snapshot() {
		if len(batch) == 0 {
			continue // a renewal
		}
		writes++
		if len(batch) > eventlog.MaxBatch {
			t.Errorf("a write of %d events", len(batch))
		}
		for _, s := range batch {
			if s != next {
				t.Fatalf("batches %v: out of order", b.snapshot())
			}
			next++
		}
	}
	// Three writes of 20, 20 and 5; a fourth only if the scheduler let
	// MaxDelay pass while the events were being added.
	if next != 47 || writes < 3 || writes > 4 {
		t.Fatalf("batches %v: want 45 events in 3 writes", b.snapshot())
	}
	// One more event waits at most MaxDelay; then silence renews the lease.
	w.Add(data(99))
	time.Sleep(200 * time.Millisecond)
	pending, nextSeq, err := w.Close()
	if len(pending) != 0 || nextSeq != 48 || err != nil {
		t.Fatalf("Close: %d pending, next %d, %v", len(pending), nextSeq, err)
	}
	got := b.snapshot()
	renewals := 0
	sawLone := false
	for _, batch := range got {
		switch {
		case len(batch) == 0:
			renewals++
		case len(batch) == 1 && batch[0] == 47:
			sawLone = true
		}
	}
	if !sawLone || renewals == 0 {
		t.Errorf("batches %v: want the lone event written and renewals in the silence", got)
	}
}

// TestWriterFailure: the first failed write ends the Writer; later events
// are still numbered and returned by Close with the error.
func TestWriterFailure(t *testing.T) {
	t.Parallel()
	stop := errors.New("stop requested")
	b := &batches{fail: stop}
	w := eventlog.NewWriter(context.Background(), 1, b.append, eventlog.Options{MaxDelay: time.Millisecond})
	w.Add(data(1))
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
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
	log := []eventlog.Record{{Seq: 1, Data: data(1)}, {Seq: 2, Data: data(2)}, {Seq: 4, Data: data(4)}}
	reads := 0
	read := func(_ context.Context, after int64) ([]eventlog.Record, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		if reads == 3 { // the gap fills, and the log ends
			log = []eventlog.Record{{Seq: 1}, {Seq: 2}, {Seq: 3}, {Seq: 4}, {Seq: 5, Data: json.RawMessage(`"last"`)}}
		}
		var out []eventlog.Record
		for _, r := range log {
			if r.Seq > after {
				out = append(out, r)
			}
		}
		return out, true, nil
	}
	var got []int64
	err := eventlog.Follow(context.Background(), read, 0, eventlog.FollowOptions{MinWait: time.Millisecond,
		IsLast: func(r eventlog.Record) bool { return string(r.Data) == `"last"` }},
		func(r eventlog.Record) error { got = append(got, r.Seq); return nil })
	if err != nil || fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Errorf("followed %v, %v", got, err)
	}

	// A log that stops growing without a last record ends the follow.
	done := func(_ context.Context, after int64) ([]eventlog.Record, bool, error) { return nil, false, nil }
	if err := eventlog.Follow(context.Background(), done, 3, eventlog.FollowOptions{}, func(eventlog.Record) error { return nil }); err != nil {
		t.Errorf("inactive log: %v", err)
	}
	// ctx ends a follow that waits.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	idle := func(_ context.Context, after int64) ([]eventlog.Record, bool, error) { return nil, true, nil }
	if err := eventlog.Follow(ctx, idle, 0, eventlog.FollowOptions{}, func(eventlog.Record) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("follow of an idle log: %v", err)
	}
}
