package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/workflowchat/service/shared/tracing"
)

// Ref names one job: its kind, the collection it lives in (a reply's
// chat; a run's own id) and its id (the reply's message id, the run id).
type Ref struct {
	Kind       string
	Collection string
	ID         string
}

// Expired is a job whose lease ran out.
type Expired struct {
	Ref
	LeaseUntil time.Time
}

// Head is the state of a job's log.
type Head struct {
	Kind string
	// Status is the job's status as its kind records it.
	Status string
	// Active is true until the job ends.
	Active bool
	// LastSeq is the id of the last event written; Reserved the highest
	// id the job's process may have handed out (see Lease).
	LastSeq, Reserved int64
	LeaseUntil        time.Time
	StopRequested     bool
}

// Closing returns the id of the first closing event of an interrupted
// job: after every id its process may have handed out.
func (h Head) Closing() int64 { return max(h.LastSeq, h.Reserved) + 1 }

// Store is the storage of job logs shared by every kind. Starting and
// ending a job are written by its kind's store, in one transaction with
// the items the job produces.
type Store interface {
	// Append writes recs to ref's log in the slot after the event they
	// follow, one write conditioned on that slot being free (a stop or
	// the job's end takes it), and, when l.Until is set, first renews
	// the lease to l, conditioned on the job being active with no stop
	// requested. A retry of a write that was applied succeeds. Conflict
	// STOP_REQUESTED or NOT_ACTIVE when the job must end; NotFound when
	// the log is gone.
	Append(ctx context.Context, ref Ref, recs []Record, l Lease) error
	// Read returns ref's events after seq, in order, and its head, from
	// one strongly consistent read. NotFound when there is no log (or it
	// expired).
	Read(ctx context.Context, ref Ref, after int64) ([]Record, Head, error)
	// Head returns ref's head with one strongly consistent read.
	// NotFound when there is no log (or it expired).
	Head(ctx context.Context, ref Ref) (Head, error)
	// RequestStop asks ref's job to stop: its next write fails with
	// STOP_REQUESTED. NotFound, Conflict NOT_ACTIVE when it has ended.
	RequestStop(ctx context.Context, ref Ref) error
	// Expired returns up to limit active jobs whose lease ended before
	// now, without scanning the table.
	Expired(ctx context.Context, now time.Time, limit int) ([]Expired, error)
}

// Handler ends or resumes one expired job. It must be safe to call for a
// job that another sweeper already handled or that renewed its lease
// meanwhile (its writes are conditional).
type Handler func(ctx context.Context, e Expired) error

// MaxPerSweep bounds the jobs one sweep handles; the next sweep takes the
// rest.
const MaxPerSweep = 100

// Sweeper hands expired jobs to their kind's handler: the one registry
// of job kinds.
type Sweeper struct {
	store    Store
	handlers map[string]Handler
	now      func() time.Time
	log      *slog.Logger
	tasks    []task
}

// task is queued work a sweep also runs (Also).
type task struct {
	name string
	run  func(ctx context.Context) (int, error)
}

// Also adds queued work every Sweep runs after the expired jobs (account
// erasures): run does what is queued and returns how much it finished.
// Its failure is joined into Sweep's error; what it finished is logged,
// not counted in Sweep's result (the expired jobs). Call it while
// building the sweeper.
func (s *Sweeper) Also(name string, run func(ctx context.Context) (int, error)) *Sweeper {
	s.tasks = append(s.tasks, task{name: name, run: run})
	return s
}

// runTasks runs the tasks of Also.
func (s *Sweeper) runTasks(ctx context.Context) []error {
	var errList []error
	for _, t := range s.tasks {
		n, err := t.run(ctx)
		if n > 0 {
			s.log.InfoContext(ctx, "sweep task", "task", t.name, "done", n)
		}
		if err != nil {
			errList = append(errList, fmt.Errorf("job: %s: %w", t.name, err))
		}
	}
	return errList
}

// NewSweeper returns a Sweeper over store with a handler per kind. now nil
// means time.Now; log nil means slog.Default().
func NewSweeper(store Store, handlers map[string]Handler, now func() time.Time, log *slog.Logger) *Sweeper {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Sweeper{store: store, handlers: handlers, now: now, log: log}
}

// Sweep handles every expired lease once and returns how many it handled,
// then runs the tasks of Also.
// It fails when the store cannot be read; a handler's failure or a kind
// without a handler is joined into the error after the others were tried.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	expired, err := s.store.Expired(ctx, s.now(), MaxPerSweep)
	if err != nil {
		return 0, errors.Join(append([]error{fmt.Errorf("job: find expired: %w", err)}, s.runTasks(ctx)...)...)
	}
	if len(expired) == 0 {
		return 0, errors.Join(s.runTasks(ctx)...)
	}
	// Only a sweep that found work is traced: the run resumes it makes
	// link to it.
	ctx, span := tracing.Start(ctx, "job.sweep", tracing.SweptJobs.Int(len(expired)))
	defer span.End()
	var errList []error
	n := 0
	for _, e := range expired {
		h, ok := s.handlers[e.Kind]
		if !ok {
			errList = append(errList, fmt.Errorf("job: no handler for kind %q (%s/%s)", e.Kind, e.Collection, e.ID))
			continue
		}
		if err := h(ctx, e); err != nil {
			errList = append(errList, fmt.Errorf("job: %s %s/%s: %w", e.Kind, e.Collection, e.ID, err))
			continue
		}
		n++
		// Operators count these lines (an alarm on interrupted jobs per
		// hour): keep the message and the kind field.
		s.log.InfoContext(ctx, "swept expired lease", "kind", e.Kind, "collection", e.Collection, "id", e.ID)
	}
	errList = append(errList, s.runTasks(ctx)...)
	return n, errors.Join(errList...)
}

// Run sweeps at once (the jobs of a process that died before a restart
// need not wait an interval), then every interval until ctx ends, logging
// failures.
func (s *Sweeper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "sweep", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
