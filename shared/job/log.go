// Package job is the one engine of long work: a streamed reply and a
// workflow run are two kinds of job. Every job has an append-only event
// log and a lease: the process doing the work appends its events in
// batches (Writer), each write renewing the lease; any process follows a
// job's log from a given event to its last (Follow, Serve); and when the
// process dies, its lease runs out and the Sweeper hands the job to its
// kind's handler, which ends it or resumes it elsewhere.
//
// Event ids are never reused. A job's log head records, besides the last
// event written, the highest id the job's process may hand out before
// its next write (Lease.Reserved): events can reach a live client before
// they are written, so an interrupted job's closing events are numbered
// after that reservation, never over an id a client may already hold.
// Ids therefore increase and may skip after an interruption; each record
// knows the id before it (Record.Prev), so a follower never waits for ids
// that were skipped, and a resume from an id that was never stored goes on
// from the next stored event.
//
// The package is storage-agnostic: a Store appends, reads, stops and
// finds expired jobs; starting and ending a job happen in the stores of
// its kind, in one transaction with the items the job produces.
package job

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

// Codes of the errors of job logs.
const (
	// CodeInvalidEventID is the code of a malformed event id.
	CodeInvalidEventID = "INVALID_EVENT_ID"
	// CodeStopRequested is the Conflict of a write to a log whose job was
	// asked to stop: the writer ends the job.
	CodeStopRequested = "STOP_REQUESTED"
	// CodeNotActive is the Conflict of a write to a log whose job has
	// ended (the sweeper ended it after its lease ran out).
	CodeNotActive = "NOT_ACTIVE"
)

// ID identifies one event: the job it belongs to (a message id, a run id)
// and its sequence number, 1 for the job's first event.
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
		return ID{}, errs.E("job.ParseID", errs.Invalid, CodeInvalidEventID,
			"the event id must be <id>:<seq>, as sent in an event's id field")
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

// Record is one logged event: its sequence number, the sequence number of
// the event before it in the log (Seq-1, except after ids were skipped by
// an interruption), and its JSON.
type Record struct {
	Seq  int64           `json:"seq"`
	Prev int64           `json:"prev"`
	Data json.RawMessage `json:"data"`
}

// Chain numbers data as consecutive records after the event prev: the
// first gets seq first (> prev; more than prev+1 when ids were skipped).
func Chain(prev, first int64, data ...json.RawMessage) []Record {
	out := make([]Record, len(data))
	for i, d := range data {
		out[i] = Record{Seq: first + int64(i), Prev: first + int64(i) - 1, Data: d}
	}
	if len(out) > 0 {
		out[0].Prev = prev
	}
	return out
}

// Lease is what a write of a job's log carries besides its events: the
// event they follow (Last: the last one written before them), the highest
// event id the job's process may hand out before its next write
// (Reserved), and, when the write renews the job's lease, the time until
// which the process holds it (Until; zero when this write does not renew
// it).
type Lease struct {
	Until    time.Time
	Reserved int64
	Last     int64
}

// Appender writes recs, which follow event l.Last, in one conditional
// write that fails when the job must stop; with l.Until set it also
// renews the job's lease, and with no recs and no renewal it is a
// heartbeat: a write that carries no event but still fails when the job
// must stop. Its errors end the Writer: the condition's failure tells the
// job to stop (a stop was requested, or it is no longer active because
// the sweeper ended it).
type Appender func(ctx context.Context, recs []Record, l Lease) error

// Limits of a Writer.
const (
	// MaxBatch is the most events one write carries.
	MaxBatch = 64
	// BatchFill is the JSON of events one write carries, at most (a
	// larger event goes alone): with the log item's keys and attributes
	// it stays under DynamoDB's 1 KB write unit. A write is due as soon
	// as the pending events fill it.
	BatchFill = 780
	// MaxDelay is the longest an event waits before it is written: with a
	// follower's pause between two reads (at most 150 ms, FollowOptions)
	// a follower lags the job by well under a second. At a model's pace
	// (60 tokens a second) the events fill a write (BatchFill) sooner.
	MaxDelay = 400 * time.Millisecond
	// Heartbeat is the longest a Writer stays without writing: a silent
	// job still learns of a stop request within it.
	Heartbeat = time.Second
	// LeaseTime is how far ahead a renewal moves the lease; a Writer
	// renews it when half of it has passed since the last renewal, so a
	// live job's lease never has less than half of it left.
	LeaseTime = 30 * time.Second
	// Window is how many ids past the last written event a Writer may
	// hand out: each write reserves them in the log. An Add beyond the
	// reservation waits for the next write (storage slower than the
	// producer slows the producer down).
	Window = 200
	// MaxBatchBytes bounds the JSON of the events of one item of a log,
	// below the 400 KB of a DynamoDB item: what a job's end writes is cut
	// to it.
	MaxBatchBytes = 300 << 10
	// MaxPendingBytes bounds the JSON of the events waiting to be
	// written: an Add past it waits for a write, as past the
	// reservation. So what Close hands back, which the job's end writes
	// in one transaction, holds at most this plus one event.
	MaxPendingBytes = 1 << 20
)

