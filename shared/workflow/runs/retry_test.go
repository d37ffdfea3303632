package runs_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// flakyTools runs the tool flaky, whose call takes took on the test's
// clock (advance) and fails until its succeedAt-th call (0: always);
// other tools are the registry's.
type flakyTools struct {
	runs.ToolRunner
	advance   func(time.Duration)
	took      time.Duration
	succeedAt int32
	calls     atomic.Int32
}

func (ft *flakyTools) Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error) {
	if toolID != "flaky" {
		return ft.ToolRunner.Run(ctx, toolID, input)
	}
	n := ft.calls.Add(1)
	ft.advance(ft.took)
	if ft.succeedAt == 0 || n < ft.succeedAt {
		return nil, errors.New("failing on purpose")
	}
	return map[string]any{"n": n}, nil
}

// runRetries runs a flaky step with retry, then a step of the counting
// tool, under the runner's run time limit (RunnerRunTimeout), on an
// injected clock: each wait for the next attempt is swept once its
// retryAt has passed on that clock. It returns the ended run.
func runRetries(t *testing.T, retry workflow.StepRetry, took time.Duration, succeedAt int32) (workflow.Run, *flakyTools) {
	t.Helper()
	var mu sync.Mutex
	skew := time.Duration(0)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Add(skew)
	}
	advance := func(d time.Duration) {
		mu.Lock()
		skew += d
		mu.Unlock()
	}
	tools := &flakyTools{ToolRunner: newRegistry(t), advance: advance, took: took, succeedAt: succeedAt}
	f := newClockedFixture(t, now, tools)
	s := step("flaky", "flaky", map[string]any{})
	s.Retry = &retry
	steps, _ := countSteps(1, 0)
	w := f.workflow(t, f.user, s, steps[0])
	run := f.start(t, w, nil)
	sweep := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Invoker: f.inproc, Lease: f.lease, Now: now, Ended: f.ended})
	for range 2 * workflow.MaxStepAttempts {
		f.inproc.Wait()
		got, err := f.runs.Run(context.Background(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != workflow.RunWaiting {
			return f.waitEnd(t, run.ID), tools
		}
		at := got.Steps[0].RetryAt
		if at == nil {
			t.Fatalf("run waiting, step %+v: want it waiting for its next attempt", got.Steps[0])
		}
		advance(at.Sub(now()) + time.Second)
		if err := sweep(context.Background(), job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the run did not end")
	return workflow.Run{}, nil
}

// TestRetryWaitLeftOutOfRunTime: a retry's waits for its next attempt
// hold no runner and are left out of the run's time limit, as a person's
// are: a backoff longer than the limit (1000 s against 14 min) is waited
// and the second attempt runs; a policy of 5 attempts whose backoffs sum
// to half an hour makes its 5 calls, the step failing with its tool's
// error. The step says how long it waited.
func TestRetryWaitLeftOutOfRunTime(t *testing.T) {
	t.Parallel()
	two, five := 2, 5
	secs := func(f float64) *float64 { return &f }
	t.Run("long backoff", func(t *testing.T) {
		t.Parallel()
		run, tools := runRetries(t, workflow.StepRetry{MaxAttempts: &two, BackoffSeconds: secs(1000)}, 0, 2)
		s := run.Steps[0]
		if run.Status != workflow.RunCompleted || tools.calls.Load() != 2 || len(s.Attempts) != 2 || s.Attempts[1].Status != workflow.StepCompleted {
			t.Fatalf("run %s %q, %d calls, step %s %q attempts %+v; want the second attempt run and completed", run.Status, run.Error, tools.calls.Load(), s.Status, s.Error, s.Attempts)
		}
		if waited := time.Duration(s.RetryWaitedMs) * time.Millisecond; waited < 1000*time.Second || waited > 1000*time.Second+time.Minute {
			t.Fatalf("step waited %s, want about 1000 s", waited)
		}
	})
	t.Run("five attempts", func(t *testing.T) {
		t.Parallel()
		run, tools := runRetries(t, workflow.StepRetry{MaxAttempts: &five, BackoffSeconds: secs(120), BackoffRate: secs(2)}, 0, 0)
		s := run.Steps[0]
		if run.Status != workflow.RunFailed || tools.calls.Load() != 5 || len(s.Attempts) != 5 || s.Status != workflow.StepFailed ||
			s.Error != "the tool failed" || run.Steps[1].Status != workflow.StepSkipped {
			t.Fatalf("run %s %q, %d calls, steps %s, step %q attempts %+v; want 5 calls, the step failed with its tool's error", run.Status, run.Error, tools.calls.Load(), statuses(run), s.Error, s.Attempts)
		}
	})
}

// TestRetryRunTimeLimit: the run's time limit still stops a run whose
// attempts themselves take its time (three calls of 5 minutes against
// 14): the step, which ran, fails for the limit with its three failed
// attempts, never skipped, and its next attempt does not run.
func TestRetryRunTimeLimit(t *testing.T) {
	t.Parallel()
	five := 5
	run, tools := runRetries(t, workflow.StepRetry{MaxAttempts: &five}, 5*time.Minute, 0)
	s := run.Steps[0]
	want := "the run exceeded its time limit of 14m0s"
	if run.Status != workflow.RunFailed || run.Error != want || tools.calls.Load() != 3 || statuses(run) != "failed,skipped" ||
		s.Error != want || len(s.Attempts) != 3 || s.RetryAt != nil {
		t.Fatalf("run %s %q, %d calls, steps %s, step %q retryAt %v attempts %+v", run.Status, run.Error, tools.calls.Load(), statuses(run), s.Error, s.RetryAt, s.Attempts)
	}
	for _, a := range s.Attempts {
		if a.Status != workflow.StepFailed || a.Error != "the tool failed" {
			t.Fatalf("attempts %+v", s.Attempts)
		}
	}
}

// TestRetryCallCutByRunTimeLimit: a call of a step with a retry that the
// run's time limit cuts fails the step for the limit, recorded as its
// failed attempt, and runs no other.
func TestRetryCallCutByRunTimeLimit(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	three := 3
	s := step("slow", "sleep", map[string]any{"ms": 60000})
	s.Retry = &workflow.StepRetry{MaxAttempts: &three}
	run, _ := f.execute(t, runs.RunnerOptions{RunTimeout: 2 * time.Second, StepTimeout: time.Minute, Now: time.Now}, wf(s))
	st := run.Steps[0]
	want := "the run exceeded its time limit of 2s"
	if run.Status != workflow.RunFailed || run.Error != want || st.Status != workflow.StepFailed || st.Error != want ||
		len(st.Attempts) != 1 || st.Attempts[0].Status != workflow.StepFailed || st.Attempts[0].Error != want || st.RetryAt != nil {
		t.Fatalf("run %s %q, step %s %q retryAt %v attempts %+v", run.Status, run.Error, st.Status, st.Error, st.RetryAt, st.Attempts)
	}
}
