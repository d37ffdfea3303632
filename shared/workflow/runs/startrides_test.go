package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// eventLog is the real store, noting the event types of each checkpoint
// and telling started of each one; before, when set, runs before the
// first checkpoint is written.
type eventLog struct {
	*store.Runs
	mu      sync.Mutex
	types   [][]string
	started chan []string
	before  func(ctx context.Context, runID string)
}

func (l *eventLog) SaveCheckpoint(ctx context.Context, cp workflow.Checkpoint) error {
	var types []string
	for _, rec := range cp.Events {
		var ev struct{ Type, StepID string }
		if err := json.Unmarshal(rec.Data, &ev); err != nil {
			return err
		}
		types = append(types, ev.Type+"("+ev.StepID+")")
	}
	l.mu.Lock()
	first := len(l.types) == 0
	l.types = append(l.types, types)
	l.mu.Unlock()
	if first && l.before != nil {
		l.before(ctx, cp.Run.ID)
	}
	err := l.Runs.SaveCheckpoint(ctx, cp)
	if l.started != nil && err == nil {
		l.started <- types
	}
	return err
}

func (l *eventLog) checkpoints() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]string(nil), l.types...)
}

// gatedTool is a compute-only tool whose calls wait for release (or their
// context), after telling called.
func gatedTool(called chan<- struct{}, release <-chan struct{}, cancelled chan<- error) *tools.Tool {
	return &tools.Tool{
		ID: "gated", Name: "Gated", Description: "Waits for the test.", Category: "util",
		InputSchema:  json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Timeout:      time.Minute,
		Annotations:  tools.Annotations{ReadOnly: true, Idempotent: true},
		Run: func(ctx context.Context, _ map[string]any) (map[string]any, error) {
			called <- struct{}{}
			select {
			case <-release:
				return map[string]any{"ok": true}, nil
			case <-ctx.Done():
				cancelled <- ctx.Err()
				return nil, ctx.Err()
			}
		},
	}
}

// gate is a registry holding gatedTool (and others), with its channels:
// room for calls calls before the test reads called.
type gate struct {
	called    chan struct{}
	release   chan struct{}
	cancelled chan error
	reg       *tools.Registry
}

func newGate(t *testing.T, calls int, others ...*tools.Tool) gate {
	t.Helper()
	g := gate{called: make(chan struct{}, calls), release: make(chan struct{}), cancelled: make(chan error, calls)}
	reg, err := tools.NewRegistry(append(others, gatedTool(g.called, g.release, g.cancelled))...)
	if err != nil {
		t.Fatal(err)
	}
	g.reg = reg
	return g
}

// quickTool returns at once; computeOnly gives it the annotations of a
// tool that only computes, else of one with effects.
func quickTool(id string, computeOnly bool) *tools.Tool {
	a := tools.Annotations{Destructive: true}
	if computeOnly {
		a = tools.Annotations{ReadOnly: true, Idempotent: true}
	}
	return &tools.Tool{
		ID: id, Name: id, Description: "Returns at once.", Category: "util",
		InputSchema:  json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Timeout:      time.Minute,
		Annotations:  a,
		Run:          func(context.Context, map[string]any) (map[string]any, error) { return map[string]any{"ok": true}, nil },
	}
}

