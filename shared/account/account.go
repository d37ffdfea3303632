// Package account is the end of an account: the erasure of everything a
// deleted user had. Deleting an account (auth.Service.DeleteAccount)
// ends it at once (no sign-in, no session, token or grant) and queues
// its erasure; an Eraser then deletes every item and object of the user,
// part by part, each part idempotent, and removes the queued request
// last. A sweep that dies anywhere (a crash, a timeout, a storage error)
// leaves the request queued, and the next sweep runs the erasure again
// from the start: what was erased is found gone, the rest is erased.
//
// An erasure has two passes when the Eraser is given a last pass
// (WithLastPass): the first runs at once and erases everything; the
// request then stays queued, due at its request time plus that window,
// and the second runs every part again before it removes the request.
// What can still write for the user after the deletion without a
// session (an upload URL issued before it, valid for its own minutes in
// the blob store; a reply or run under way, until it notices its chat or
// workflow is gone) writes within that window, and the last pass erases
// it.
package account

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
)

// Deletion is a queued erasure.
type Deletion struct {
	UserID        string
	Email         string
	UserCreatedAt time.Time
	RequestedAt   time.Time
	// LastPassAt is when the last pass is due, once the first pass ran
	// (zero before).
	LastPassAt time.Time
	// BusyChats are the chats the first pass deleted while a reply was
	// under way in them (Queue.AddBusyChats): what such a reply wrote
	// after its chat was gone, the last pass deletes by these ids.
	BusyChats []string
}

// Queue holds the queued erasures.
type Queue interface {
	// PendingDeletions returns up to limit queued erasures due at now
	// (a first pass, or a last pass whose time came), oldest first.
	PendingDeletions(ctx context.Context, now time.Time, limit int) ([]Deletion, error)
	// AddBusyChats records chatIDs in userID's queued erasure
	// (Deletion.BusyChats).
	AddBusyChats(ctx context.Context, userID string, chatIDs []string) error
	// AwaitLastPass records that userID's first pass ran and that its
	// last pass is due at at.
	AwaitLastPass(ctx context.Context, userID string, at time.Time) error
	// FinishDeletion removes the erasure of userID from the queue.
	FinishDeletion(ctx context.Context, userID string) error
}

// Part is one part of an erasure: it deletes what the user has of one
// kind. It must be idempotent (run again after it or a later part
// failed) and must not fail for a user who has nothing of its kind.
type Part struct {
	Name  string
	Erase func(ctx context.Context, d Deletion) error
}

// Eraser runs the queued erasures.
type Eraser struct {
	queue    Queue
	parts    []Part
	logger   *slog.Logger
	now      func() time.Time
	lastPass time.Duration
}

// MaxPerSweep bounds the erasures one sweep runs; the next takes the rest.
const MaxPerSweep = 10

// NewEraser returns an Eraser that erases each queued user with parts,
// in order. logger nil means slog.Default().
func NewEraser(q Queue, logger *slog.Logger, parts ...Part) *Eraser {
	if logger == nil {
		logger = slog.Default()
	}
	return &Eraser{queue: q, parts: parts, logger: logger, now: time.Now}
}

// WithLastPass makes e run every erasure a second time once window has
// passed since its request, with now as the clock (nil: time.Now).
func (e *Eraser) WithLastPass(window time.Duration, now func() time.Time) *Eraser {
	if now != nil {
		e.now = now
	}
	e.lastPass = window
	return e
}

// Sweep runs up to MaxPerSweep queued erasures and returns how many it
// finished. An erasure that fails is logged and stays queued; the error
// returned is the first one.
func (e *Eraser) Sweep(ctx context.Context) (int, error) {
	ds, err := e.queue.PendingDeletions(ctx, e.now(), MaxPerSweep)
	if err != nil {
		return 0, errs.Wrap("account.Sweep", err)
	}
	n := 0
	var first error
	for _, d := range ds {
		if err := e.Erase(ctx, d); err != nil {
			e.logger.ErrorContext(ctx, "account erasure failed; it stays queued", "user", d.UserID, "err", err)
			if first == nil {
				first = err
			}
			continue
		}
		n++
	}
	return n, first
}

// Erase runs every part for d, then removes it from the queue, or, after
// the first pass of an Eraser with a last pass due later, records when
// the last pass is due. The parts act as the deleted user
// (auth.ActingFor), as the user's own deletes would.
func (e *Eraser) Erase(ctx context.Context, d Deletion) error {
	ctx = auth.ActingFor(ctx, d.UserID)
	e.logger.InfoContext(ctx, "account erasure started", "user", d.UserID, "lastPass", !d.LastPassAt.IsZero())
	for _, p := range e.parts {
		if err := p.Erase(ctx, d); err != nil {
			return errs.Wrap("account.Erase", fmt.Errorf("%s: %w", p.Name, err))
		}
	}
	if due := d.RequestedAt.Add(e.lastPass); d.LastPassAt.IsZero() && e.lastPass > 0 && e.now().Before(due) {
		if err := e.queue.AwaitLastPass(ctx, d.UserID, due); err != nil {
			return errs.Wrap("account.Erase", err)
		}
		e.logger.InfoContext(ctx, "account erased; a last pass follows", "user", d.UserID, "lastPassAt", due)
		return nil
	}
	if err := e.queue.FinishDeletion(ctx, d.UserID); err != nil {
		return errs.Wrap("account.Erase", err)
	}
	e.logger.InfoContext(ctx, "account erased", "user", d.UserID)
	return nil
}
