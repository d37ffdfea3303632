package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/condition"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// sizedEnvelope is the JSON of the sized tool's output without its text.
const sizedEnvelope = len(`{"text":""}`)

// sizedTool outputs {"text": "xxx..."}, exactly n bytes of JSON, and
// counts its executions by its key input (count).
func sizedTool() *tools.Tool {
	return &tools.Tool{
		ID: "sized", Name: "Sized", Description: "Outputs n bytes of JSON.", Category: "util",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":11},"key":{"type":"string"}},"required":["n"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		Timeout:      time.Minute,
		Run: func(ctx context.Context, in map[string]any) (map[string]any, error) {
			if key, ok := in["key"].(string); ok {
				v, _ := counts.LoadOrStore(key, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
			}
			n, _ := in["n"].(float64)
			return map[string]any{"text": strings.Repeat("x", int(n)-sizedEnvelope)}, nil
		},
	}
}

// largestPut is a counted blob store that also keeps the size of the
// largest blob written.
type largestPut struct {
	*countingBlobs
	largest atomic.Int64
}

func (l *largestPut) Put(ctx context.Context, key string, body io.Reader, o blob.PutOptions) (blob.Info, error) {
	for {
		cur := l.largest.Load()
		if o.Size <= cur || l.largest.CompareAndSwap(cur, o.Size) {
			break
		}
	}
	return l.countingBlobs.Put(ctx, key, body, o)
}

// limitsFixture runs workflows through a durable runner over the real
// store on the embedded engine and a counted blob store, with the sized
// tool.
type limitsFixture struct {
	*callsFixture
	blobs *largestPut
}

func newLimitsFixture(t *testing.T) *limitsFixture {
	t.Helper()
	db, _, jobs, _, chatID, userID := benchDurable(t)
	reg := mustSizedRegistry(t)
	blobs := &largestPut{countingBlobs: newCountingBlobs()}
	rs := store.NewRuns(db.DB, db.Data()).WithBlobs(blobs)
	cf := &callsFixture{db: db, runs: rs, blobs: blobs.countingBlobs, chatID: chatID, userID: userID,
		runner: runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: reg, Values: blobs, Condition: condition.Eval,
			Lease: time.Hour, CancelCheck: time.Hour})}
	return &limitsFixture{callsFixture: cf, blobs: blobs}
}

// run executes w with input to its end and returns the run as stored.
func (f *limitsFixture) run(t *testing.T, input map[string]any, steps ...workflow.Step) workflow.Run {
	t.Helper()
	w := workflow.Workflow{ID: uuid.NewString(), UserID: f.userID, Name: "limits", Steps: steps, Version: 1}
	id := f.exec(t, w, input)
	got, err := f.runs.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sized(id string, n any, key string) workflow.Step {
	return workflow.Step{ID: id, ToolID: "sized", Inputs: map[string]any{"n": n, "key": key}}
}

func one(n int) *int { return &n }

// tooLarge checks that step i of run failed TOOL_VALUE_TOO_LARGE with no
// output, the run failed, and no blob larger than the bound was written.
func (f *limitsFixture) tooLarge(t *testing.T, run workflow.Run, i int) {
	t.Helper()
	s := run.Steps[i]
	if run.Status != workflow.RunFailed || s.Status != workflow.StepFailed || !strings.HasPrefix(s.Error, toolclient.CodeValueTooLarge+": ") {
		t.Fatalf("run %s %q, step %s %s %q: want the step failed %s", run.Status, run.Error, s.ID, s.Status, s.Error, toolclient.CodeValueTooLarge)
	}
	if s.Output != nil {
		t.Errorf("the step failed for its size but has an output: %.200v", s.Output)
	}
	if n := f.blobs.largest.Load(); n > runs.MaxValueBytes {
		t.Errorf("a blob of %d bytes was written, more than %d", n, runs.MaxValueBytes)
	}
}

// TestStepOutputBound: a step's output of exactly MaxValueBytes of JSON is
// kept and read whole by the next step; one byte over, and far over, fail
// the step TOOL_VALUE_TOO_LARGE at once and nothing of it is stored.
func TestStepOutputBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		ok   bool
	}{
		{"at the bound", runs.MaxValueBytes, true},
		{"one byte over", runs.MaxValueBytes + 1, false},
		{"far over", 4 * runs.MaxValueBytes, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLimitsFixture(t)
			// The next step reads the output whole: its condition
			// measures it.
			check := workflow.Step{ID: "check", ToolID: "json_query", Inputs: map[string]any{"input": 1, "query": "."},
				If: fmt.Sprintf("len(big.text) == %d", tc.n-sizedEnvelope)}
			run := f.run(t, nil, sized("big", tc.n, ""), check)
			if !tc.ok {
				f.tooLarge(t, run, 0)
				if run.Steps[1].Status != workflow.StepSkipped || f.blobs.puts.Load() != 0 {
					t.Errorf("after the refused output: next step %s, %d blobs written", run.Steps[1].Status, f.blobs.puts.Load())
				}
				return
			}
			if run.Status != workflow.RunCompleted || run.Steps[1].Status != workflow.StepCompleted {
				t.Fatalf("run %s %q, check %s: the output at the bound should be read whole", run.Status, run.Error, run.Steps[1].Status)
			}
			if _, spilled := workflow.SpilledKey(run.Steps[0].Output); !spilled || !run.Steps[0].Truncated {
				t.Errorf("the output at the bound in the record: %.200v", run.Steps[0].Output)
			}
		})
	}
}