// Options tune a Writer; zero values take the constants above.
type Options struct {
	MaxBatch  int
	Fill      int
	MaxDelay  time.Duration
	Heartbeat time.Duration
	Lease     time.Duration
	Window    int64
	Now       func() time.Time
}

func (o *Options) defaults() {
	if o.MaxBatch <= 0 {
		o.MaxBatch = MaxBatch
	}
	if o.Fill <= 0 {
		o.Fill = BatchFill
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = MaxDelay
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = Heartbeat
	}
	if o.Lease <= 0 {
		o.Lease = LeaseTime
	}
	if o.Window <= 0 {
		o.Window = Window
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Reservation returns the reservation of a log whose last written event
// is last, under o's window (the Reserved to store when a job starts).
func (o Options) Reservation(last int64) int64 {
	o.defaults()
	return last + o.Window
}

// Writer batches events into an Appender from its own goroutine, so that
// adding an event does not wait for storage: a write happens when the
// waiting events fill a write (MaxBatch events or BatchFill bytes), when
// the oldest has waited MaxDelay, or after Heartbeat of silence (a
// heartbeat). Each write carries only the events new since the last one,
// and reserves the next Window ids; Add waits while the reservation is
// used up. The write after half of the lease has passed since the last
// renewal (the job's start counts as one) renews it. The first failed
// write ends it: Done is closed and Err returns the error.
type Writer struct {
	app  Appender
	o    Options
	ctx  context.Context
	kick chan struct{}
	stop chan struct{}
	done chan struct{} // closed when the loop has exited
	dead chan struct{} // closed on the first failed write

	mu       sync.Mutex
	moved    *sync.Cond // broadcast when written, reserved or err change, or on close
	next     int64      // the sequence number of the next event
	pending  []Record
	size     int         // the bytes of the pending events' data
	added    []time.Time // when each pending event was added
	written  int64       // the last written sequence number
	reserved int64       // the highest id Add may hand out
	renewed  time.Time   // when the lease was last renewed
	closed   bool
	err      error
}

// NewWriter starts a Writer whose first event gets sequence number next
// (the events before it are written) and which may hand out ids up to
// reserved before its first write (the reservation stored with the log;
// see Options.Reservation). ctx bounds every write.
func NewWriter(ctx context.Context, next, reserved int64, app Appender, o Options) *Writer {
	o.defaults()
	w := &Writer{app: app, o: o, ctx: ctx, next: next, written: next - 1, reserved: max(reserved, next-1), renewed: o.Now(),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), dead: make(chan struct{})}
	w.moved = sync.NewCond(&w.mu)
	go w.loop()
	return w
}

// Add queues data as the next event and returns its sequence number, an
// id within the reservation: it waits for a write while the reservation
// is used up or the pending events hold MaxPendingBytes, unless the
// Writer has failed or is closed (the events are then returned by Close).
func (w *Writer) Add(data json.RawMessage) int64 {
	w.mu.Lock()
	for w.starvedLocked() && w.err == nil && !w.closed {
		w.kickLocked()
		w.moved.Wait()
	}
	seq := w.next
	w.next++
	w.added = append(w.added, w.o.Now())
	w.pending = append(w.pending, Record{Seq: seq, Prev: seq - 1, Data: data})
	w.size += len(data)
	w.mu.Unlock()
	w.kickLocked()
	return seq
}

// starvedLocked reports whether an Add must wait for a write: the
// reservation is used up, or the pending events hold MaxPendingBytes.
func (w *Writer) starvedLocked() bool {
	return w.next > w.reserved || w.size >= MaxPendingBytes
}

// fullLocked reports whether the pending events fill a write.
func (w *Writer) fullLocked() bool {
	return len(w.pending) >= w.o.MaxBatch || w.size >= w.o.Fill
}

func (w *Writer) kickLocked() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
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
	w.closed = true
	w.moved.Broadcast()
	pending, w.pending, w.added, w.size = w.pending, nil, nil, 0
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
		n, oldest := len(w.pending), w.oldestLocked()
		due := w.starvedLocked() || w.fullLocked() // an Add waits for a write, or a write is full
		w.mu.Unlock()
		var wait time.Duration
		switch {
		case due, n > 0 && now.Sub(oldest) >= w.o.MaxDelay, now.Sub(last) >= w.o.Heartbeat:
			if !w.flush() {
				return
			}
			last = w.o.Now()
			wait = w.o.Heartbeat
			w.mu.Lock()
			if len(w.pending) > 0 { // what did not fill a write waits for its delay
				wait = min(wait, w.o.MaxDelay-last.Sub(w.oldestLocked()))
			}
			w.mu.Unlock()
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

// oldestLocked is when the oldest pending event was added.
func (w *Writer) oldestLocked() time.Time {
	if len(w.added) == 0 {
		return time.Time{}
	}
	return w.added[0]
}

// flush writes the pending events, in writes of at most MaxBatch events
// and Fill bytes (a lone larger event goes alone), each extending the
// reservation, and reports whether it worked. It makes one write (with no
// events when none wait: a heartbeat), then more while what waits fills a
// write, holds an event that waited MaxDelay, or starves an Add; the rest
// waits for the next. A write renews the lease when half of it has passed
// since the last renewal.
func (w *Writer) flush() bool {
	for first := true; ; first = false {
		w.mu.Lock()
		batch, size := 0, 0
		for batch < len(w.pending) && batch < w.o.MaxBatch {
			size += len(w.pending[batch].Data)
			if batch > 0 && size > w.o.Fill {
				break
			}
			batch++
		}
		now := w.o.Now()
		full := batch < len(w.pending) || batch == w.o.MaxBatch || size >= w.o.Fill
		old := batch > 0 && now.Sub(w.oldestLocked()) >= w.o.MaxDelay
		if !first && (batch == 0 || !full && !old && !w.starvedLocked()) {
			w.mu.Unlock()
			return true
		}
		recs := append([]Record(nil), w.pending[:batch]...)
		last := w.written
		if batch > 0 {
			last = recs[batch-1].Seq
		}
		l := Lease{Reserved: last + w.o.Window, Last: w.written}
		if now.Sub(w.renewed) >= w.o.Lease/2 {
			l.Until = now.Add(w.o.Lease)
		}
		w.mu.Unlock()
		err := w.app(w.ctx, recs, l)
		w.mu.Lock()
		if err != nil {
			w.err = err
			w.moved.Broadcast()
			w.mu.Unlock()
			close(w.dead)
			return false
		}
		if !l.Until.IsZero() {
			w.renewed = now
		}
		for _, r := range w.pending[:batch] {
			w.size -= len(r.Data)
		}
		w.pending, w.added = w.pending[batch:], w.added[batch:]
		w.written, w.reserved = last, max(w.reserved, l.Reserved)
		w.moved.Broadcast()
		w.mu.Unlock()
	}
}

// Reader returns the logged events after seq in order, and whether the
// log can still grow (its job is active). It fails with NotFound when the
// log does not exist.
type Reader func(ctx context.Context, after int64) (recs []Record, active bool, err error)

// FollowOptions tune Follow; zero values take the defaults.
type FollowOptions struct {
	// MinWait and MaxWait bound the pause between two reads that found
	// nothing new (it doubles from MinWait up to MaxWait): 25 ms, 150 ms.
	MinWait, MaxWait time.Duration
	// IsLast reports whether rec is the log's last event.
	IsLast func(Record) bool
}

// Follow yields the events after seq in order, reading through read until
// it yields the last event, the log stops growing, or ctx ends. A record
// is yielded only when the one before it (its Prev) was yielded or lies
// at or before after: a record read while an earlier one is not visible
// yet waits for it, and ids skipped by an interruption, or an after that
// was never stored, are passed over. first is the first read's result
// when the caller already has it (nil to read). It returns yield's
// error, read's error or ctx's error.
func Follow(ctx context.Context, read Reader, after int64, o FollowOptions, yield func(Record) error) error {
	if o.MinWait <= 0 {
		o.MinWait = 25 * time.Millisecond
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 150 * time.Millisecond
	}
	wait := o.MinWait
	for {
		recs, active, err := read(ctx, after)
		if err != nil {
			return err
		}
		progressed := false
		for _, r := range recs {
			if r.Seq <= after {
				continue
			}
			if r.Prev > after {
				break // an earlier record is not visible yet: read again
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
