package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/blob/s3blob/s3blobtest"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/workflow"
)

// TestRunnerFunctionEvent feeds the runner's event (the payload the
// asynchronous Invoke carries, decoded into workflow.RunRef as the Lambda
// runtime does) to the handler over the real store and a tool server: the
// pending run is executed and completed; the same event again (Lambda
// retries an event) changes nothing.
func TestRunnerFunctionEvent(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	const key = "runner-test-key-0123456789"
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{}))
	defer ts.Close()

	now := time.Now().UTC()
	c := chat.Chat{ID: uuid.NewString(), UserID: "u1", Title: "t", CreatedAt: now, UpdatedAt: now}
	if err := store.NewChats(db.DB, db.Data()).CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	plan := []workflow.Step{
		{ID: "pick", ToolID: "json_query", Inputs: map[string]any{"input": map[string]any{"price": 4}, "query": ".price"}},
		{ID: "calc", ToolID: "math_evaluate", Inputs: map[string]any{"expression": "p + 1", "variables": map[string]any{"p": "{{pick.result}}"}}},
	}
	run := workflow.Run{ID: uuid.NewString(), ChatID: c.ID, WorkflowID: uuid.NewString(), UserID: "u1", Status: workflow.RunPending,
		StartedAt: now, Attempt: 1, WorkflowVersion: 1, Plan: plan,
		Steps: []workflow.RunStep{{ID: "pick", ToolID: "json_query", Status: workflow.StepPending}, {ID: "calc", ToolID: "math_evaluate", Status: workflow.StepPending}}}
	runs := store.NewRuns(db.DB, db.Data())
	if err := runs.CreateRun(ctx, run, job.Lease{Until: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}

	h, err := newHandler(ctx, db.Env(t, map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "RunnerFunction", "BLOB_BUCKET": "blobs", "BLOB_ENDPOINT": s3blobtest.Start(t, "blobs"), "MCP_URL": ts.URL, "MCP_SERVICE_KEY": key, "LOG_LEVEL": "error"}))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/run.json")
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.NewReplacer("RUN_ID", run.ID).Replace(string(raw)))
	var ev workflow.RunRef
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := h(ctx, ev); err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	got, st, err := runs.LoggedRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.RunCompleted || got.Steps[1].Output["value"] != float64(5) || st.Active || st.LastSeq != 6 {
		// run_started, two starts and two ends, run_completed
		t.Fatalf("run = %+v, log %+v", got, st)
	}
}