// TestForEachResultsBound: a forEach step's results are counted as its
// elements finish: results of exactly MaxValueBytes of JSON complete and
// the next step reads them whole; one byte over fails the step
// TOOL_VALUE_TOO_LARGE; elements of 3 MiB each fail it at the third,
// without running the others, and the results are never stored.
func TestForEachResultsBound(t *testing.T) {
	// {"results":[a,b]}: 14 bytes, a comma and the two elements.
	half := (runs.MaxValueBytes - 15) / 2
	for _, tc := range []struct {
		name  string
		items []any
		ran   int64 // elements run; 0: all
		ok    bool
	}{
		{"at the bound", []any{half, runs.MaxValueBytes - 15 - half}, 0, true},
		{"one byte over", []any{half + 1, runs.MaxValueBytes - 15 - half}, 0, false},
		{"far over", []any{3 << 20, 3 << 20, 3 << 20, 3 << 20, 3 << 20, 3 << 20, 3 << 20, 3 << 20, 3 << 20, 3 << 20}, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLimitsFixture(t)
			key := uuid.NewString()
			each := workflow.Step{ID: "each", ToolID: "sized", ForEach: "{{input.ns}}", Concurrency: one(1),
				Inputs: map[string]any{"n": "{{item}}", "key": key}}
			check := workflow.Step{ID: "check", ToolID: "json_query", Inputs: map[string]any{"input": 1, "query": "."},
				If: fmt.Sprintf("len(each.results) == %d", len(tc.items))}
			run := f.run(t, map[string]any{"ns": tc.items}, each, check)
			if !tc.ok {
				f.tooLarge(t, run, 0)
				if tc.ran > 0 {
					recorded, err := f.runs.CountElements(context.Background(), run.ID, "each")
					if err != nil {
						t.Fatal(err)
					}
					if n := count(key); n != tc.ran || recorded != int(tc.ran-1) {
						t.Errorf("%d elements ran and %d were recorded, want %d and %d: the step stops as its results pass the bound", n, recorded, tc.ran, tc.ran-1)
					}
				}
				return
			}
			if run.Status != workflow.RunCompleted || run.Steps[1].Status != workflow.StepCompleted {
				t.Fatalf("run %s %q, check %s: results at the bound should be read whole", run.Status, run.Error, run.Steps[1].Status)
			}
			if _, spilled := workflow.SpilledKey(run.Steps[0].Output); !spilled || run.Steps[0].Output["size"] != float64(runs.MaxValueBytes) {
				t.Errorf("the results at the bound in the record: %.200v", run.Steps[0].Output)
			}
		})
	}
}

