package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// sleepTool sleeps for ms milliseconds or until its context is done.
func sleepTool() *tools.Tool {
	return &tools.Tool{
		ID: "sleep", Name: "Sleep", Description: "Sleeps for ms milliseconds.", Category: "util",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"required":["ms"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"slept":{"type":"integer"}}}`),
		Timeout:      time.Minute,
		Run: func(ctx context.Context, in map[string]any) (map[string]any, error) {
			var ms float64
			switch v := in["ms"].(type) {
			case float64:
				ms = v
			case json.Number:
				ms, _ = v.Float64()
			case int64:
				ms = float64(v)
			case int:
				ms = float64(v)
			}
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return map[string]any{"slept": ms}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	}
}

func newRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	reg, err := tools.NewRegistry(append(tools.Builtin(tools.Config{}), sleepTool(), countTool("count"), countTool("count_idem"), whoamiTool(), sizedTool())...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// clock is an injected clock that advances one second per reading.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

type engineFixture struct {
	runs   *store.Runs
	jobs   *store.Jobs
	chats  *store.Chats
	chatID string
	userID string
	clock  *clock
}

func newEngineFixture(t *testing.T) *engineFixture {
	t.Helper()
	db := storetest.New(t)
	f := &engineFixture{runs: store.NewRuns(db.DB, db.Data()), jobs: store.NewJobs(db.DB, db.Data()), chats: store.NewChats(db.DB, db.Data()),
		chatID: uuid.NewString(), userID: uuid.NewString(), clock: newClock()}
	now := time.Now().UTC()
	if err := f.chats.CreateChat(context.Background(), chat.Chat{ID: f.chatID, UserID: f.userID, Title: "c", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	return f
}

// execute stores a run of w and runs it to its end through a Runner with
// o (the engine's options), as RunnerFunction would, and returns it as
// stored and the types of its logged events.
func (f *engineFixture) execute(t *testing.T, o runs.RunnerOptions, w workflow.Workflow) (workflow.Run, []workflow.RunEvent) {
	t.Helper()
	if o.Now == nil {
		o.Now = f.clock.Now
	}
	o.Store, o.Jobs, o.Tools = f.runs, f.jobs, newRegistry(t)
	run := runs.NewRun(w, f.chatID, f.userID, o.Now())
	if err := f.runs.CreateRun(context.Background(), run, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := runs.NewRunner(o).Run(context.Background(), workflow.RunRef{RunID: run.ID, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := f.runs.Run(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	recs, h, err := f.jobs.Read(context.Background(), job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}, 0)
	if err != nil || h.Active {
		t.Fatalf("the run's log: active %v, %v", h.Active, err)
	}
	var evs []workflow.RunEvent
	for _, r := range recs {
		var e workflow.RunEvent
		if err := json.Unmarshal(r.Data, &e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	return got, evs
}

func eventTypes(evs []workflow.RunEvent) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return strings.Join(s, ",")
}

func wf(steps ...workflow.Step) workflow.Workflow {
	return workflow.Workflow{ID: uuid.NewString(), Name: "wf", Steps: steps}
}

func step(id, tool string, inputs map[string]any) workflow.Step {
	return workflow.Step{ID: id, ToolID: tool, Inputs: inputs}
}

func statuses(r workflow.Run) string {
	var s []string
	for _, st := range r.Steps {
		s = append(s, st.Status)
	}
	return strings.Join(s, ",")
}

func TestEngineTypePreservingTemplates(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	w := wf(
		step("pick", "json_query", map[string]any{"input": map[string]any{"price": 21.5}, "query": ".price"}),
		step("calc", "math_evaluate", map[string]any{"expression": "p * 2", "variables": map[string]any{"p": "{{pick.result}}"}}),
		step("say", "text_template", map[string]any{"template": "Total {{.t}} ({{ calc.value }})", "values": map[string]any{"t": "{{calc.value}}"}}),
	)
	run, events := f.execute(t, runs.RunnerOptions{}, w)
	if run.Status != workflow.RunCompleted || statuses(run) != "completed,completed,completed" {
		t.Fatalf("run = %s (%s) %s", run.Status, statuses(run), run.Error)
	}
	if v := run.Steps[1].Input["variables"].(map[string]any)["p"]; v != 21.5 {
		t.Fatalf("calc variables p = %#v, want the number 21.5", v)
	}
	if got := run.Steps[1].Output["value"]; got != float64(43) {
		t.Fatalf("calc value = %#v", got)
	}
	if got := run.Steps[2].Output["text"]; got != "Total 43 (43)" {
		t.Fatalf("text = %#v", got)
	}
	want := "run_started,step_started,step_completed,step_started,step_completed,step_started,step_completed,run_completed"
	if eventTypes(events) != want || events[1].ToolID != "json_query" {
		t.Fatalf("events = %s, want %s", eventTypes(events), want)
	}
	if events[3].Input["variables"].(map[string]any)["p"] != 21.5 {
		t.Fatalf("start event input = %v", events[3].Input)
	}
	if run.CompletedAt == nil {
		t.Fatalf("stored = %+v", run)
	}
	for i, st := range run.Steps {
		if st.StartedAt == nil || st.CompletedAt == nil || st.CompletedAt.Before(*st.StartedAt) {
			t.Fatalf("step %d times = %v %v", i, st.StartedAt, st.CompletedAt)
		}
		if i > 0 && !st.StartedAt.After(*run.Steps[i-1].CompletedAt) && !st.StartedAt.Equal(*run.Steps[i-1].CompletedAt) {
			t.Fatalf("step %d started before step %d completed", i, i-1)
		}
	}
	if run.WorkflowID != w.ID || run.UserID != f.userID {
		t.Fatalf("stored = %+v", run)
	}
}

func TestEngineFailingStepSkipsRest(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	w := wf(
		step("a", "hash", map[string]any{"text": "x", "algorithm": "md5"}),
		step("b", "json_query", map[string]any{"input": map[string]any{}, "query": `error("boom")`}),
		step("c", "hash", map[string]any{"text": "{{b.result}}", "algorithm": "md5"}),
	)
	run, events := f.execute(t, runs.RunnerOptions{}, w)
	if run.Status != workflow.RunFailed || statuses(run) != "completed,failed,skipped" || run.Steps[2].StartedAt != nil {
		t.Fatalf("run = %s (%s)", run.Status, statuses(run))
	}
	if !strings.Contains(run.Steps[1].Error, "boom") || !strings.Contains(run.Error, "step b") {
		t.Fatalf("errors = %q / %q", run.Steps[1].Error, run.Error)
	}
	if n := len(events); n < 2 || events[n-2].StepID != "b" || events[n-2].Type != workflow.EventStepFailed || events[n-1].Type != workflow.EventRunFailed {
		t.Fatalf("events = %s", eventTypes(events))
	}
}

func TestEngineTemplateErrorFailsStep(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	w := wf(
		step("a", "hash", map[string]any{"text": "{{nope.digest}}", "algorithm": "md5"}),
		step("b", "hash", map[string]any{"text": "x", "algorithm": "md5"}),
	)
	run, events := f.execute(t, runs.RunnerOptions{}, w)
	if run.Status != workflow.RunFailed || statuses(run) != "failed,skipped" || !strings.Contains(run.Steps[0].Error, "nope") {
		t.Fatalf("run = %+v", run)
	}
	// The step failed before its tool ran: no step_started.
	if eventTypes(events) != "run_started,step_failed,run_failed" {
		t.Fatalf("events = %s", eventTypes(events))
	}
}

// TestEngineStepTimeout: the step's own timeout fails it and says so.
func TestEngineStepTimeout(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	w := wf(step("slow", "sleep", map[string]any{"ms": 60000}), step("next", "sleep", map[string]any{"ms": 0}))
	run, _ := f.execute(t, runs.RunnerOptions{StepTimeout: 50 * time.Millisecond}, w)
	if run.Status != workflow.RunFailed || statuses(run) != "failed,skipped" || !strings.Contains(run.Steps[0].Error, "timed out after 50ms") {
		t.Fatalf("run = %+v", run)
	}
}

// TestEngineStepTimeoutSeconds: a step's timeoutSeconds bounds its call
// in place of the engine's step timeout, above it as below it; a step
// stopped by it fails with the step timeout's message, not the run's.
func TestEngineStepTimeoutSeconds(t *testing.T) {
	t.Parallel()
	one := 1
	for _, tc := range []struct {
		name        string
		engine      time.Duration
		ms          int
		wantStatus  string
		wantInError string
	}{
		{"longer_than_the_engine's", 50 * time.Millisecond, 300, workflow.RunCompleted, ""},
		{"shorter_than_the_engine's", time.Minute, 60000, workflow.RunFailed, "timed out after 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newEngineFixture(t)
			s := step("slow", "sleep", map[string]any{"ms": tc.ms})
			s.TimeoutSeconds = &one
			run, _ := f.execute(t, runs.RunnerOptions{StepTimeout: tc.engine, RunTimeout: time.Hour, Now: time.Now}, wf(s))
			if run.Status != tc.wantStatus || !strings.Contains(run.Steps[0].Error, tc.wantInError) || strings.Contains(run.Error, "time limit") {
				t.Fatalf("run %s %q, step %s %q; want %s, the step's error holding %q", run.Status, run.Error, run.Steps[0].Status, run.Steps[0].Error, tc.wantStatus, tc.wantInError)
			}
		})
	}
}

func TestEngineCancelledThroughStore(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	var cancelled workflow.Run
	var runID string
	w := wf(
		step("a", "hash", map[string]any{"text": "x", "algorithm": "md5"}),
		step("b", "hash", map[string]any{"text": "{{a.digest}}", "algorithm": "md5"}),
		step("c", "hash", map[string]any{"text": "y", "algorithm": "md5"}),
	)
	o := runs.RunnerOptions{BeforeStep: func(i int) {
		if i != 1 {
			return
		}
		// Another request cancels the run between steps 0 and 1.
		list, _, err := f.runs.ChatRunsPage(context.Background(), f.chatID, 10, "")
		if err != nil || len(list) != 1 {
			t.Errorf("runs = %v, %v", list, err)
			return
		}
		runID = list[0].ID
		if cancelled, err = f.runs.CancelRun(context.Background(), list[0], time.Now()); err != nil {
			t.Error(err)
		}
	}}
	run, events := f.execute(t, o, w)
	// Step a's result is recorded with step b's start, in one write,
	// which the cancel came before: the cancel found a running (and
	// cancelled it), and the write, conditioned on the run running,
	// failed; the runner then recorded a's result under the cancel.
	if cancelled.Status != workflow.RunCancelled || statuses(cancelled) != "cancelled,cancelled,cancelled" || runID != run.ID {
		t.Fatalf("cancel returned %+v", cancelled)
	}
	if run.Status != workflow.RunCancelled || statuses(run) != "completed,cancelled,cancelled" || run.CompletedAt == nil || run.Steps[0].Output["digest"] == nil {
		t.Fatalf("stored = %+v", run)
	}
	if got := eventTypes(events); got != "run_started,step_started,step_completed,run_cancelled" {
		t.Fatalf("events = %s", got)
	}
	for _, e := range events {
		if e.Type == workflow.EventStepStarted && e.StepID != "a" {
			t.Fatalf("step %s started after the cancel", e.StepID)
		}
	}
}

func TestEngineEmptyWorkflow(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	run, events := f.execute(t, runs.RunnerOptions{}, wf())
	if run.Status != workflow.RunCompleted || len(run.Steps) != 0 || eventTypes(events) != "run_started,run_completed" {
		t.Fatalf("stored = %+v, events %s", run, eventTypes(events))
	}
}

// TestEngineRunTimeout: once a run has used its time, no further step
// starts and the run fails; a step's own timeout never reaches past it.
func TestEngineRunTimeout(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	var now time.Time
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	set(start)
	o := runs.RunnerOptions{RunTimeout: time.Minute, Now: clock, BeforeStep: func(i int) {
		if i == 1 {
			set(start.Add(2 * time.Minute)) // the first step took the whole budget
		}
	}}
	w := wf(step("a", "sleep", map[string]any{"ms": 0}), step("b", "sleep", map[string]any{"ms": 0}), step("c", "sleep", map[string]any{"ms": 0}))
	run, _ := f.execute(t, o, w)
	if run.Status != workflow.RunFailed || statuses(run) != "completed,skipped,skipped" || !strings.Contains(run.Error, "time limit of 1m0s") {
		t.Fatalf("run = %s %s %q", run.Status, statuses(run), run.Error)
	}

	// The remaining budget caps the step's own timeout, and a step stopped
	// by it reports the run's limit, not a step timeout.
	f2 := newEngineFixture(t)
	run2, _ := f2.execute(t, runs.RunnerOptions{RunTimeout: 2 * time.Second, StepTimeout: time.Minute, Now: time.Now}, wf(step("slow", "sleep", map[string]any{"ms": 60000})))
	if run2.Status != workflow.RunFailed || run2.Error != "the run exceeded its time limit of 2s" || run2.Steps[0].Error != run2.Error {
		t.Fatalf("run = %+v", run2)
	}
}

// TestEngineRunTimeoutReusedHumanStep: a retry's reused human step
// waited in the run it retries, before this run started: its wait gives
// this run no time beyond its limit.
func TestEngineRunTimeoutReusedHumanStep(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	var now time.Time
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	set(start)
	o := runs.RunnerOptions{RunTimeout: time.Minute, Now: clock, Store: f.runs, Jobs: f.jobs, Tools: newRegistry(t), BeforeStep: func(i int) {
		if i == 2 {
			set(start.Add(2 * time.Minute)) // step b took the whole budget
		}
	}}
	w := wf(step("ask", workflow.AskHumanToolID, map[string]any{"message": "ok?"}), step("b", "sleep", map[string]any{"ms": 0}), step("c", "sleep", map[string]any{"ms": 0}))
	run := runs.NewRun(w, f.chatID, f.userID, start)
	asked, answered := start.Add(-48*time.Hour), start.Add(-time.Hour)
	run.Steps[0] = workflow.RunStep{ID: "ask", ToolID: workflow.AskHumanToolID, Status: workflow.StepCompleted, StartedAt: &asked, CompletedAt: &answered,
		Output: map[string]any{"ok": true}, Reused: true}
	if err := f.runs.CreateRun(context.Background(), run, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := runs.NewRunner(o).Run(context.Background(), workflow.RunRef{RunID: run.ID, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := f.runs.Run(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.RunFailed || statuses(got) != "completed,completed,skipped" || !strings.Contains(got.Error, "time limit of 1m0s") {
		t.Fatalf("run = %s %s %q", got.Status, statuses(got), got.Error)
	}
}
