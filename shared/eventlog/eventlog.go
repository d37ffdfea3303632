// Package eventlog is the append-only event log of long-running work (a
// streamed reply, later a workflow run): every event gets a sequence
// number, a Writer appends them in batches while renewing the work's lease,
// and Follow replays a log after a given event and then follows it until
// its last event. It is storage-agnostic: an Appender writes a batch, a
// Reader reads what follows a sequence number.
package eventlog

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

// Codes of the errors of logs.
const (
	// CodeInvalidEventID is the code of a malformed event id.
	CodeInvalidEventID = "INVALID_EVENT_ID"
	// CodeStopRequested is the Conflict of a write to a log whose work
	// was asked to stop: the writer ends the work.
	CodeStopRequested = "STOP_REQUESTED"
	// CodeNotActive is the Conflict of a write to a log whose work has
	// ended (the sweeper ended it after its lease ran out).
	CodeNotActive = "NOT_ACTIVE"
)

// ID identifies one event: the stream it belongs to (a message id, a run
// id) and its sequence number, 1 for the stream's first event.
type ID struct {
	Stream string
	Seq    int64
}

// String returns the wire form, "<stream>:<seq>", used as the SSE id.
func (id ID) String() string { return id.Stream + ":" + strconv.FormatInt(id.Seq, 10) }

// ParseID parses "<stream>:<seq>" where stream is a UUID and seq a
// decimal integer >= 1. Invalid INVALID_EVENT_ID otherwise.
func ParseID(s string) (ID, error) {
	stream, seq, ok := strings.Cut(s, ":")
	n, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil || n < 1 || !httpapi.IsUUID(stream) || strconv.FormatInt(n, 10) != seq {
		return ID{}, errs.E("eventlog.ParseID", errs.Invalid, CodeInvalidEventID,
			"the event id must be <messageId>:<seq>, as sent in the stream's id fields")
	}
	return ID{Stream: strings.ToLower(stream), Seq: n}, nil
}

// LastEventID returns the event id a client resumes after: the
// Last-Event-ID header, else the lastEventId query parameter (an
// EventSource cannot set headers on its first request); nil when neither
// is given. Invalid INVALID_EVENT_ID when it is malformed.
func LastEventID(r *http.Request) (*ID, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("lastEventId")
	}
	if v == "" {
		return nil, nil
	}
	id, err := ParseID(v)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

// Record is one logged event: its sequence number and its JSON.
type Record struct {
	Seq  int64           `json:"seq"`
	Data json.RawMessage `json:"data"`
}

// Appender writes recs, whose sequence numbers follow the last written
// one, and renews the work's lease to until, in one conditional write; with
// no recs it only renews the lease. Its errors end the Writer: the
// condition's failure tells the work to stop (a stop was requested, or it
// is no longer active because the sweeper ended it).
type Appender func(ctx context.Context, recs []Record, until time.Time) error

// Batching limits of a Writer.
const (
	// MaxBatch is the most events one write carries.
	MaxBatch = 20
	// MaxDelay is the longest an event waits before it is written.
	MaxDelay = 100 * time.Millisecond
	// Heartbeat is the longest a Writer stays without writing: a silent
	// piece of work still renews its lease and learns of a stop request
	// within it.
	Heartbeat = time.Second
	// Lease is how far ahead each write renews the lease.
	Lease = 30 * time.Second
	// MaxBatchBytes bounds the JSON of one write's events, below the 400
	// KB of a DynamoDB item.
	MaxBatchBytes = 300 << 10
)

// Options tune a Writer; zero values take the constants above.
type Options struct {
	MaxBatch  int
	MaxDelay  time.Duration
	Heartbeat time.Duration
	Lease     time.Duration
	Now       func() time.Time
}

