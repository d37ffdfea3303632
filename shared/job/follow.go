package job

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/sse"
)

// Follower replays a job's logged events after a given one, then follows
// them until the job's last event: the one follower of every kind.
type Follower struct {
	ref    Ref
	store  Store
	after  int64
	isLast func(Record) bool
	first  []Record
	head   Head
	used   bool
}

// NewFollower reads the events of job ref after seq after (0: from its
// first) with one read, and returns a follower that goes on from there;
// isLast tells the job's last event (its kind's). It fails with the
// store's errors: NotFound when the job has no log.
func NewFollower(ctx context.Context, store Store, ref Ref, after int64, isLast func(Record) bool) (*Follower, error) {
	first, head, err := store.Read(ctx, ref, after)
	if err != nil {
		return nil, errs.Wrap("job.NewFollower", err)
	}
	return &Follower{ref: ref, store: store, after: after, isLast: isLast, first: first, head: head}, nil
}

// Head returns the job's head as the first read found it.
func (f *Follower) Head() Head { return f.head }

// EventID returns the SSE id of rec: "<job id>:<seq>".
func (f *Follower) EventID(rec Record) string { return ID{Stream: f.ref.ID, Seq: rec.Seq}.String() }

// Follow yields each event until the job's last event, ctx's end or
// yield's first error, which it returns (see the package's Follow).
func (f *Follower) Follow(ctx context.Context, yield func(Record) error) error {
	read := func(ctx context.Context, after int64) ([]Record, bool, error) {
		if !f.used {
			f.used = true
			return f.first, f.head.Active, nil
		}
		recs, h, err := f.store.Read(ctx, f.ref, after)
		return recs, h.Active, err
	}
	return Follow(ctx, read, f.after, FollowOptions{IsLast: f.isLast}, yield)
}

// MaxFollow bounds one request following a job where the host sets no
// deadline; the client resumes with Last-Event-ID.
const MaxFollow = 10 * time.Minute

// followMargin is how long before the host's deadline a follow ends, so
// that a buffered answer (Lambda behind API Gateway) still gets out.
const followMargin = 2 * time.Second

// Serve answers r with f's events as Server-Sent Events (id
// "<job id>:<seq>", data the event as logged) until the job's last event,
// the client's departure, or the end of the follow: MaxFollow, or just
// before the request's deadline; a ": ping" comment goes out after ping of
// silence. It is the one SSE follow path of every job kind.
func Serve(w http.ResponseWriter, r *http.Request, f *Follower, ping time.Duration) {
	out := sse.NewWriter(w)
	deadline := time.Now().Add(MaxFollow)
	if dl, ok := r.Context().Deadline(); ok && dl.Add(-followMargin).Before(deadline) {
		deadline = dl.Add(-followMargin)
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	stop := KeepAlive(ctx, out, ping)
	defer func() { cancel(); stop() }()
	err := f.Follow(ctx, func(rec Record) error { return out.SendWithID(f.EventID(rec), json.RawMessage(rec.Data)) })
	if err != nil {
		logging.FromContext(ctx).InfoContext(ctx, "follow ended early", "job", f.ref.ID, "err", err.Error())
	}
}

// KeepAlive pings out after ping of silence until the returned function
// is called (which waits for the pinger, so nothing is written after it).
func KeepAlive(ctx context.Context, out *sse.Writer, ping time.Duration) func() {
	ctx, stop := context.WithCancel(ctx)
	pinging := make(chan struct{})
	go func() { defer close(pinging); out.KeepAlive(ctx, ping) }()
	return func() { stop(); <-pinging }
}