// TestStepReadsBounded: a step's input built from many references to one
// large value is refused TOOL_VALUE_TOO_LARGE before it is built (as text
// or as a value), and so is a step whose condition reads more than
// MaxStepReads of earlier outputs.
func TestStepReadsBounded(t *testing.T) {
	t.Parallel()
	refs := map[string]any{}
	for i := range 10 {
		refs[fmt.Sprintf("k%d", i)] = "{{big.text}}"
	}
	for _, tc := range []struct {
		name  string
		steps []workflow.Step
		in    string // in the step's error
	}{
		{"text", []workflow.Step{sized("big", 1<<20, ""),
			{ID: "echo", ToolID: "json_query", Inputs: map[string]any{"input": strings.Repeat("{{big.text}}", 20), "query": "length"}}}, "templates build"},
		{"value", []workflow.Step{sized("big", 1<<20, ""),
			{ID: "echo", ToolID: "json_query", Inputs: map[string]any{"input": refs, "query": "length"}}}, "the step's input"},
		{"condition", []workflow.Step{sized("a", 6<<20, ""), sized("b", 6<<20, ""), sized("c", 6<<20, ""),
			{ID: "echo", ToolID: "json_query", Inputs: map[string]any{"input": 1, "query": "."}, If: "len(a.text) + len(b.text) + len(c.text) > 0"}}, "reads more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newLimitsFixture(t)
			run := f.run(t, nil, tc.steps...)
			last := len(tc.steps) - 1
			f.tooLarge(t, run, last)
			if !strings.Contains(run.Steps[last].Error, tc.in) {
				t.Errorf("step error %q, want it to say %q", run.Steps[last].Error, tc.in)
			}
		})
	}
}

// TestResumeReadsOnlyWhatTheNextStepReads: after a pause for a person, the
// runner that goes on reads from the blob store only the large output the
// next step names, not every large output of the run.
func TestResumeReadsOnlyWhatTheNextStepReads(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t)
	ctx := f.ctx()
	wfID := f.workflow(t, sized("a", 1<<20, ""), sized("b", 1<<20, ""),
		workflow.Step{ID: "ask", ToolID: "ask_human", Inputs: map[string]any{"message": "go on?"}},
		workflow.Step{ID: "len", ToolID: "json_query", Inputs: map[string]any{"input": "{{b.text}}", "query": "length"}})
	run, err := f.svc.Start(ctx, runs.StartRequest{WorkflowID: wfID})
	if err != nil {
		t.Fatal(err)
	}
	f.wait(t, run.ID, func(r workflow.Run) bool { return r.Status == workflow.RunWaiting })
	f.counted.reset()
	if _, err := f.svc.Respond(ctx, runs.Scope{WorkflowID: wfID}, run.ID, "ask", runs.Answer{Approved: true}); err != nil {
		t.Fatal(err)
	}
	done := f.wait(t, run.ID, func(r workflow.Run) bool { return !workflow.Active(r.Status) })
	if done.Status != workflow.RunCompleted || done.Steps[3].Output["result"] != float64(1<<20-sizedEnvelope) {
		t.Fatalf("after the pause: %s %q %v", done.Status, done.Error, done.Steps[3].Output)
	}
	if n, read := f.counted.gets.Load(), f.counted.read.Load(); n != 1 || read != 1<<20 {
		t.Errorf("the resumed runner read %d blobs (%d bytes), want b's output alone", n, read)
	}
}