// TestStartRidesTheEndOfAComputeOnlyStep: steps whose tools only compute
// are written together, each start with its end, with the next write the
// run makes (the run's end, the start of a step with effects, or once
// runs.StartDelay has passed), the events still in order; a tool that is
// not compute-only, or a runner told of none, writes the start first and
// the result with the next step's start; and a compute-only step still
// running after runs.StartDelay is recorded running while it runs, with
// what the steps before it did.
func TestStartRidesTheEndOfAComputeOnlyStep(t *testing.T) {
	t.Parallel()
	db, _, jobs, reg, chatID, userID := benchDurable(t)
	three := sizedSteps(userID, 3, 100) // json_query: compute-only
	for _, tc := range []struct {
		name        string
		computeOnly func(context.Context, string) bool
		want        string
	}{
		{"compute_only", reg.ComputeOnly,
			"[[run_started() step_started(s0) step_completed(s0) step_started(s1) step_completed(s1) step_started(s2) step_completed(s2) run_completed()]]"},
		{"not_told", nil,
			"[[run_started() step_started(s0)] [step_completed(s0) step_started(s1)] [step_completed(s1) step_started(s2)] [step_completed(s2) run_completed()]]"},
		{"not_compute_only", func(context.Context, string) bool { return false },
			"[[run_started() step_started(s0)] [step_completed(s0) step_started(s1)] [step_completed(s1) step_started(s2)] [step_completed(s2) run_completed()]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := &eventLog{Runs: store.NewRuns(db.DB, db.Data())}
			// StartDelay an hour: a slow machine writes as a quick one.
			runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: reg, ComputeOnly: tc.computeOnly, Lease: time.Hour, CancelCheck: time.Hour, StartDelay: time.Hour})
			ctx := context.Background()
			run, done := startRun(t, rs, runner, three, chatID, userID)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := jsonish(rs.checkpoints()); got != tc.want {
				t.Errorf("checkpoints\n%s\nwant\n%s", got, tc.want)
			}
			got, err := rs.Run(ctx, run.ID)
			if err != nil || got.Status != workflow.RunCompleted {
				t.Fatalf("run %s %q, %v", got.Status, got.Error, err)
			}
			s0 := got.Steps[0]
			if s0.Status != workflow.StepCompleted || s0.StartedAt == nil || s0.CompletedAt == nil || s0.StartedAt.After(*s0.CompletedAt) || s0.Input == nil {
				t.Errorf("first step read back as %+v", s0)
			}
		})
	}

	t.Run("a_step_with_effects_between", func(t *testing.T) {
		t.Parallel()
		qreg, err := tools.NewRegistry(quickTool("pure", true), quickTool("effect", false))
		if err != nil {
			t.Fatal(err)
		}
		rs := &eventLog{Runs: store.NewRuns(db.DB, db.Data())}
		runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: qreg, ComputeOnly: qreg.ComputeOnly, Lease: time.Hour, CancelCheck: time.Hour, StartDelay: time.Hour})
		w := three
		w.Steps = []workflow.Step{{ID: "p0", ToolID: "pure", Inputs: map[string]any{}}, {ID: "e1", ToolID: "effect", Inputs: map[string]any{}},
			{ID: "p2", ToolID: "pure", Inputs: map[string]any{}}, {ID: "p3", ToolID: "pure", Inputs: map[string]any{}}}
		_, done := startRun(t, rs, runner, w, chatID, userID)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// The step with effects has its start recorded, with what the
		// steps before it did, before it runs; its result is recorded
		// before the next step runs, as a crash must not lose it.
		want := "[[run_started() step_started(p0) step_completed(p0) step_started(e1)] [step_completed(e1) step_started(p2)] [step_completed(p2) step_started(p3) step_completed(p3) run_completed()]]"
		if got := jsonish(rs.checkpoints()); got != want {
			t.Errorf("checkpoints\n%s\nwant\n%s", got, want)
		}
	})

	t.Run("quick_steps_then_a_slow_one", func(t *testing.T) {
		t.Parallel()
		g := newGate(t, 1, quickTool("pure", true))
		called, release, greg := g.called, g.release, g.reg
		rs := &eventLog{Runs: store.NewRuns(db.DB, db.Data()), started: make(chan []string, 4)}
		// A StartDelay of 3 s: the quick step ends well within it even on
		// a loaded machine.
		runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: greg, ComputeOnly: greg.ComputeOnly, Lease: time.Hour, CancelCheck: time.Hour, StartDelay: 3 * time.Second})
		w := three
		w.Steps = []workflow.Step{{ID: "p0", ToolID: "pure", Inputs: map[string]any{}}, {ID: "g", ToolID: "gated", Inputs: map[string]any{}}}
		ctx := context.Background()
		run, done := startRun(t, rs, runner, w, chatID, userID)
		<-called
		// Within StartDelay of the first step's start, the quick step's
		// start and result and the slow one's start are written while
		// the slow call runs.
		if got := strings.Join(<-rs.started, " "); got != "run_started() step_started(p0) step_completed(p0) step_started(g)" {
			t.Fatalf("first checkpoint while the call runs: %s", got)
		}
		mid, err := rs.Run(ctx, run.ID)
		if err != nil || mid.Steps[0].Status != workflow.StepCompleted || mid.Steps[1].Status != workflow.StepRunning {
			t.Fatalf("while the slow step runs the store holds %v, %v", mid.Steps, err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(<-rs.started, " "); got != "step_completed(g) run_completed()" {
			t.Errorf("last checkpoint: %s", got)
		}
	})

	t.Run("slow_step_shows_running", func(t *testing.T) {
		t.Parallel()
		g := newGate(t, 1)
		called, release, greg := g.called, g.release, g.reg
		rs := &eventLog{Runs: store.NewRuns(db.DB, db.Data()), started: make(chan []string, 4)}
		runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: greg, ComputeOnly: greg.ComputeOnly, Lease: time.Hour, CancelCheck: time.Hour})
		w := three
		w.Steps = []workflow.Step{{ID: "g", ToolID: "gated", Inputs: map[string]any{}}}
		ctx := context.Background()
		run, done := startRun(t, rs, runner, w, chatID, userID)
		<-called
		// The call has not returned: after StartDelay its start is
		// written while it runs.
		if got := strings.Join(<-rs.started, " "); got != "run_started() step_started(g)" {
			t.Fatalf("first checkpoint while the call runs: %s", got)
		}
		mid, err := rs.Run(ctx, run.ID)
		if err != nil || mid.Status != workflow.RunRunning || mid.Steps[0].Status != workflow.StepRunning {
			t.Fatalf("while the step runs the store holds %s/%v, %v", mid.Status, mid.Steps, err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(<-rs.started, " "); got != "step_completed(g) run_completed()" {
			t.Errorf("last checkpoint: %s", got)
		}
	})

	t.Run("start_refused_cancels_the_call", func(t *testing.T) {
		t.Parallel()
		g := newGate(t, 1) // never released
		called, cancelled, greg := g.called, g.cancelled, g.reg
		rs := &eventLog{Runs: store.NewRuns(db.DB, db.Data())}
		// The run is cancelled just before the start is written (the
		// heartbeat reads no cancel here): the write's condition fails.
		rs.before = func(ctx context.Context, runID string) {
			r, err := rs.Runs.Run(ctx, runID)
			if err == nil {
				_, err = rs.Runs.CancelRun(ctx, r, time.Now())
			}
			if err != nil {
				t.Error(err)
			}
		}
		runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: greg, ComputeOnly: greg.ComputeOnly, Lease: time.Hour, CancelCheck: time.Hour})
		w := three
		w.Steps = []workflow.Step{{ID: "g", ToolID: "gated", Inputs: map[string]any{}}, {ID: "after", ToolID: "gated", Inputs: map[string]any{}}}
		ctx := context.Background()
		run, done := startRun(t, rs, runner, w, chatID, userID)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(called) != 1 {
			t.Errorf("%d calls, want the first step's alone", len(called))
		}
		select {
		case err := <-cancelled:
			if err == nil {
				t.Error("the call ended with no error")
			}
		default:
			t.Error("the call was not cancelled when its start could not be written")
		}
		got, err := rs.Run(ctx, run.ID)
		if err != nil || got.Status != workflow.RunCancelled || got.Steps[0].Status != workflow.StepCancelled || got.Steps[1].Status != workflow.StepCancelled {
			t.Fatalf("run read back %s, steps %s %s, %v", got.Status, got.Steps[0].Status, got.Steps[1].Status, err)
		}
	})

	// A call that ends within StartDelay rides, and so does the next
	// step, but only until StartDelay has passed since the first call
	// began: its start waits unrecorded no longer than that.
	t.Run("the_wait_counts_from_the_first_call", func(t *testing.T) {
		t.Parallel()
		g := newGate(t, 2)
		called, release, greg := g.called, g.release, g.reg
		rs := &eventLog{Runs: store.NewRuns(db.DB, db.Data()), started: make(chan []string, 4)}
		const delay = 2 * time.Second
		runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: greg, ComputeOnly: greg.ComputeOnly, Lease: time.Hour, CancelCheck: time.Hour, StartDelay: delay})
		w := three
		w.Steps = []workflow.Step{{ID: "g1", ToolID: "gated", Inputs: map[string]any{}}, {ID: "g2", ToolID: "gated", Inputs: map[string]any{}}}
		_, done := startRun(t, rs, runner, w, chatID, userID)
		<-called
		began := time.Now()
		// The first call ends three quarters of StartDelay after it
		// began (a loaded machine may end it later: its start is then
		// written while it runs, as promised too); the second is held.
		time.Sleep(delay * 3 / 4)
		release <- struct{}{}
		<-called
		first := strings.Join(<-rs.started, " ")
		waited := time.Since(began)
		if !strings.HasPrefix(first, "run_started() step_started(g1)") {
			t.Errorf("first checkpoint: %s", first)
		}
		// Counted from the first call's end it would be written at
		// 1.75 StartDelay; the bound leaves half of StartDelay for a
		// late timer.
		if waited > delay*3/2 {
			t.Errorf("the first step's start was written %s after its call began, StartDelay is %s", waited, delay)
		}
		release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})

	// A cancel recorded while steps ride their next checkpoint: the steps
	// whose starts no checkpoint recorded are recorded cancelled, never
	// started (they may have started after the cancel, and did nothing
	// outside the run), whether the runner's heartbeat stopped the call
	// or the checkpoint's condition found the cancel; the log says the
	// same.
	t.Run("cancelled_during_its_call", func(t *testing.T) {
		t.Parallel()
		g := newGate(t, 1) // never released
		rs := &eventLog{Runs: store.NewRuns(db.DB, db.Data())}
		runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: g.reg, ComputeOnly: g.reg.ComputeOnly, Lease: time.Hour, CancelCheck: 20 * time.Millisecond, StartDelay: time.Hour})
		w := three
		w.Steps = []workflow.Step{{ID: "p0", ToolID: "gated", Inputs: map[string]any{}}}
		run, done := startRun(t, rs, runner, w, chatID, userID)
		<-g.called
		cancelled := cancelRun(t, rs, run.ID)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := <-g.cancelled; err == nil {
			t.Error("the call ended with no error")
		}
		checkRiddenCancel(t, rs, jobs, run.ID, cancelled)
	})
	t.Run("cancelled_while_steps_ride", func(t *testing.T) {
		t.Parallel()
		rs := &eventLog{Runs: store.NewRuns(db.DB, db.Data())}
		reg, ids, cancelled := cancellerTools(t, rs)
		runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: reg, ComputeOnly: reg.ComputeOnly, Lease: time.Hour, CancelCheck: time.Hour, StartDelay: time.Hour})
		w := three
		w.Steps = []workflow.Step{{ID: "p0", ToolID: "pure", Inputs: map[string]any{}}, {ID: "c1", ToolID: "canceller", Inputs: map[string]any{}}}
		for _, id := range []string{"p2", "p3", "p4", "p5"} {
			w.Steps = append(w.Steps, workflow.Step{ID: id, ToolID: "pure", Inputs: map[string]any{}})
		}
		run, done := startRun(t, rs, runner, w, chatID, userID)
		ids <- run.ID
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		checkRiddenCancel(t, rs, jobs, run.ID, *cancelled)
	})

	// The same for a step a crashed attempt recorded started, run again
	// by the next attempt and riding when the cancel comes: it keeps the
	// start the store held.
	t.Run("a_rerun_step_cancelled_while_it_rides", func(t *testing.T) {
		t.Parallel()
		rs := &eventLog{Runs: store.NewRuns(db.DB, db.Data())}
		reg, ids, cancelled := cancellerTools(t, rs)
		w := three
		w.Steps = []workflow.Step{{ID: "c0", ToolID: "canceller", Inputs: map[string]any{}}, {ID: "p1", ToolID: "pure", Inputs: map[string]any{}}}
		ctx := context.Background()
		run, next := crashedOnFirstStep(t, rs, w, chatID, userID)
		ids <- run.ID
		runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: reg, ComputeOnly: reg.ComputeOnly, Lease: time.Hour, CancelCheck: time.Hour, StartDelay: time.Hour})
		if err := runner.Run(ctx, next); err != nil {
			t.Fatal(err)
		}
		if cancelled.Steps[0].StartedAt == nil {
			t.Fatal("the cancel recorded the first step never started")
		}
		checkRiddenCancel(t, rs, jobs, run.ID, *cancelled)
	})

	// A compute-only step whose start was recorded (it ran past
	// StartDelay, or a step rode after it) and whose result a crash lost
	// runs again on the next attempt, even where no tool is declared
	// idempotent: it only computes.
	t.Run("a_lost_result_is_made_again", func(t *testing.T) {
		t.Parallel()
		qreg, err := tools.NewRegistry(quickTool("pure", true))
		if err != nil {
			t.Fatal(err)
		}
		rs := &eventLog{Runs: store.NewRuns(db.DB, db.Data())}
		w := three
		w.Steps = []workflow.Step{{ID: "p0", ToolID: "pure", Inputs: map[string]any{}}, {ID: "p1", ToolID: "pure", Inputs: map[string]any{}}}
		ctx := context.Background()
		run, next := crashedOnFirstStep(t, rs, w, chatID, userID)
		runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: qreg, ComputeOnly: qreg.ComputeOnly, Lease: time.Hour, CancelCheck: time.Hour})
		if err := runner.Run(ctx, next); err != nil {
			t.Fatal(err)
		}
		got, err := rs.Run(ctx, run.ID)
		if err != nil || got.Status != workflow.RunCompleted || got.Steps[0].Status != workflow.StepCompleted || got.Attempt != 2 {
			t.Fatalf("run read back %s %q, attempt %d, steps %+v, %v", got.Status, got.Error, got.Attempt, got.Steps, err)
		}
	})
}