func (o *Options) defaults() {
	if o.MaxBatch <= 0 {
		o.MaxBatch = MaxBatch
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = MaxDelay
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = Heartbeat
	}
	if o.Lease <= 0 {
		o.Lease = Lease
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Writer batches events into an Appender from its own goroutine, so that
// adding an event never waits for storage: a write happens when MaxBatch
// events wait, when the oldest has waited MaxDelay, or after Heartbeat of
// silence (a lease renewal). The first failed write ends it: Done is
// closed and Err returns the error.
type Writer struct {
	app  Appender
	o    Options
	ctx  context.Context
	kick chan struct{}
	stop chan struct{}
	done chan struct{} // closed when the loop has exited
	dead chan struct{} // closed on the first failed write

	mu      sync.Mutex
	next    int64 // the sequence number of the next event
	pending []Record
	oldest  time.Time // when the oldest pending event was added
	written int64     // the last written sequence number
	err     error
}

// NewWriter starts a Writer whose first event gets sequence number next
// (events before it are already written). ctx bounds every write.
func NewWriter(ctx context.Context, next int64, app Appender, o Options) *Writer {
	o.defaults()
	w := &Writer{app: app, o: o, ctx: ctx, next: next, written: next - 1,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), dead: make(chan struct{})}
	go w.loop()
	return w
}

// Add queues data as the next event and returns its sequence number. It
// never blocks on storage; after a failed write it still numbers events
// (they are then returned by Close).
func (w *Writer) Add(data json.RawMessage) int64 {
	w.mu.Lock()
	seq := w.next
	w.next++
	if len(w.pending) == 0 {
		w.oldest = w.o.Now()
	}
	w.pending = append(w.pending, Record{Seq: seq, Data: data})
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return seq
}

// Written returns the sequence number of the last event written.
func (w *Writer) Written() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// Done is closed when a write failed.
func (w *Writer) Done() <-chan struct{} { return w.dead }

// Err returns the error of the failed write, or nil.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close stops the Writer, after the write in progress if any, and returns
// the events not written yet, the sequence number the next event would
// get, and the error of a failed write.
func (w *Writer) Close() (pending []Record, next int64, err error) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	pending, w.pending = w.pending, nil
	return pending, w.next, w.err
}

func (w *Writer) loop() {
	defer close(w.done)
	last := w.o.Now()
	t := time.NewTimer(w.o.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
		case <-t.C:
		}
		now := w.o.Now()
		w.mu.Lock()
		n, oldest := len(w.pending), w.oldest
		w.mu.Unlock()
		var wait time.Duration
		switch {
		case n >= w.o.MaxBatch, n > 0 && now.Sub(oldest) >= w.o.MaxDelay, now.Sub(last) >= w.o.Heartbeat:
			if !w.flush() {
				return
			}
			last = w.o.Now()
			wait = w.o.Heartbeat
		case n > 0:
			wait = w.o.MaxDelay - now.Sub(oldest)
		default:
			wait = w.o.Heartbeat - now.Sub(last)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(max(wait, time.Millisecond))
	}
}

// flush writes the pending events, at most MaxBatch and MaxBatchBytes at a
// time (a lone larger event goes alone), and reports whether it worked.
func (w *Writer) flush() bool {
	for {
		w.mu.Lock()
		batch, size := 0, 0
		for batch < len(w.pending) && batch < w.o.MaxBatch {
			size += len(w.pending[batch].Data)
			if batch > 0 && size > MaxBatchBytes {
				break
			}
			batch++
		}
		recs := append([]Record(nil), w.pending[:batch]...)
		w.mu.Unlock()
		err := w.app(w.ctx, recs, w.o.Now().Add(w.o.Lease))
		w.mu.Lock()
		if err != nil {
			w.err = err
			w.mu.Unlock()
			close(w.dead)
			return false
		}
		w.pending = w.pending[batch:]
		if len(w.pending) > 0 {
			w.oldest = w.o.Now()
		}
		if batch > 0 {
			w.written = recs[batch-1].Seq
		}
		more := len(w.pending) >= w.o.MaxBatch
		w.mu.Unlock()
		if !more {
			return true
		}
	}
}

// Reader returns the logged events after seq in order, and whether the
// log can still grow (its work is active). It fails with NotFound when
// the log does not exist.
type Reader func(ctx context.Context, after int64) (recs []Record, active bool, err error)

// FollowOptions tune Follow; zero values take the defaults.
type FollowOptions struct {
	// MinWait and MaxWait bound the pause between two reads that found
	// nothing new (it doubles from MinWait up to MaxWait): 25 ms, 250 ms.
	MinWait, MaxWait time.Duration
	// IsLast reports whether rec is the log's last event.
	IsLast func(Record) bool
}

// Follow yields the events after seq in order, reading through read until
// it yields the last event, the log stops growing, or ctx ends. Records
// read while the writer still holds earlier events are never skipped:
// only records numbered after the last yielded one are yielded. first is
// the first read's result when the caller already has it (nil to read).
// It returns yield's error, read's error or ctx's error.
func Follow(ctx context.Context, read Reader, after int64, o FollowOptions, yield func(Record) error) error {
	if o.MinWait <= 0 {
		o.MinWait = 25 * time.Millisecond
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 250 * time.Millisecond
	}
	wait := o.MinWait
	for {
		recs, active, err := read(ctx, after)
		if err != nil {
			return err
		}
		progressed := false
		for _, r := range recs {
			if r.Seq != after+1 {
				if r.Seq <= after {
					continue
				}
				break // a gap: read again from after
			}
			if err := yield(r); err != nil {
				return err
			}
			after, progressed = r.Seq, true
			if o.IsLast != nil && o.IsLast(r) {
				return nil
			}
		}
		if !active && !progressed {
			return nil
		}
		if progressed {
			wait = o.MinWait
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, o.MaxWait)
	}
}
