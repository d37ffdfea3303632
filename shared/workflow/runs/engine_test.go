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
	reg, err := tools.NewRegistry(append(tools.Builtin(tools.Config{}), sleepTool(), countTool("count"), countTool("count_idem"), whoamiTool())...)
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
	chats  *store.Chats
	chatID string
	userID string
	clock  *clock
}

func newEngineFixture(t *testing.T) *engineFixture {
	t.Helper()
	db := storetest.New(t)
	f := &engineFixture{runs: store.NewRuns(db.DB, db.Data()), chats: store.NewChats(db.DB, db.Data()),
		chatID: uuid.NewString(), userID: uuid.NewString(), clock: newClock()}
	now := time.Now().UTC()
	if err := f.chats.CreateChat(context.Background(), chat.Chat{ID: f.chatID, UserID: f.userID, Title: "c", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *engineFixture) engine(t *testing.T, o runs.EngineOptions) *runs.Engine {
	if o.Now == nil {
		o.Now = f.clock.Now
	}
	return runs.NewEngine(newRegistry(t), f.runs, o)
}

// stored returns the stored run id.
func (f *engineFixture) stored(t *testing.T, id string) workflow.Run {
	t.Helper()
	_, list, err := f.runs.ChatRuns(context.Background(), f.chatID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("run %s not stored", id)
	return workflow.Run{}
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
	e := f.engine(t, runs.EngineOptions{})
	w := wf(
		step("pick", "json_query", map[string]any{"input": map[string]any{"price": 21.5}, "query": ".price"}),
		step("calc", "math_evaluate", map[string]any{"expression": "p * 2", "variables": map[string]any{"p": "{{pick.result}}"}}),
		step("say", "text_template", map[string]any{"template": "Total {{.t}} ({{ calc.value }})", "values": map[string]any{"t": "{{calc.value}}"}}),
	)
	run := e.NewRun(w, f.chatID, f.userID)
	var events []runs.StepEvent
	if err := e.Execute(context.Background(), w, &run, func(ev runs.StepEvent) { events = append(events, ev) }); err != nil {
		t.Fatal(err)
	}
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
	if len(events) != 6 || events[0].Kind != runs.StepStarted || events[0].ToolID != "json_query" || events[5].Kind != runs.StepFinished {
		t.Fatalf("events = %+v", events)
	}
	if events[2].Input["variables"].(map[string]any)["p"] != 21.5 {
		t.Fatalf("start event input = %v", events[2].Input)
	}
	got := f.stored(t, run.ID)
	if got.Status != workflow.RunCompleted || got.CompletedAt == nil || statuses(got) != "completed,completed,completed" {
		t.Fatalf("stored = %+v", got)
	}
	for i, st := range got.Steps {
		if st.StartedAt == nil || st.CompletedAt == nil || st.CompletedAt.Before(*st.StartedAt) {
			t.Fatalf("step %d times = %v %v", i, st.StartedAt, st.CompletedAt)
		}
		if i > 0 && !st.StartedAt.After(*got.Steps[i-1].CompletedAt) && !st.StartedAt.Equal(*got.Steps[i-1].CompletedAt) {
			t.Fatalf("step %d started before step %d completed", i, i-1)
		}
	}
	if !got.StartedAt.Equal(run.StartedAt) || got.Steps[2].Output["text"] != "Total 43 (43)" || got.WorkflowID != w.ID || got.UserID != f.userID {
		t.Fatalf("stored = %+v", got)
	}
}

func TestEngineFailingStepSkipsRest(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	e := f.engine(t, runs.EngineOptions{})
	w := wf(
		step("a", "hash", map[string]any{"text": "x", "algorithm": "md5"}),
		step("b", "json_query", map[string]any{"input": map[string]any{}, "query": `error("boom")`}),
		step("c", "hash", map[string]any{"text": "{{b.result}}", "algorithm": "md5"}),
	)
	run := e.NewRun(w, f.chatID, f.userID)
	var last runs.StepEvent
	if err := e.Execute(context.Background(), w, &run, func(ev runs.StepEvent) { last = ev }); err != nil {
		t.Fatal(err)
	}
	if run.Status != workflow.RunFailed || statuses(run) != "completed,failed,skipped" {
		t.Fatalf("run = %s (%s)", run.Status, statuses(run))
	}
	if !strings.Contains(run.Steps[1].Error, "boom") || !strings.Contains(run.Error, "step b") {
		t.Fatalf("errors = %q / %q", run.Steps[1].Error, run.Error)
	}
	if last.StepID != "b" || last.Status != workflow.StepFailed || last.Error == "" {
		t.Fatalf("last event = %+v", last)
	}
	got := f.stored(t, run.ID)
	if got.Status != workflow.RunFailed || statuses(got) != "completed,failed,skipped" || got.Steps[2].StartedAt != nil {
		t.Fatalf("stored = %+v", got)
	}
}

func TestEngineTemplateErrorFailsStep(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	e := f.engine(t, runs.EngineOptions{})
	w := wf(
		step("a", "hash", map[string]any{"text": "{{nope.digest}}", "algorithm": "md5"}),
		step("b", "hash", map[string]any{"text": "x", "algorithm": "md5"}),
	)
	run := e.NewRun(w, f.chatID, f.userID)
	var events []runs.StepEvent
	if err := e.Execute(context.Background(), w, &run, func(ev runs.StepEvent) { events = append(events, ev) }); err != nil {
		t.Fatal(err)
	}
	if run.Status != workflow.RunFailed || statuses(run) != "failed,skipped" || !strings.Contains(run.Steps[0].Error, "nope") {
		t.Fatalf("run = %+v", run)
	}
	if len(events) != 1 || events[0].Kind != runs.StepFinished || events[0].Input["text"] != "{{nope.digest}}" {
		t.Fatalf("events = %+v", events)
	}
}

func TestEngineStepTimeout(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	e := f.engine(t, runs.EngineOptions{StepTimeout: 50 * time.Millisecond})
	w := wf(step("slow", "sleep", map[string]any{"ms": 60000}), step("next", "sleep", map[string]any{"ms": 0}))
	run := e.NewRun(w, f.chatID, f.userID)
	if err := e.Execute(context.Background(), w, &run, nil); err != nil {
		t.Fatal(err)
	}
	if run.Status != workflow.RunFailed || statuses(run) != "failed,skipped" || !strings.Contains(run.Steps[0].Error, "timed out") {
		t.Fatalf("run = %+v", run)
	}
	if got := f.stored(t, run.ID); got.Status != workflow.RunFailed {
		t.Fatalf("stored = %+v", got)
	}
}

func TestEngineCancelledThroughStore(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	var e *runs.Engine
	var cancelled workflow.Run
	e = f.engine(t, runs.EngineOptions{BeforeStep: func(i int) {
		if i != 1 {
			return
		}
		// Another request cancels the run between steps 0 and 1.
		_, list, err := f.runs.ChatRuns(context.Background(), f.chatID)
		if err != nil || len(list) != 1 {
			t.Errorf("runs = %v, %v", list, err)
			return
		}
		cancelled, err = f.runs.CancelRun(context.Background(), f.chatID, list[0].ID, f.userID, time.Now())
		if err != nil {
			t.Error(err)
		}
	}})
	w := wf(
		step("a", "hash", map[string]any{"text": "x", "algorithm": "md5"}),
		step("b", "hash", map[string]any{"text": "{{a.digest}}", "algorithm": "md5"}),
		step("c", "hash", map[string]any{"text": "y", "algorithm": "md5"}),
	)
	run := e.NewRun(w, f.chatID, f.userID)
	var started []string
	if err := e.Execute(context.Background(), w, &run, func(ev runs.StepEvent) {
		if ev.Kind == runs.StepStarted {
			started = append(started, ev.StepID)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if cancelled.Status != workflow.RunCancelled || statuses(cancelled) != "completed,cancelled,cancelled" {
		t.Fatalf("cancel returned %+v", cancelled)
	}
	if run.Status != workflow.RunCancelled || statuses(run) != "completed,cancelled,cancelled" || strings.Join(started, ",") != "a" {
		t.Fatalf("run = %s (%s), started %v", run.Status, statuses(run), started)
	}
	got := f.stored(t, run.ID)
	if got.Status != workflow.RunCancelled || statuses(got) != "completed,cancelled,cancelled" || got.CompletedAt == nil || got.Steps[0].Output["digest"] == nil {
		t.Fatalf("stored = %+v", got)
	}
}

func TestEngineContextCancelled(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := f.engine(t, runs.EngineOptions{})
	w := wf(
		step("a", "hash", map[string]any{"text": "x", "algorithm": "md5"}),
		step("b", "sleep", map[string]any{"ms": 60000}),
		step("c", "hash", map[string]any{"text": "y", "algorithm": "md5"}),
	)
	run := e.NewRun(w, f.chatID, f.userID)
	err := e.Execute(ctx, w, &run, func(ev runs.StepEvent) {
		if ev.Kind == runs.StepStarted && ev.StepID == "b" {
			cancel() // the client leaves while step b runs
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != workflow.RunCancelled || statuses(run) != "completed,cancelled,cancelled" {
		t.Fatalf("run = %s (%s)", run.Status, statuses(run))
	}
	got := f.stored(t, run.ID)
	if got.Status != workflow.RunCancelled || statuses(got) != "completed,cancelled,cancelled" || got.CompletedAt == nil {
		t.Fatalf("stored = %+v", got)
	}
}

func TestEngineEmptyWorkflow(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	e := f.engine(t, runs.EngineOptions{})
	w := wf()
	run := e.NewRun(w, f.chatID, f.userID)
	if err := e.Execute(context.Background(), w, &run, nil); err != nil {
		t.Fatal(err)
	}
	if got := f.stored(t, run.ID); got.Status != workflow.RunCompleted || len(got.Steps) != 0 {
		t.Fatalf("stored = %+v", got)
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
	e := f.engine(t, runs.EngineOptions{RunTimeout: time.Minute, Now: clock, BeforeStep: func(i int) {
		if i == 1 {
			set(start.Add(2 * time.Minute)) // the first step took the whole budget
		}
	}})
	w := wf(step("a", "sleep", map[string]any{"ms": 0}), step("b", "sleep", map[string]any{"ms": 0}), step("c", "sleep", map[string]any{"ms": 0}))
	run := e.NewRun(w, f.chatID, f.userID)
	if err := e.Execute(context.Background(), w, &run, nil); err != nil {
		t.Fatal(err)
	}
	if run.Status != workflow.RunFailed || statuses(run) != "completed,skipped,skipped" || !strings.Contains(run.Error, "time limit of 1m0s") {
		t.Fatalf("run = %s %s %q", run.Status, statuses(run), run.Error)
	}

	// The remaining budget caps the step's own timeout, and a step stopped
	// by it reports the run's limit, not a step timeout.
	f2 := newEngineFixture(t)
	e2 := f2.engine(t, runs.EngineOptions{RunTimeout: 80 * time.Millisecond, StepTimeout: time.Minute, Now: time.Now})
	w2 := wf(step("slow", "sleep", map[string]any{"ms": 60000}))
	run2 := e2.NewRun(w2, f2.chatID, f2.userID)
	if err := e2.Execute(context.Background(), w2, &run2, nil); err != nil {
		t.Fatal(err)
	}
	if run2.Status != workflow.RunFailed || run2.Error != "the run exceeded its time limit of 80ms" || run2.Steps[0].Error != run2.Error {
		t.Fatalf("run = %+v", run2)
	}
}
