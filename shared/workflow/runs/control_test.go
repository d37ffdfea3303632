package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/condition"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// Step control in the engine: `if`, forEach, continueOnError and human
// steps, on the real store over the embedded engine.

// executeInput is execute with a run input.
func (f *engineFixture) executeInput(t *testing.T, o runs.RunnerOptions, w workflow.Workflow, input map[string]any) (workflow.Run, []workflow.RunEvent) {
	t.Helper()
	if o.Now == nil {
		o.Now = f.clock.Now
	}
	if o.Condition == nil {
		o.Condition = condition.Eval
	}
	o.Store, o.Jobs, o.Tools = f.runs, f.jobs, newRegistry(t)
	run := runs.NewRun(w, f.chatID, f.userID, o.Now())
	run.Input = input
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
	recs, _, err := f.jobs.Read(context.Background(), job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var evs []workflow.RunEvent
	for _, r := range recs {
		var e workflow.RunEvent
		_ = json.Unmarshal(r.Data, &e)
		evs = append(evs, e)
	}
	return got, evs
}

func TestEngineStepControl(t *testing.T) {
	t.Parallel()
	jq := func(id string, input any, query string) workflow.Step {
		return step(id, "json_query", map[string]any{"input": input, "query": query})
	}
	each := func(s workflow.Step, over string, conc int, cont bool) workflow.Step {
		s.ForEach, s.Concurrency, s.ContinueOnError = over, &conc, cont
		return s
	}
	cond := func(s workflow.Step, src string) workflow.Step { s.If = src; return s }
	cont := func(s workflow.Step) workflow.Step { s.ContinueOnError = true; return s }
	for _, c := range []struct {
		name     string
		steps    []workflow.Step
		input    map[string]any
		status   string
		statuses string
		check    func(t *testing.T, r workflow.Run)
	}{
		{"if true and false", []workflow.Step{jq("a", "{{input.n}}", ". * 2"), cond(jq("b", "{{a.result}}", ". + 1"), "a.result > 5"), cond(jq("c", 1, "."), "a.result > 100")},
			map[string]any{"n": 4.0}, "completed", "completed,completed,skipped",
			func(t *testing.T, r workflow.Run) {
				if r.Steps[1].Output["result"] != 9.0 || r.Steps[2].Output != nil {
					t.Errorf("outputs %v %v", r.Steps[1].Output, r.Steps[2].Output)
				}
			}},
		{"a skipped step reads as empty to conditions, and fails a template", []workflow.Step{cond(jq("a", 1, "."), "false"), cond(jq("b", 2, "."), "a.result == nil"), jq("c", "{{a.result}}", ".")},
			nil, "failed", "skipped,completed,failed",
			func(t *testing.T, r workflow.Run) {
				if !strings.Contains(r.Steps[2].Error, `no output of step "a"`) {
					t.Errorf("error %q", r.Steps[2].Error)
				}
			}},
		{"a condition that fails fails its step", []workflow.Step{cond(jq("a", 1, "."), "input.x > \"a\"")},
			map[string]any{"x": 1.0}, "failed", "failed", nil},
		{"forEach keeps the array's order", []workflow.Step{each(jq("sq", "{{item}}", ". * ."), "{{input.xs}}", 3, false), jq("sum", "{{sq.results}}", "map(.result) | add")},
			map[string]any{"xs": []any{1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}}, "completed", "completed,completed",
			func(t *testing.T, r workflow.Run) {
				b, _ := json.Marshal(r.Steps[0].Output)
				if string(b) != `{"results":[{"result":1},{"result":4},{"result":9},{"result":16},{"result":25},{"result":36},{"result":49}]}` ||
					r.Steps[1].Output["result"] != 140.0 || r.Steps[0].Elements != nil {
					t.Errorf("outputs %s %v (elements %v)", b, r.Steps[1].Output, r.Steps[0].Elements)
				}
			}},
		{"forEach over an empty array", []workflow.Step{each(jq("sq", "{{item}}", "."), "{{input.xs}}", 2, false)},
			map[string]any{"xs": []any{}}, "completed", "completed",
			func(t *testing.T, r workflow.Run) {
				if b, _ := json.Marshal(r.Steps[0].Output); string(b) != `{"results":[]}` {
					t.Errorf("output %s", b)
				}
			}},
		{"forEach reads fields of object elements", []workflow.Step{each(jq("n", "{{item.name}}", "ascii_upcase"), "{{input.people}}", 1, false)},
			map[string]any{"people": []any{map[string]any{"name": "ada"}, map[string]any{"name": "alan"}}}, "completed", "completed",
			func(t *testing.T, r workflow.Run) {
				if b, _ := json.Marshal(r.Steps[0].Output); string(b) != `{"results":[{"result":"ADA"},{"result":"ALAN"}]}` {
					t.Errorf("output %s", b)
				}
			}},
		{"a failing element fails the step", []workflow.Step{each(jq("p", "{{item}}", ". + 1"), "{{input.xs}}", 1, false), jq("after", 1, ".")},
			map[string]any{"xs": []any{1.0, "x", 3.0}}, "failed", "failed,skipped",
			func(t *testing.T, r workflow.Run) {
				if !strings.HasPrefix(r.Steps[0].Error, "element 1: ") || !strings.Contains(r.Error, "step p failed") {
					t.Errorf("errors %q %q", r.Steps[0].Error, r.Error)
				}
			}},
		{"continueOnError records the element's error", []workflow.Step{each(jq("p", "{{item}}", ". + 1"), "{{input.xs}}", 2, true)},
			map[string]any{"xs": []any{1.0, "x", 3.0}}, "completed", "completed",
			func(t *testing.T, r workflow.Run) {
				res := r.Steps[0].Output["results"].([]any)
				if len(res) != 3 || res[1].(map[string]any)["error"] == nil || res[2].(map[string]any)["result"] != 4.0 {
					t.Errorf("results %v", res)
				}
			}},
		{"forEach over what is not an array", []workflow.Step{each(jq("p", "{{item}}", "."), "{{input.xs}}", 2, false)},
			map[string]any{"xs": "abc"}, "failed", "failed",
			func(t *testing.T, r workflow.Run) {
				if !strings.Contains(r.Steps[0].Error, "not an array") {
					t.Errorf("error %q", r.Steps[0].Error)
				}
			}},
		{"forEach over too many elements", []workflow.Step{each(jq("p", "{{item}}", "."), "{{input.xs}}", 2, false)},
			map[string]any{"xs": make([]any, runs.MaxElements+1)}, "failed", "failed",
			func(t *testing.T, r workflow.Run) {
				if !strings.Contains(r.Steps[0].Error, fmt.Sprint(runs.MaxElements)) {
					t.Errorf("error %q", r.Steps[0].Error)
				}
			}},
		{"continueOnError on a plain step", []workflow.Step{cont(jq("bad", "x", ". + 1")), jq("next", "{{bad.error}}", "length > 0")},
			nil, "completed", "failed,completed",
			func(t *testing.T, r workflow.Run) {
				if r.Steps[0].Output["error"] == nil || r.Steps[1].Output["result"] != true {
					t.Errorf("outputs %v %v", r.Steps[0].Output, r.Steps[1].Output)
				}
			}},
		{"a human step whose request is invalid fails", []workflow.Step{step("ask", "ask_human", map[string]any{"message": "", "onTimeout": "maybe"})},
			nil, "failed", "failed",
			func(t *testing.T, r workflow.Run) {
				if !strings.Contains(r.Steps[0].Error, "message") || !strings.Contains(r.Steps[0].Error, "onTimeout") {
					t.Errorf("error %q", r.Steps[0].Error)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newEngineFixture(t)
			run, _ := f.executeInput(t, runs.RunnerOptions{}, wf(c.steps...), c.input)
			if run.Status != c.status || statuses(run) != c.statuses {
				t.Fatalf("run %s (%s) %q, want %s (%s)", run.Status, statuses(run), run.Error, c.status, c.statuses)
			}
			if c.check != nil {
				c.check(t, run)
			}
		})
	}
}

// TestEngineForEachResume: a run whose forEach step was caught running by
// a resume runs only the elements without a recorded output (the tool is
// idempotent); with a tool that is not, the step fails INTERRUPTED.
func TestEngineForEachResume(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tool   string
		status string
	}{{"count_idem", workflow.RunCompleted}, {"count", workflow.RunFailed}} {
		t.Run(c.tool, func(t *testing.T) {
			t.Parallel()
			f := newEngineFixture(t)
			conc := 2
			s := workflow.Step{ID: "each", ToolID: c.tool, Inputs: map[string]any{"key": "{{item}}"}, ForEach: "{{input.keys}}", Concurrency: &conc}
			w := wf(s)
			run := runs.NewRun(w, f.chatID, f.userID, time.Now())
			run.Input = map[string]any{"keys": []any{"e0", "e1", "e2", "e3"}}
			// Attempt 1 recorded elements 0 and 2, then its process died.
			run.Status, run.Steps[0].Status = workflow.RunRunning, workflow.StepRunning
			if err := f.runs.CreateRun(context.Background(), run, job.Lease{Until: time.Now().Add(-time.Second)}); err != nil {
				t.Fatal(err)
			}
			for _, j := range []int{0, 2} {
				if err := f.runs.SaveElement(context.Background(), run.ID, "each", j, []byte(fmt.Sprintf(`{"n":1,"key":"e%d"}`, j))); err != nil {
					t.Fatal(err)
				}
			}
			inv := &recordInvoker{}
			resume := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Invoker: inv})
			if err := resume(context.Background(), job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}}); err != nil {
				t.Fatal(err)
			}
			var counted atomic.Int32
			reg := newRegistry(t)
			tools := toolFunc(func(ctx context.Context, id string, in map[string]any) (map[string]any, error) {
				counted.Add(1)
				out, err := reg.Run(ctx, id, in)
				if out != nil {
					out["key"] = in["key"]
				}
				return out, err
			})
			r := runs.NewRunner(runs.RunnerOptions{Store: f.runs, Jobs: f.jobs, Tools: tools, Condition: condition.Eval,
				Idempotent: func(_ context.Context, id string) (bool, error) { return id == "count_idem", nil }})
			if err := r.Run(context.Background(), workflow.RunRef{RunID: run.ID, Attempt: 2}); err != nil {
				t.Fatal(err)
			}
			got, _ := f.runs.Run(context.Background(), run.ID)
			if got.Status != c.status {
				t.Fatalf("run %s %q", got.Status, got.Error)
			}
			if c.status == workflow.RunFailed {
				if !strings.Contains(got.Steps[0].Error, workflow.CodeInterrupted) || counted.Load() != 0 {
					t.Errorf("step %+v, %d calls", got.Steps[0], counted.Load())
				}
				return
			}
			if counted.Load() != 2 {
				t.Errorf("%d calls on the resume, want 2 (elements 1 and 3)", counted.Load())
			}
			res := got.Steps[0].Output["results"].([]any)
			for j, want := range []string{"e0", "e1", "e2", "e3"} {
				if res[j].(map[string]any)["key"] != want {
					t.Errorf("results %v", res)
				}
			}
		})
	}
}

