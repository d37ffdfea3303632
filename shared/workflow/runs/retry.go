package runs

import (
	"context"
	"slices"
	"time"

	"github.com/workflowchat/service/shared/workflow"
)

// A step with a retry (workflow.StepRetry) records each call as an
// attempt. A failed call with attempts left does not wait in the runner:
// the step goes back to pending with retryAt, the run is recorded
// waiting (event step_retrying) with its lease ending at retryAt, and the
// runner returns. The sweeper, once the lease has ended (retryDue), puts
// the run back to running and invokes the runner, which runs the step
// again: the wait holds no compute, and a crash between attempts loses
// nothing (the run is in the store, waiting). Like a person's answer,
// the wait is left out of the run's time limit: retryDue adds it to the
// step's RetryWaitedMs (busy).

// attempted records the end of step i's call, whose failure is msg (""
// when it succeeded), when the step has a retry; with attempts left
// after a failure it schedules the next (waiting true: the run is
// recorded waiting, and Continue returns). Failures before the call
// (templates, a value too large to keep) are not retried.
func (x *execution) attempted(ctx context.Context, op string, i int, step workflow.Step, msg string) (waiting bool, err error) {
	rs := &x.run.Steps[i]
	if step.Retry == nil || rs.Status != workflow.StepRunning || rs.Input == nil {
		return false, nil
	}
	now := x.e.clock()
	addAttempt(rs, msg, now)
	if msg == "" || len(rs.Attempts) >= step.MaxAttempts() {
		return false, nil
	}
	retryAt := now.Add(step.RetryDelay(len(rs.Attempts)))
	rs.Status, rs.StartedAt, rs.Input, rs.RetryAt = workflow.StepPending, nil, nil, &retryAt
	x.run.Status = workflow.RunWaiting
	if err := x.store(ctx); err != nil {
		return true, x.stopped(ctx, op, err)
	}
	return true, nil
}

// addAttempt records the call of rs, a step with a retry, that ended
// at now, failed with msg ("" when it succeeded).
func addAttempt(rs *workflow.RunStep, msg string, now time.Time) {
	status := workflow.StepCompleted
	if msg != "" {
		status = workflow.StepFailed
	}
	rs.Attempts = append(rs.Attempts, workflow.StepAttempt{Attempt: len(rs.Attempts) + 1, StartedAt: rs.StartedAt, CompletedAt: &now, Status: status, Error: msg})
}

// retryingStep returns the index of run's step waiting for its next
// attempt, or -1.
func retryingStep(run workflow.Run) int {
	return slices.IndexFunc(run.Steps, func(s workflow.RunStep) bool { return s.Status == workflow.StepPending && s.RetryAt != nil })
}

// retryDue handles a waiting run whose step i waits for its next attempt
// and whose lease ended: before retryAt the lease is set to it again;
// after, the run is recorded running (conditioned on it still waiting: a
// cancel that came first wins) and handed to the runner for the same
// attempt of the run. The wait, from the failed attempt's end to now, is
// added to the step's RetryWaitedMs.
func retryDue(ctx context.Context, invoker workflow.Invoker, l *runLog, run workflow.Run, i int, now time.Time) error {
	rs := &run.Steps[i]
	if now.Before(*rs.RetryAt) {
		return ignoreConflict(l.SaveRun(ctx, run, workflow.RunWaiting))
	}
	rs.RetryAt = nil
	if n := len(rs.Attempts); n > 0 && rs.Attempts[n-1].CompletedAt != nil && now.After(*rs.Attempts[n-1].CompletedAt) {
		rs.RetryWaitedMs += now.Sub(*rs.Attempts[n-1].CompletedAt).Milliseconds()
	}
	run.Status = workflow.RunRunning
	if err := l.SaveRun(ctx, run, workflow.RunWaiting); err != nil {
		return ignoreConflict(err)
	}
	return invoker.Invoke(ctx, workflow.RunRef{RunID: run.ID, Attempt: run.Attempt})
}

// retryInterrupted decides for step i of run, found running by a new
// attempt of the run (its call was cut by a crash), whether its retry
// runs it again: a step with an explicit retry records the cut call as a
// failed attempt (INTERRUPTED), and runs again (retry) when attempts are
// left, else, when its retry allows more than one call, its retry is
// exhausted: the step has made its MaxAttempts calls, interruptions
// included, and runs no more, whatever its tool. A step without a retry,
// or with one of a single call, is neither. It loads the run's plan to
// read the step.
func (r *Runner) retryInterrupted(ctx context.Context, l *runLog, run *workflow.Run, i int) (retry, exhausted bool, err error) {
	if err := l.values.plan(ctx, run); err != nil {
		return false, false, err
	}
	if i >= len(run.Plan) || run.Plan[i].Retry == nil {
		return false, false, nil
	}
	step, rs := run.Plan[i], &run.Steps[i]
	now := r.now().UTC()
	rs.Attempts = append(rs.Attempts, workflow.StepAttempt{Attempt: len(rs.Attempts) + 1, StartedAt: rs.StartedAt, CompletedAt: &now,
		Status: workflow.StepFailed, Error: workflow.CodeInterrupted + ": the call was interrupted"})
	retry = len(rs.Attempts) < step.MaxAttempts()
	// A retry of one call (maxAttempts 1, the default) asks for none:
	// the step is then treated as one without a retry.
	return retry, !retry && step.MaxAttempts() > 1, nil
}

// retryingEvent returns the step_retrying event of step s, pending for
// its next attempt.
func retryingEvent(runID string, s workflow.RunStep) workflow.RunEvent {
	ev := workflow.RunEvent{Type: workflow.EventStepRetrying, RunID: runID, StepID: s.ID, ToolID: s.ToolID, RetryAt: s.RetryAt}
	if n := len(s.Attempts); n > 0 {
		ev.Attempt, ev.Error = s.Attempts[n-1].Attempt, s.Attempts[n-1].Error
	}
	return ev
}
