// Package lease is the liveness of long-running work (a streamed reply,
// later a workflow run): the work renews a lease with each write of its
// event log, and a Sweeper finds the work whose lease ran out (its process
// died) and hands each to the handler of its kind, which ends or resumes
// it. In AWS the sweeper runs on a schedule (SweeperFunction); the dev
// server runs the same code on a ticker.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Expired is one piece of active work whose lease ran out.
type Expired struct {
	// Kind names the work's handler, e.g. "generation".
	Kind string
	// Collection is the id of the collection the work lives in (a chat).
	Collection string
	// ID is the work's own id (a message id).
	ID         string
	LeaseUntil time.Time
}

// Store finds expired leases.
type Store interface {
	// Expired returns up to limit pieces of active work whose lease ended
	// before now, without scanning the table.
	Expired(ctx context.Context, now time.Time, limit int) ([]Expired, error)
}

// Handler ends or resumes one piece of expired work. It must be safe to
// call for work that another sweeper already handled or that renewed its
// lease meanwhile (its writes are conditional).
type Handler func(ctx context.Context, e Expired) error

// MaxPerSweep bounds the work one sweep handles; the next sweep takes the
// rest.
const MaxPerSweep = 100

// Sweeper hands expired work to its kind's handler.
type Sweeper struct {
	store    Store
	handlers map[string]Handler
	now      func() time.Time
	log      *slog.Logger
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

// Sweep handles every expired lease once and returns how many it handled.
// It fails when the store cannot be read; a handler's failure or a kind
// without a handler is joined into the error after the others were tried.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	expired, err := s.store.Expired(ctx, s.now(), MaxPerSweep)
	if err != nil {
		return 0, fmt.Errorf("lease: find expired: %w", err)
	}
	var errList []error
	n := 0
	for _, e := range expired {
		h, ok := s.handlers[e.Kind]
		if !ok {
			errList = append(errList, fmt.Errorf("lease: no handler for kind %q (%s/%s)", e.Kind, e.Collection, e.ID))
			continue
		}
		if err := h(ctx, e); err != nil {
			errList = append(errList, fmt.Errorf("lease: %s %s/%s: %w", e.Kind, e.Collection, e.ID, err))
			continue
		}
		n++
		s.log.InfoContext(ctx, "swept expired lease", "kind", e.Kind, "collection", e.Collection, "id", e.ID)
	}
	return n, errors.Join(errList...)
}

// Run sweeps every interval until ctx ends, logging failures.
func (s *Sweeper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "sweep", "err", err.Error())
			}
		}
	}
}
