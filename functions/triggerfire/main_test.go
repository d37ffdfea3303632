package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/workflow"
)

// TestTriggerFireFunctionEvent feeds the handler the input EventBridge
// Scheduler sends (testdata/fire.json, the schedule's input with the
// scheduled time filled in) over the real store. Until the run engine
// provides its RunStarter the run is refused as unavailable: the handler
// returns the error (Lambda retries the event, then the dead-letter queue
// takes it) and the trigger records the failed fire. A fire of an older
// version of the trigger, or of a deleted one, does nothing and succeeds.
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
	h, err := newHandler(ctx, db.Env(t, map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "TriggerFireFunction", "LOG_LEVEL": "error"}))
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
	if err := h(ctx, ev); errs.CodeOf(err) != "RUNS_UNAVAILABLE" {
		t.Fatalf("fire: %v, want the run refused as unavailable (retried by Lambda)", err)
	}
	got, err := triggers.Trigger(ctx, tr.ID)
	if err != nil || got.LastFire == nil || got.LastFire.Outcome != trigger.OutcomeFailed || got.LastFire.Error.Code != "RUNS_UNAVAILABLE" ||
		got.LastFire.RunID != trigger.FireRunID(tr.ID, time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)) || got.ActiveRunID != "" {
		t.Errorf("trigger after the fire: %+v (last %+v), %v", got, got.LastFire, err)
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