// startRun stores a run of w through rs and starts runner's first
// attempt of it on a goroutine; done gets its error.
func startRun(t *testing.T, rs *eventLog, runner *runs.Runner, w workflow.Workflow, chatID, userID string) (workflow.Run, <-chan error) {
	t.Helper()
	run := runs.NewRun(w, chatID, userID, time.Now())
	ctx := context.Background()
	if err := rs.CreateRun(ctx, run, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx, workflow.RunRef{RunID: run.ID, Attempt: 1}) }()
	return run, done
}

// jsonish prints checkpoints' event types as [[a b] [c]].
func jsonish(cps [][]string) string {
	parts := make([]string, len(cps))
	for i, c := range cps {
		parts[i] = "[" + strings.Join(c, " ") + "]"
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// crashedOnFirstStep stores a run of w whose first step an attempt that
// died left running, and has the sweeper's resume take it over: next is
// the attempt to run.
func crashedOnFirstStep(t *testing.T, rs *eventLog, w workflow.Workflow, chatID, userID string) (run workflow.Run, next workflow.RunRef) {
	t.Helper()
	ctx := context.Background()
	run = runs.NewRun(w, chatID, userID, time.Now())
	now := time.Now().UTC()
	run.Status, run.Steps[0].Status, run.Steps[0].StartedAt, run.Steps[0].Input = workflow.RunRunning, workflow.StepRunning, &now, map[string]any{}
	if err := rs.CreateRun(ctx, run, job.Lease{Until: now.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	inv := &recordInvoker{}
	if err := runs.ResumeExpired(runs.ResumeOptions{Store: rs, Invoker: inv})(ctx, job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}}); err != nil || len(inv.refs) != 1 {
		t.Fatalf("resume: %v, %v", inv.refs, err)
	}
	return run, inv.refs[0]
}

// cancellerTools returns a registry of a compute-only tool "pure" and a
// "canceller" whose call cancels the run whose id the test sends on ids;
// cancelled is the run as that cancel recorded it, to be read once the
// runner is done.
func cancellerTools(t *testing.T, rs *eventLog) (reg *tools.Registry, ids chan<- string, cancelled *workflow.Run) {
	t.Helper()
	idc := make(chan string, 1)
	cancelled = new(workflow.Run)
	canceller := quickTool("canceller", true)
	canceller.Run = func(ctx context.Context, _ map[string]any) (map[string]any, error) {
		*cancelled = cancelRun(t, rs, <-idc)
		return map[string]any{"ok": true}, nil
	}
	reg, err := tools.NewRegistry(quickTool("pure", true), canceller)
	if err != nil {
		t.Fatal(err)
	}
	return reg, idc, cancelled
}

// cancelRun cancels run runID as it is stored and returns the run as the
// cancel recorded it.
func cancelRun(t *testing.T, rs *eventLog, runID string) workflow.Run {
	t.Helper()
	ctx := context.Background()
	stored, err := rs.Run(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rs.CancelRun(ctx, stored, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkRiddenCancel checks run runID, whose steps all rode when it was
// cancelled: it reads back as the cancel recorded it (cancelled, every
// step cancelled with the start the store held, the cancel's completion
// time), and its log holds no step event.
func checkRiddenCancel(t *testing.T, rs *eventLog, jobs *store.Jobs, runID string, cancelled workflow.Run) {
	t.Helper()
	ctx := context.Background()
	got, err := rs.Run(ctx, runID)
	if err != nil || got.Status != workflow.RunCancelled {
		t.Fatalf("run read back %s, %v", got.Status, err)
	}
	if got.CompletedAt == nil || !got.CompletedAt.Equal(*cancelled.CompletedAt) {
		t.Errorf("run read back completed at %v; the cancel recorded %v", got.CompletedAt, cancelled.CompletedAt)
	}
	for i, s := range got.Steps {
		c := cancelled.Steps[i]
		if s.Status != workflow.StepCancelled || s.Status != c.Status || (s.StartedAt == nil) != (c.StartedAt == nil) || (s.StartedAt != nil && !s.StartedAt.Equal(*c.StartedAt)) {
			t.Errorf("step %s read back %s started %v; the cancel recorded it %s started %v", s.ID, s.Status, s.StartedAt, c.Status, c.StartedAt)
		}
	}
	recs, _, err := jobs.Read(ctx, job.Ref{Kind: workflow.RunKind, Collection: runID, ID: runID}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	for _, rec := range recs {
		var ev workflow.RunEvent
		if err := json.Unmarshal(rec.Data, &ev); err != nil {
			t.Fatal(err)
		}
		logged = append(logged, ev.Type+"("+ev.StepID+")")
	}
	if want := "run_started() run_cancelled()"; strings.Join(logged, " ") != want {
		t.Errorf("logged %s, want %s", strings.Join(logged, " "), want)
	}
}