type toolFunc func(ctx context.Context, id string, in map[string]any) (map[string]any, error)

func (f toolFunc) Run(ctx context.Context, id string, in map[string]any) (map[string]any, error) {
	return f(ctx, id, in)
}

type recordInvoker struct{ refs []workflow.RunRef }

func (r *recordInvoker) Invoke(_ context.Context, ref workflow.RunRef) error {
	r.refs = append(r.refs, ref)
	return nil
}

// TestEngineCancelStopsARunningStep: a cancel while a long step runs
// stops it before the step would have ended (the runner's heartbeat reads
// the cancel from the log's head), and the run's log ends cancelled.
func TestEngineCancelStopsARunningStep(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	w := wf(step("slow", "sleep", map[string]any{"ms": 60000}), step("after", "sleep", map[string]any{"ms": 0}))
	run := runs.NewRun(w, f.chatID, f.userID, time.Now())
	if err := f.runs.CreateRun(context.Background(), run, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	r := runs.NewRunner(runs.RunnerOptions{Store: f.runs, Jobs: f.jobs, Tools: newRegistry(t), StepTimeout: 2 * time.Minute})
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- r.Run(context.Background(), workflow.RunRef{RunID: run.ID, Attempt: 1}) }()
	for {
		got, err := f.runs.Run(context.Background(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == workflow.RunRunning {
			if _, err := f.runs.CancelRun(context.Background(), got, time.Now()); err == nil {
				break
			} else if errs.CodeOf(err) != workflow.CodeRunStateChanged {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Minute): // a bound for a stuck runner
		t.Fatal("the runner did not stop the step")
	}
	// A runner that let the step run would take its whole 60 s sleep.
	if took := time.Since(start); took >= time.Minute {
		t.Errorf("the cancel took %s to stop the step: the step ran to its end", took)
	}
	got, _ := f.runs.Run(context.Background(), run.ID)
	_, h, err := f.jobs.Read(context.Background(), job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}, 0)
	if got.Status != workflow.RunCancelled || statuses(got) != "cancelled,cancelled" || err != nil || h.Active {
		t.Fatalf("run %s (%s), log active %v %v", got.Status, statuses(got), h.Active, err)
	}
}

// TestHumanStepLease: a waiting run's lease is its step's deadline (or
// none), so the sweeper leaves it alone until then; a sweep after a
// lease that passed early (a heartbeat renewed it) puts the deadline back.
func TestHumanStepLease(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	now := time.Now().UTC()
	w := wf(step("ask", "ask_human", map[string]any{"message": "ok?", "timeoutSeconds": 3600.0}))
	run, evs := f.executeInput(t, runs.RunnerOptions{Now: func() time.Time { return now }}, w, nil)
	if eventTypes(evs) != "run_started,step_waiting" || evs[1].Input["message"] != "ok?" || evs[1].ExpiresAt == nil {
		t.Fatalf("events %s %+v", eventTypes(evs), evs)
	}
	if run.Status != workflow.RunWaiting || run.Steps[0].ExpiresAt == nil || !run.Steps[0].ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("run %+v", run)
	}
	ref := job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}
	h, err := f.jobs.Head(context.Background(), ref)
	if err != nil || !h.Active || !h.LeaseUntil.Equal(now.Add(time.Hour).Truncate(time.Millisecond)) {
		t.Fatalf("head %+v %v", h, err)
	}
	// A heartbeat's renewal after the step began waiting.
	if err := f.jobs.Append(context.Background(), ref, nil, job.Lease{Until: now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	inv := &recordInvoker{}
	resume := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Invoker: inv, Now: func() time.Time { return now.Add(time.Minute) }})
	if err := resume(context.Background(), job.Expired{Ref: ref}); err != nil {
		t.Fatal(err)
	}
	h, _ = f.jobs.Head(context.Background(), ref)
	got, _ := f.runs.Run(context.Background(), run.ID)
	if got.Status != workflow.RunWaiting || !h.LeaseUntil.Equal(now.Add(time.Hour).Truncate(time.Millisecond)) || len(inv.refs) != 0 {
		t.Fatalf("after an early sweep: %s, lease %s, invokes %v", got.Status, h.LeaseUntil, inv.refs)
	}
}

