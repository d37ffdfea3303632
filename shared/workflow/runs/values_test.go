package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/condition"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// valuesFixture is a run service and an in-process runner over the real
// store on the embedded engine and a blob store in memory.
type valuesFixture struct {
	runs      *store.Runs
	workflows *store.Workflows
	blobs     *blob.Local
	counted   *countingBlobs // under blobs
	svc       *runs.Service
	inproc    *runs.InProcess
	userID    string
}

func newValuesFixture(t *testing.T) *valuesFixture {
	t.Helper()
	db := storetest.New(t)
	counted := newCountingBlobs()
	local, err := blob.NewLocal(counted, blob.LocalOptions{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	f := &valuesFixture{runs: store.NewRuns(db.DB, db.Data()).WithBlobs(local), workflows: store.NewWorkflows(db.DB, db.Data()), blobs: local, counted: counted,
		userID: uuid.NewString()}
	jobs := store.NewJobs(db.DB, db.Data())
	f.inproc = &runs.InProcess{Runner: runs.NewRunner(runs.RunnerOptions{Store: f.runs, Values: local, Jobs: jobs, Tools: newRegistry(t), Condition: condition.Eval})}
	t.Cleanup(f.inproc.Wait)
	f.svc = runs.NewService(runs.Options{Store: f.runs, Jobs: jobs, Workflows: f.workflows, Invoker: f.inproc, Values: local})
	return f
}

func (f *valuesFixture) workflow(t *testing.T, steps ...workflow.Step) string {
	t.Helper()
	now := time.Now().UTC()
	w := workflow.Workflow{ID: uuid.NewString(), UserID: f.userID, Name: "large", Steps: steps, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := f.workflows.CreateWorkflow(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w.ID
}

func (f *valuesFixture) ctx() context.Context { return auth.ActingFor(context.Background(), f.userID) }

func (f *valuesFixture) wait(t *testing.T, runID string, done func(workflow.Run) bool) workflow.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute) // a bound for a stuck run, not a measure: a loaded machine may take long
	for {
		r, err := f.runs.Run(context.Background(), runID)
		if err != nil {
			t.Fatal(err)
		}
		if done(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %s %+v", runID, r.Status, r.Steps)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLargeValuesFlowWhole: a step's 1 MB output is kept in the blob
// store and the run's record holds its cut form; the next step reads it
// whole, also after a pause for a person (a new runner invocation) and in
// a retry; a client reading the run gets the cut form with an outputUrl
// and never the blob key; a forEach's large element outputs are kept the
// same way.
func TestLargeValuesFlowWhole(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t)
	ctx := f.ctx()
	jq := func(id string, input any, query string) workflow.Step {
		return workflow.Step{ID: id, ToolID: "json_query", Inputs: map[string]any{"input": input, "query": query}}
	}
	wfID := f.workflow(t,
		jq("big", 1, `"ab" * 500000`),
		workflow.Step{ID: "ask", ToolID: "ask_human", Inputs: map[string]any{"message": "go on?"}},
		jq("len", "{{big.result}}", "length"),
		workflow.Step{ID: "each", ToolID: "json_query", Inputs: map[string]any{"input": "{{item}}", "query": `"x" * (. * 20000)`}, ForEach: "{{input.ns}}"},
		jq("sizes", "{{each.results}}", "map(.result | length)"),
	)
	run, err := f.svc.Start(ctx, runs.StartRequest{WorkflowID: wfID, Input: map[string]any{"ns": []any{1.0, 2.0, 3.0}}})
	if err != nil {
		t.Fatal(err)
	}
	waiting := f.wait(t, run.ID, func(r workflow.Run) bool { return r.Status == workflow.RunWaiting })
	key, spilled := workflow.SpilledKey(waiting.Steps[0].Output)
	if !spilled || !waiting.Steps[0].Truncated || !strings.HasPrefix(key, workflow.RunBlobPrefix(run.ID)) {
		t.Fatalf("the 1 MB output in the record: %v", waiting.Steps[0].Output)
	}
	if b, _ := json.Marshal(waiting.Steps); len(b) > 64<<10 {
		t.Errorf("the run's steps take %d bytes in the record", len(b))
	}
	if _, err := f.svc.Respond(ctx, runs.Scope{WorkflowID: wfID}, run.ID, "ask", runs.Answer{Approved: true}); err != nil {
		t.Fatal(err)
	}
	done := f.wait(t, run.ID, func(r workflow.Run) bool { return !workflow.Active(r.Status) })
	if done.Status != workflow.RunCompleted || done.Steps[2].Output["result"] != 1_000_000.0 {
		t.Fatalf("after the pause: %s %q %v", done.Status, done.Error, done.Steps[2].Output)
	}
	if b, _ := json.Marshal(done.Steps[4].Output["result"]); string(b) != "[20000,40000,60000]" {
		t.Errorf("forEach element sizes %s", b)
	}

	got, err := f.svc.Get(ctx, runs.Scope{WorkflowID: wfID}, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Steps[0].OutputURL == "" || got.Steps[0].Output["blob"] != nil || got.Steps[0].Output["truncated"] != true || got.Steps[0].Output["size"] == nil {
		t.Errorf("a client's read of the large output: %v, url %q", got.Steps[0].Output, got.Steps[0].OutputURL)
	}
	if b, _ := json.Marshal(got); strings.Contains(string(b), `"blob"`) {
		t.Errorf("a blob key in a client's read: %.300s", b)
	}

	// A retry from the step after the pause reuses the large output.
	retry, err := f.svc.Retry(ctx, runs.Scope{WorkflowID: wfID}, run.ID, "len")
	if err != nil {
		t.Fatal(err)
	}
	again := f.wait(t, retry.ID, func(r workflow.Run) bool { return !workflow.Active(r.Status) })
	if again.Status != workflow.RunCompleted || again.Steps[2].Output["result"] != 1_000_000.0 {
		t.Errorf("the retry: %s %q %v", again.Status, again.Error, again.Steps[2].Output)
	}
}

// TestLargeRunInput: a run input over the spill threshold is kept in the
// blob store and read whole by the steps.
func TestLargeRunInput(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t)
	wfID := f.workflow(t, workflow.Step{ID: "n", ToolID: "json_query", Inputs: map[string]any{"input": "{{input.text}}", "query": "length"}})
	text := strings.Repeat("é", 300_000)
	run, err := f.svc.Start(f.ctx(), runs.StartRequest{WorkflowID: wfID, Input: map[string]any{"text": text}})
	if err != nil {
		t.Fatal(err)
	}
	done := f.wait(t, run.ID, func(r workflow.Run) bool { return !workflow.Active(r.Status) })
	if _, spilled := workflow.SpilledKey(done.Input); !spilled || done.Steps[0].Output["result"] != 300_000.0 {
		t.Fatalf("run input %v, output %v (%s %q)", done.Input["size"], done.Steps[0].Output, done.Status, done.Error)
	}
}
