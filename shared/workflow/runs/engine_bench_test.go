package runs_test

import (
	"context"
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

const benchSteps = 10

func benchQueryInput() map[string]any {
	return map[string]any{"input": map[string]any{"a": 1.0, "b": []any{1.0, 2.0}}, "query": ".a"}
}

// BenchmarkEngineStep runs a workflow of ten json_query steps through the
// engine (templates resolved, the tool run through the registry, every
// step's start and result written to the embedded DynamoDB) and reports the
// time per step: compare with BenchmarkEngineBareTool, the floor.
func BenchmarkEngineStep(b *testing.B) {
	db := storetest.New(b)
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		b.Fatal(err)
	}
	runStore := store.NewRuns(db.DB, db.Data())
	chats := store.NewChats(db.DB, db.Data())
	chatID, userID := uuid.NewString(), uuid.NewString()
	now := time.Now().UTC()
	if err := chats.CreateChat(context.Background(), chat.Chat{ID: chatID, UserID: userID, Title: "b", CreatedAt: now, UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	steps := []workflow.Step{{ID: "s0", ToolID: "json_query", Inputs: benchQueryInput()}}
	for i := 1; i < benchSteps; i++ {
		// Each step queries the previous step's result through a template.
		steps = append(steps, workflow.Step{ID: "s" + string(rune('0'+i)), ToolID: "json_query",
			Inputs: map[string]any{"input": map[string]any{"a": "{{s" + string(rune('0'+i-1)) + ".result}}"}, "query": ".a"}})
	}
	w := workflow.Workflow{ID: uuid.NewString(), UserID: userID, Name: "bench", Steps: steps}
	e := runs.NewEngine(reg, runStore, runs.EngineOptions{})
	db.Counter.Reset()
	b.ReportAllocs()
	for b.Loop() {
		run := e.NewRun(w, chatID, userID)
		if err := e.Execute(context.Background(), w, &run, nil); err != nil || run.Status != workflow.RunCompleted {
			b.Fatalf("run %s: %v", run.Status, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchSteps), "ns/step")
	b.ReportMetric(float64(db.Counter.Count())/float64(b.N*benchSteps), "ddbcalls/step")
}

// BenchmarkEngineBareTool is the floor of BenchmarkEngineStep: the same
// json_query call through the registry, with no engine and no storage.
func BenchmarkEngineBareTool(b *testing.B) {
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		b.Fatal(err)
	}
	in := benchQueryInput()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Run(context.Background(), "json_query", in); err != nil {
			b.Fatal(err)
		}
	}
}
