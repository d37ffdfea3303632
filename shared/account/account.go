// Package account is the end of an account: the erasure of everything a
// deleted user had. Deleting an account (auth.Service.DeleteAccount)
// ends it at once (no sign-in, no session, token or grant) and queues
// its erasure; an Eraser then deletes every item and object of the user,
// part by part, each part idempotent, and removes the queued request
// last. A sweep that dies anywhere (a crash, a timeout, a storage error)
// leaves the request queued, and the next sweep runs the erasure again
// from the start: what was erased is found gone, the rest is erased.
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
}

// Queue holds the queued erasures.
type Queue interface {
	// PendingDeletions returns up to limit queued erasures, oldest first.
	PendingDeletions(ctx context.Context, limit int) ([]Deletion, error)
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
	queue  Queue
	parts  []Part
	logger *slog.Logger
}

// MaxPerSweep bounds the erasures one sweep runs; the next takes the rest.
const MaxPerSweep = 10

// NewEraser returns an Eraser that erases each queued user with parts,
// in order. logger nil means slog.Default().
func NewEraser(q Queue, logger *slog.Logger, parts ...Part) *Eraser {
	if logger == nil {
		logger = slog.Default()
	}
	return &Eraser{queue: q, parts: parts, logger: logger}
}

// Sweep runs up to MaxPerSweep queued erasures and returns how many it
// finished. An erasure that fails is logged and stays queued; the error
// returned is the first one.
func (e *Eraser) Sweep(ctx context.Context) (int, error) {
	ds, err := e.queue.PendingDeletions(ctx, MaxPerSweep)
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

// Erase runs every part for d, then removes it from the queue. The parts
// act as the deleted user (auth.ActingFor), as the user's own deletes
// would.
func (e *Eraser) Erase(ctx context.Context, d Deletion) error {
	ctx = auth.ActingFor(ctx, d.UserID)
	for _, p := range e.parts {
		if err := p.Erase(ctx, d); err != nil {
			return errs.Wrap("account.Erase", fmt.Errorf("%s: %w", p.Name, err))
		}
	}
	if err := e.queue.FinishDeletion(ctx, d.UserID); err != nil {
		return errs.Wrap("account.Erase", err)
	}
	e.logger.InfoContext(ctx, "account erased", "user", d.UserID)
	return nil
}
