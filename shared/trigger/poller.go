package trigger

import (
	"context"
	"log/slog"
	"time"

	"github.com/workflowchat/service/shared/schedule"
)

// MaxPollInterval is the longest wait between two polls of the local
// scheduler: a fire is at most that late.
const MaxPollInterval = 10 * time.Second

// pollBatch bounds the schedules one poll reads; a poll that fills it
// reads again.
const pollBatch = 100

// Poller is the local scheduler's clock (the dev server's ticker): each
// Poll reads the schedules due at the clock's now from the due index
// (one Query, no Scan), claims each fire by moving its next fire time
// forward with a conditional write (so that two pollers fire it once),
// and hands it to Fire, the handler TriggerFireFunction runs in AWS.
// Fires missed while nothing polled (the server was stopped) are not
// caught up: a claim moves to the first fire after now, and the missed
// ones fire once, as that one fire.
type Poller struct {
	Due    DueStore
	Fire   func(context.Context, FireEvent) (string, error)
	Now    func() time.Time
	Logger *slog.Logger
}

// Poll fires every due schedule once and returns how many it fired. It
// fails when the due index cannot be read; a failing fire is logged and
// left to the next poll only if it was not claimed.
func (p *Poller) Poll(ctx context.Context) (int, error) {
	now := p.Now().UTC()
	fired := 0
	for {
		due, err := p.Due.Due(ctx, now, pollBatch)
		if err != nil {
			return fired, err
		}
		round := 0
		for _, d := range due {
			if p.fire(ctx, d, now) {
				round++
			}
		}
		fired += round
		// A full batch may hide more; one in which nothing could be
		// claimed would come back the same.
		if len(due) < pollBatch || round == 0 {
			return fired, nil
		}
	}
}

// fire claims and fires d; it reports whether it fired.
func (p *Poller) fire(ctx context.Context, d DueSchedule, now time.Time) bool {
	log := p.logger().With("triggerId", d.TriggerID)
	var next time.Time
	if sch, err := schedule.Parse(d.Expression, d.Timezone); err == nil {
		next, _ = sch.Next(d.Start, now)
	} else {
		log.ErrorContext(ctx, "local schedule does not parse; removed", "err", err)
	}
	claimed, err := p.Due.Advance(ctx, d, next)
	if err != nil || !claimed {
		if err != nil {
			log.WarnContext(ctx, "claim a due fire", "err", err)
		}
		return false
	}
	outcome, err := p.Fire(ctx, FireEvent{TriggerID: d.TriggerID, Version: d.Version, ScheduledTime: d.NextFireAt})
	if err != nil {
		log.WarnContext(ctx, "schedule fire failed", "outcome", outcome, "err", err)
	}
	return true
}

// Run polls every interval (at most MaxPollInterval) until ctx ends.
func (p *Poller) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 || interval > MaxPollInterval {
		interval = MaxPollInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := p.Poll(ctx); err != nil && ctx.Err() == nil {
				p.logger().WarnContext(ctx, "poll the local schedules", "err", err)
			}
		}
	}
}

func (p *Poller) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}
