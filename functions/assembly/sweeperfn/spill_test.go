package sweeperfn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/sweeperfn"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

type recordInvoker struct {
	mu   sync.Mutex
	refs []workflow.RunRef
}

func (r *recordInvoker) Invoke(_ context.Context, ref workflow.RunRef) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refs = append(r.refs, ref)
	return nil
}

// TestSweeperReadsSpilledValues: the sweeper as the function builds it
// (the real store over the embedded engine, the blob store of Deps) reads
// a run's spilled values: a human step whose request (over
// runs.SpillBytes, kept in the blob store) says onTimeout continue is
// completed with approved false and timedOut true once its deadline has
// passed, and the run goes to the runner.
func TestSweeperReadsSpilledValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	cfg, err := config.Load(db.Env(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := blob.NewLocal(blob.NewMemory(nil), blob.LocalOptions{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	inv := &recordInvoker{}
	sw, err := sweeperfn.Sweeper(ctx, cfg, assembly.Deps{DB: db.DB, Blobs: blobs, Runs: inv})
	if err != nil {
		t.Fatal(err)
	}

	enum := make([]any, 4000)
	for i := range enum {
		enum[i] = fmt.Sprintf("option-%05d", i)
	}
	input := map[string]any{"message": "Pick one", "timeoutSeconds": 60.0, "onTimeout": "continue", "inputSchema": map[string]any{
		"type": "object", "required": []any{"note"}, "properties": map[string]any{"note": map[string]any{"type": "string", "enum": enum}}}}
	b, _ := json.Marshal(input)
	if len(b) <= runs.SpillBytes {
		t.Fatalf("request of %d bytes, want over %d", len(b), runs.SpillBytes)
	}
	runID := uuid.NewString()
	key := workflow.RunBlobPrefix(runID) + "request.json"
	if _, err := blob.PutBytes(ctx, blobs, key, b, "application/json"); err != nil {
		t.Fatal(err)
	}
	began := time.Now().UTC().Add(-2 * time.Minute)
	expires := began.Add(time.Minute)
	plan := []workflow.Step{{ID: "ask", ToolID: "ask_human", Inputs: input}, {ID: "after", ToolID: "json_query", Inputs: map[string]any{"input": 1.0, "query": "."}}}
	run := workflow.Run{ID: runID, WorkflowID: uuid.NewString(), UserID: uuid.NewString(), Status: workflow.RunWaiting, StartedAt: began,
		Attempt: 1, WorkflowVersion: 1, Plan: plan, Steps: []workflow.RunStep{
			{ID: "ask", ToolID: "ask_human", Status: workflow.StepWaiting, StartedAt: &began, ExpiresAt: &expires, Input: workflow.Spilled(b, key)},
			{ID: "after", ToolID: "json_query", Status: workflow.StepPending},
		}}
	runStore := store.NewRuns(db.DB, db.Data()).WithBlobs(blobs)
	if err := runStore.CreateRun(ctx, run, job.Lease{Until: expires}); err != nil {
		t.Fatal(err)
	}

	if _, err := sw.Sweep(ctx); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	got, err := runStore.Run(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	out := got.Steps[0].Output
	if got.Status != workflow.RunRunning || got.Steps[0].Status != workflow.StepCompleted || out["approved"] != false || out["timedOut"] != true {
		t.Fatalf("run %s %q, step %s output %v; want running, the step completed with approved false, timedOut true",
			got.Status, got.Error, got.Steps[0].Status, out)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if len(inv.refs) != 1 || inv.refs[0].RunID != runID {
		t.Fatalf("handed to the runner: %v, want run %s once", inv.refs, runID)
	}
}
