package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
)

// storedSteps is how a run item holds its steps: stepMap, or the older
// steps array.
type storedSteps struct {
	StepMap map[string]string `dynamo:"stepMap"`
	Steps   string            `dynamo:"steps"`
}

func readStoredSteps(t *testing.T, db *storetest.DB, runID string) storedSteps {
	t.Helper()
	var it storedSteps
	if err := db.Table(db.Data()).Get("PK", "RUN#"+runID).Range("SK", dynamo.Equal, "RUN").Consistent(true).One(context.Background(), &it); err != nil {
		t.Fatal(err)
	}
	return it
}

// TestCheckpointWritesOnlyChangedSteps: a partial checkpoint writes the
// steps it names and leaves the others as stored (proved by handing it a
// different encoding of an unnamed step, which must not be stored); a
// full one writes stepMap; a run stored with the older steps array is
// read as it is and moves to stepMap at its first full checkpoint.
func TestCheckpointWritesOnlyChangedSteps(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	runs := store.NewRuns(db.DB, db.Data())
	ctx := context.Background()
	for _, old := range []bool{false, true} {
		r := newRun("", uuid.NewString(), "u1", time.Now().UTC(), workflow.RunRunning)
		if err := runs.CreateRun(ctx, r, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if got := readStoredSteps(t, db, r.ID); len(got.StepMap) != 2 || got.Steps != "" {
			t.Fatalf("a new run is stored with %d steps in stepMap and steps %q; want 2 and none", len(got.StepMap), got.Steps)
		}
		if old { // as runs were stored before stepMap
			b, _ := json.Marshal(r.Steps)
			err := db.Table(db.Data()).Update("PK", "RUN#"+r.ID).Range("SK", "RUN").Set("steps", string(b)).Remove("stepMap").Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
		}
		if got, err := runs.Run(ctx, r.ID); err != nil || len(got.Steps) != 2 || got.Steps[1].ID != "b" {
			t.Fatalf("old %v: read %+v, %v", old, got.Steps, err)
		}
		// The writer's first checkpoint writes every step.
		r.Steps[0].Status, r.Steps[0].Input = workflow.StepRunning, map[string]any{"text": "one"}
		if err := runs.SaveCheckpoint(ctx, workflow.Checkpoint{Run: r, IfStatus: workflow.RunRunning}); err != nil {
			t.Fatal(err)
		}
		if got := readStoredSteps(t, db, r.ID); len(got.StepMap) != 2 || got.Steps != "" {
			t.Fatalf("old %v: after a full checkpoint stepMap %v, steps %q", old, got.StepMap, got.Steps)
		}
		// A partial one: step 1 changed; step 0's encoding handed over is
		// not what is stored, and must not be written.
		r.Steps[0].Status, r.Steps[0].Output = workflow.StepCompleted, map[string]any{"n": 1.0}
		r.Steps[1].Status = workflow.StepRunning
		one, _ := workflow.EncodeStep(r.Steps[1], nil)
		err := runs.SaveCheckpoint(ctx, workflow.Checkpoint{Run: r, IfStatus: workflow.RunRunning, Partial: true, Changed: []int{1},
			StepsJSON: [][]byte{[]byte(`{"id":"not written"}`), one}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := runs.Run(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Steps[0].ID != "a" || got.Steps[0].Status != workflow.StepRunning || got.Steps[0].Input["text"] != "one" {
			t.Errorf("old %v: step 0 %+v, want it as the full checkpoint wrote it", old, got.Steps[0])
		}
		if got.Steps[1].Status != workflow.StepRunning {
			t.Errorf("old %v: step 1 %+v, want running", old, got.Steps[1])
		}
		// Out of range is refused before anything is written.
		if err := runs.SaveCheckpoint(ctx, workflow.Checkpoint{Run: r, IfStatus: workflow.RunRunning, Partial: true, Changed: []int{2}}); err == nil {
			t.Errorf("old %v: a partial checkpoint of step 2 of 2 was accepted", old)
		}
	}
}