// TestForEachResumeCountsRecordedElements: the elements a forEach recorded
// before its runner died count toward its results' bound after a resume.
func TestForEachResumeCountsRecordedElements(t *testing.T) {
	t.Parallel()
	f := newLimitsFixture(t)
	key := uuid.NewString()
	each := workflow.Step{ID: "each", ToolID: "sized", ForEach: "{{input.ns}}", Concurrency: one(1),
		Inputs: map[string]any{"n": "{{item}}", "key": key}}
	w := workflow.Workflow{ID: uuid.NewString(), UserID: f.userID, Name: "limits", Steps: []workflow.Step{each}, Version: 1}
	run := runs.NewRun(w, f.chatID, f.userID, time.Now())
	run.Input = map[string]any{"ns": []any{3 << 20, 3 << 20, 3 << 20, 3 << 20}}
	// As a runner that died leaves it: the step running, two elements
	// recorded (spilled, as the runner records them).
	run.Status, run.Steps[0].Status = workflow.RunRunning, workflow.StepRunning
	if err := f.runs.CreateRun(context.Background(), run, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for j := range 2 {
		b, _ := json.Marshal(map[string]any{"text": strings.Repeat("x", 3<<20-sizedEnvelope)})
		key := fmt.Sprintf("%s%d.json", workflow.RunBlobPrefix(run.ID), j)
		if _, err := blob.PutBytes(context.Background(), f.blobs, key, b, "application/json"); err != nil {
			t.Fatal(err)
		}
		rec, _ := json.Marshal(workflow.Spilled(b, key))
		if err := f.runs.SaveElement(context.Background(), run.ID, "each", j, rec); err != nil {
			t.Fatal(err)
		}
	}
	// sized is not idempotent: the resume must fail the step INTERRUPTED
	// unless the runner re-runs it; declare it idempotent for this run.
	idem := runs.NewRunner(runs.RunnerOptions{Store: f.runs, Jobs: store.NewJobs(f.db.DB, f.db.Data()), Tools: mustSizedRegistry(t), Values: f.blobs,
		Idempotent: func(context.Context, string) (bool, error) { return true, nil }, Lease: time.Hour, CancelCheck: time.Hour})
	if err := idem.Run(context.Background(), workflow.RunRef{RunID: run.ID, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := f.runs.Run(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.tooLarge(t, got, 0)
	if n := count(key); n != 1 {
		t.Errorf("%d elements ran after the resume, want 1: the third passes the bound with the two recorded", n)
	}
}

func mustSizedRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	reg, err := tools.NewRegistry(append(tools.Builtin(tools.Config{}), sizedTool())...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// holdTool counts the calls in flight and keeps the most it saw; each
// call takes 20 ms.
func holdTool(inFlight, most *atomic.Int64) *tools.Tool {
	return &tools.Tool{
		ID: "hold", Name: "Hold", Description: "Holds its input a while.", Category: "util",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"input":{}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		Timeout:      time.Minute,
		Run: func(ctx context.Context, in map[string]any) (map[string]any, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return map[string]any{"n": 1}, nil
		},
	}
}

// TestLargeInputsInFlightPerUser: a forEach of 16 calls at once, each
// reading one 7 MiB value, in two runs of one user at once, has at most
// MaxUserValueBytes of those inputs in flight (4 calls); the others wait
// their turn, outside their step's timeout, and every element completes.
func TestLargeInputsInFlightPerUser(t *testing.T) {
	t.Parallel()
	_, rs, jobs, _, chatID, userID := benchDurable(t)
	var inFlight, most atomic.Int64
	reg, err := tools.NewRegistry(append(tools.Builtin(tools.Config{}), sizedTool(), holdTool(&inFlight, &most))...)
	if err != nil {
		t.Fatal(err)
	}
	blobs := newCountingBlobs()
	rs = rs.WithBlobs(blobs)
	runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: reg, Values: blobs, Lease: time.Hour, CancelCheck: time.Hour,
		StepTimeout: 10 * time.Second})
	w := workflow.Workflow{ID: uuid.NewString(), UserID: userID, Name: "fan-in", Version: 1, Steps: []workflow.Step{
		sized("big", 7<<20, ""),
		{ID: "each", ToolID: "hold", ForEach: "{{input.ns}}", Concurrency: one(16), Inputs: map[string]any{"input": "{{big.text}}"}},
	}}
	ns := make([]any, 40)
	for i := range ns {
		ns[i] = float64(i)
	}
	ids := make([]string, 2)
	done := make(chan error, len(ids))
	for i := range ids {
		run := runs.NewRun(w, chatID, userID, time.Now())
		run.Input = map[string]any{"ns": ns}
		if err := rs.CreateRun(context.Background(), run, job.Lease{Until: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		ids[i] = run.ID
		go func() { done <- runner.Run(context.Background(), workflow.RunRef{RunID: run.ID, Attempt: 1}) }()
	}
	for range ids {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		got, err := rs.Run(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != workflow.RunCompleted {
			t.Errorf("run %s %q: every element should wait its turn and complete", got.Status, got.Error)
		}
	}
	t.Logf("at most %d calls in flight", most.Load())
	if want := int64(runs.MaxUserValueBytes / (7 << 20)); most.Load() > want || most.Load() < 2 {
		t.Errorf("%d calls with a 7 MiB input in flight at once, want 2 to %d", most.Load(), want)
	}
}