// TestRespond answers a human step whose inputSchema requires a field:
// an approval must give valid values; a rejection needs none (nil or {}
// recorded as {}), and values it gives are checked all the same. A refused answer
// leaves the run waiting; an accepted one completes the step with
// {approved, values, respondedAt, timedOut: false} and the run goes on,
// the next step reading the answer.
func TestRespond(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t)
	ctx := f.ctx()
	wfID := f.workflow(t,
		workflow.Step{ID: "ask", ToolID: "ask_human", Inputs: map[string]any{"message": "Pay?", "inputSchema": map[string]any{
			"type": "object", "required": []any{"note"},
			"properties": map[string]any{"note": map[string]any{"type": "string"}, "copies": map[string]any{"type": "integer", "default": 1.0}}}}},
		workflow.Step{ID: "after", ToolID: "json_query", Inputs: map[string]any{"input": map[string]any{"ok": "{{ask.approved}}", "values": "{{ask.values}}"}, "query": "[.ok, .values]"}},
	)
	cases := []struct {
		name       string
		answer     runs.Answer
		wantDetail string // a refusal: INVALID_INPUT with this detail
		wantValues string // an answer taken: the step's values as JSON
	}{
		{"approval without values", runs.Answer{Approved: true}, "values.note", ""},
		{"approval with values the schema refuses", runs.Answer{Approved: true, Values: map[string]any{"note": 5.0}}, "values.note", ""},
		{"rejection with values the schema refuses", runs.Answer{Values: map[string]any{"note": 5.0}}, "values.note", ""},
		{"rejection with values lacking a required field", runs.Answer{Values: map[string]any{"copies": 2.0}}, "values.note", ""},
		{"approval", runs.Answer{Approved: true, Values: map[string]any{"note": "invoice 7"}}, "", `{"copies":1,"note":"invoice 7"}`},
		{"rejection without values", runs.Answer{}, "", `{}`},
		{"rejection with empty values, as a form sends them", runs.Answer{Values: map[string]any{}}, "", `{}`},
		{"approval with empty values", runs.Answer{Approved: true, Values: map[string]any{}}, "values.note", ""},
		{"rejection with values", runs.Answer{Values: map[string]any{"note": "too much"}}, "", `{"copies":1,"note":"too much"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run, err := f.svc.Start(ctx, runs.StartRequest{WorkflowID: wfID})
			if err != nil {
				t.Fatal(err)
			}
			f.wait(t, run.ID, func(r workflow.Run) bool { return r.Status == workflow.RunWaiting })
			_, err = f.svc.Respond(ctx, runs.Scope{WorkflowID: wfID}, run.ID, "ask", tc.answer)
			if tc.wantDetail != "" {
				var e *errs.Error
				if !errors.As(err, &e) || e.Kind != errs.Invalid || e.Code != "INVALID_INPUT" ||
					!slices.ContainsFunc(e.Details, func(d errs.FieldError) bool { return d.Field == tc.wantDetail }) {
					t.Fatalf("Respond: %v, want Invalid INVALID_INPUT with a detail for %s", err, tc.wantDetail)
				}
				if r, _ := f.runs.Run(context.Background(), run.ID); r.Status != workflow.RunWaiting || r.Steps[0].Status != workflow.StepWaiting {
					t.Fatalf("after a refused answer: %s, step %s", r.Status, r.Steps[0].Status)
				}
				return
			}
			if err != nil {
				t.Fatalf("Respond: %v", err)
			}
			done := f.wait(t, run.ID, func(r workflow.Run) bool { return !workflow.Active(r.Status) })
			out := done.Steps[0].Output
			values, _ := json.Marshal(out["values"])
			if done.Status != workflow.RunCompleted || done.Steps[0].Status != workflow.StepCompleted || out["approved"] != tc.answer.Approved ||
				out["timedOut"] != false || out["respondedAt"] == nil || string(values) != tc.wantValues {
				t.Fatalf("run %s %q, step output %v; want approved %v, values %s", done.Status, done.Error, out, tc.answer.Approved, tc.wantValues)
			}
			want := fmt.Sprintf("[%v,%s]", tc.answer.Approved, tc.wantValues)
			if got, _ := json.Marshal(done.Steps[1].Output["result"]); string(got) != want {
				t.Errorf("the next step read %s, want %s", got, want)
			}
		})
	}
}

// largeHumanSchema is an inputSchema whose JSON is over runs.SpillBytes:
// a required property note whose values are a long enum, so that the
// step's resolved input is kept spilled.
func largeHumanSchema(t *testing.T) map[string]any {
	t.Helper()
	enum := make([]any, 4000)
	for i := range enum {
		enum[i] = fmt.Sprintf("option-%05d", i)
	}
	schema := map[string]any{"type": "object", "required": []any{"note"},
		"properties": map[string]any{"note": map[string]any{"type": "string", "enum": enum}}}
	if b, _ := json.Marshal(schema); len(b) <= runs.SpillBytes {
		t.Fatalf("schema of %d bytes, want over %d", len(b), runs.SpillBytes)
	}
	return schema
}

// TestLargeHumanRequest: a human step whose request (an inputSchema with
// a long enum) is over runs.SpillBytes is recorded spilled, and is read
// whole where it is enforced: an answer the schema refuses is refused
// (Invalid INVALID_INPUT, the run still waiting), a valid one is taken,
// and a timeout with onTimeout continue completes the step with approved
// false and timedOut true, the run going on.
func TestLargeHumanRequest(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t)
	ctx := f.ctx()
	schema := largeHumanSchema(t)
	start := func(t *testing.T, inputs map[string]any) (string, workflow.Run) {
		t.Helper()
		wfID := f.workflow(t,
			workflow.Step{ID: "ask", ToolID: "ask_human", Inputs: inputs},
			workflow.Step{ID: "after", ToolID: "json_query", Inputs: map[string]any{"input": map[string]any{"ok": "{{ask.approved}}", "timedOut": "{{ask.timedOut}}"}, "query": "[.ok, .timedOut]"}},
		)
		run, err := f.svc.Start(ctx, runs.StartRequest{WorkflowID: wfID})
		if err != nil {
			t.Fatal(err)
		}
		waiting := f.wait(t, run.ID, func(r workflow.Run) bool { return r.Status == workflow.RunWaiting })
		if _, spilled := workflow.SpilledKey(waiting.Steps[0].Input); !spilled {
			t.Fatalf("the step's input is recorded whole (%d keys), want it spilled", len(waiting.Steps[0].Input))
		}
		return wfID, waiting
	}
	t.Run("answers are checked against the whole schema", func(t *testing.T) {
		t.Parallel()
		wfID, run := start(t, map[string]any{"message": "Pick one", "inputSchema": schema})
		for _, bad := range []runs.Answer{
			{Approved: true, Values: map[string]any{}},
			{Approved: true, Values: map[string]any{"note": "not-an-option"}},
		} {
			_, err := f.svc.Respond(ctx, runs.Scope{WorkflowID: wfID}, run.ID, "ask", bad)
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.Invalid || e.Code != "INVALID_INPUT" ||
				!slices.ContainsFunc(e.Details, func(d errs.FieldError) bool { return d.Field == "values.note" }) {
				t.Fatalf("Respond(%v): %v, want Invalid INVALID_INPUT with a detail for values.note", bad.Values, err)
			}
			if r, _ := f.runs.Run(context.Background(), run.ID); r.Status != workflow.RunWaiting || r.Steps[0].Status != workflow.StepWaiting {
				t.Fatalf("after a refused answer: %s, step %s", r.Status, r.Steps[0].Status)
			}
		}
		if _, err := f.svc.Respond(ctx, runs.Scope{WorkflowID: wfID}, run.ID, "ask", runs.Answer{Approved: true, Values: map[string]any{"note": "option-00007"}}); err != nil {
			t.Fatalf("Respond: %v", err)
		}
		done := f.wait(t, run.ID, func(r workflow.Run) bool { return !workflow.Active(r.Status) })
		if got, _ := json.Marshal(done.Steps[1].Output["result"]); done.Status != workflow.RunCompleted || string(got) != "[true,false]" {
			t.Fatalf("run %s %q, the next step read %s, want completed and [true,false]", done.Status, done.Error, got)
		}
		if v, _ := done.Steps[0].Output["values"].(map[string]any); v["note"] != "option-00007" {
			t.Fatalf("step output %v", done.Steps[0].Output)
		}
	})
	t.Run("a request that cannot be read takes no answer and does not wait forever", func(t *testing.T) {
		t.Parallel()
		wfID, run := start(t, map[string]any{"message": "Pick one", "inputSchema": schema, "timeoutSeconds": 60.0, "onTimeout": "continue"})
		key, _ := workflow.SpilledKey(run.Steps[0].Input)
		if err := f.blobs.Delete(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		_, err := f.svc.Respond(ctx, runs.Scope{WorkflowID: wfID}, run.ID, "ask", runs.Answer{Approved: true, Values: map[string]any{"whatever": 1.0}})
		if !errs.Is(err, errs.Internal) {
			t.Fatalf("Respond with the request lost: %v, want Internal", err)
		}
		if r, _ := f.runs.Run(context.Background(), run.ID); r.Status != workflow.RunWaiting || r.Steps[0].Status != workflow.StepWaiting {
			t.Fatalf("after a refused answer: %s, step %s", r.Status, r.Steps[0].Status)
		}
		later := run.Steps[0].ExpiresAt.Add(time.Minute)
		resume := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Values: f.blobs, Invoker: f.inproc, Now: func() time.Time { return later }})
		if err := resume(context.Background(), job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}}); err != nil {
			t.Fatalf("resume: %v", err)
		}
		if r, _ := f.runs.Run(context.Background(), run.ID); r.Status != workflow.RunFailed || !strings.Contains(r.Steps[0].Error, runs.CodeHumanTimeout) {
			t.Fatalf("after its deadline: %s, step %s %q; want failed %s", r.Status, r.Steps[0].Status, r.Steps[0].Error, runs.CodeHumanTimeout)
		}
	})
	t.Run("a timeout follows onTimeout continue", func(t *testing.T) {
		t.Parallel()
		_, run := start(t, map[string]any{"message": "Pick one", "inputSchema": schema, "timeoutSeconds": 60.0, "onTimeout": "continue"})
		later := run.Steps[0].ExpiresAt.Add(time.Minute)
		resume := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Values: f.blobs, Invoker: f.inproc, Now: func() time.Time { return later }})
		if err := resume(context.Background(), job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}}); err != nil {
			t.Fatalf("resume: %v", err)
		}
		done := f.wait(t, run.ID, func(r workflow.Run) bool { return !workflow.Active(r.Status) })
		out := done.Steps[0].Output
		if done.Status != workflow.RunCompleted || done.Steps[0].Status != workflow.StepCompleted || out["approved"] != false || out["timedOut"] != true {
			t.Fatalf("run %s %q, step %s output %v; want completed with approved false, timedOut true", done.Status, done.Error, done.Steps[0].Status, out)
		}
		if got, _ := json.Marshal(done.Steps[1].Output["result"]); string(got) != "[false,true]" {
			t.Fatalf("the next step read %s, want [false,true]", got)
		}
	})
}
