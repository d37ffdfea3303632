package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/blob/s3blob/s3blobtest"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/workflow"
)

// TestTriggerFireFunctionEvent feeds the handler the input EventBridge
// Scheduler sends (testdata/fire.json, the schedule's input with the
// scheduled time filled in) over the real store: the fire starts a durable
// run of the workflow with the fire's run id and the schedule's trigger
// (handed to the runner; here the runner's endpoint is closed, so the run
// waits for the sweeper, as after any failed invoke), the trigger records
// it and holds it as its active run (overlap skip). A second delivery of
// the same fire starts nothing new. A fire of an older version of the
// trigger, or of a deleted one, does nothing and succeeds.
func TestTriggerFireFunctionEvent(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	now := time.Now().UTC()
	wf := workflow.Workflow{ID: uuid.NewString(), UserID: "u1", Name: "w", Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := store.NewWorkflows(db.DB, db.Data()).CreateWorkflow(ctx, wf); err != nil {
		t.Fatal(err)
	}
	triggers := store.NewTriggers(db.DB, db.Data())
	tr := trigger.Trigger{ID: uuid.NewString(), UserID: "u1", WorkflowID: wf.ID, Type: trigger.TypeSchedule, Enabled: true,
		Schedule: "cron(0 9 ? * MON-FRI *)", Timezone: "UTC", Overlap: trigger.OverlapSkip, ScheduleStart: now, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := triggers.CreateTrigger(ctx, tr, trigger.MaxPerUser); err != nil {
		t.Fatal(err)
	}
	h, err := newHandler(ctx, db.Env(t, map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "TriggerFireFunction", "LOG_LEVEL": "error",
		"RUNNER_FUNCTION": "RunnerFunction", "AWS_ENDPOINT_URL_LAMBDA": "http://127.0.0.1:1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET",
		"BLOB_BUCKET": "blobs", "BLOB_ENDPOINT": s3blobtest.Start(t, "blobs")}))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/fire.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev trigger.FireEvent
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(raw), "TRIGGER_ID", tr.ID)), &ev); err != nil {
		t.Fatal(err)
	}
	runID := trigger.FireRunID(tr.ID, time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	for range 2 { // Lambda may deliver an event twice
		if err := h(ctx, ev); err != nil {
			t.Fatalf("fire: %v", err)
		}
	}
	got, err := triggers.Trigger(ctx, tr.ID)
	if err != nil || got.LastFire == nil || got.LastFire.RunID != runID || got.ActiveRunID != runID {
		t.Errorf("trigger after the fire: %+v (last %+v), %v", got, got.LastFire, err)
	}
	run, err := store.NewRuns(db.DB, db.Data()).Run(ctx, runID)
	if err != nil || run.Trigger == nil || run.Trigger.Type != workflow.TriggerSchedule || run.Trigger.TriggerID != tr.ID || run.ChatID != "" ||
		run.UserID != "u1" || run.WorkflowID != wf.ID || run.Status != workflow.RunPending {
		t.Errorf("the fire's run: %+v, %v", run, err)
	}
	if page, _, err := store.NewRuns(db.DB, db.Data()).WorkflowRunsPage(ctx, wf.ID, 10, ""); err != nil || len(page) != 1 {
		t.Errorf("the workflow's runs after two deliveries: %d, %v", len(page), err)
	}

	stale := ev
	stale.Version = 0
	if err := h(ctx, stale); err != nil {
		t.Errorf("fire of an older version: %v", err)
	}
	if err := triggers.DeleteTrigger(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if err := h(ctx, ev); err != nil {
		t.Errorf("fire of a deleted trigger: %v", err)
	}
}
