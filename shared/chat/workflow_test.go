package chat_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/workflow"
)

// scriptedRuns is a chat.Runs whose one run logs events and ends as run.
type scriptedRuns struct {
	run    workflow.Run
	events []workflow.RunEvent
}

func (r *scriptedRuns) CheckWorkflow(ctx context.Context, id string) (workflow.Workflow, error) {
	return workflow.Workflow{ID: id, Name: "W"}, nil
}

func (r *scriptedRuns) CheckStart(ctx context.Context, id string) (workflow.Workflow, error) {
	return r.CheckWorkflow(ctx, id)
}

func (r *scriptedRuns) Start(ctx context.Context, chatID, workflowID string) (workflow.Run, error) {
	return r.run, nil
}

func (r *scriptedRuns) Follow(ctx context.Context, runID string, yield func(workflow.RunEvent) error) error {
	for _, e := range r.events {
		e.RunID = runID
		if err := yield(e); err != nil {
			return err
		}
	}
	return nil
}

func (r *scriptedRuns) Run(ctx context.Context, runID string) (workflow.Run, error) {
	return r.run, nil
}

func (r *scriptedRuns) CancelRun(ctx context.Context, runID string) error { return nil }

// TestStreamedRunPairsEachStep: a stream that runs a workflow renders
// each step that started as one tool_call and one tool_result: a step
// with a retry is one call whatever its attempts, its result its last
// attempt's; a step running when the run was cancelled, or waiting for
// an authorization when the reply ends, gets a result saying so, as an
// error. The stored message keeps the
// calls with their results.
func TestStreamedRunPairsEachStep(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	started := func(id string) workflow.RunEvent {
		return workflow.RunEvent{Type: workflow.EventStepStarted, StepID: id, ToolID: "code", Input: map[string]any{"step": id}}
	}
	retrying := func(id string, n int) workflow.RunEvent {
		return workflow.RunEvent{Type: workflow.EventStepRetrying, StepID: id, ToolID: "code", Attempt: n, Error: "x", RetryAt: &at}
	}
	tests := []struct {
		name    string
		run     workflow.Run
		events  []workflow.RunEvent
		results []string // each step's result, in order
	}{
		{"cancelled while a step runs",
			workflow.Run{ID: "r", WorkflowID: "w", Status: workflow.RunCancelled, Error: "the run was cancelled", Steps: []workflow.RunStep{
				{ID: "a", ToolID: "code", Status: workflow.StepCompleted, Output: map[string]any{"v": 1.0}},
				{ID: "b", ToolID: "code", Status: workflow.StepCancelled}, {ID: "c", ToolID: "code", Status: workflow.StepCancelled}}},
			[]workflow.RunEvent{{Type: workflow.EventRunStarted, Attempt: 1}, started("a"),
				{Type: workflow.EventStepCompleted, StepID: "a", ToolID: "code", Output: map[string]any{"v": 1.0}}, started("b"),
				{Type: workflow.EventRunCancelled, Error: "the run was cancelled"}},
			[]string{`{"v":1}`, `{"error":"the step was cancelled: the run was cancelled"}`}},
		{"retried until it failed",
			workflow.Run{ID: "r", WorkflowID: "w", Status: workflow.RunFailed, Error: "step a failed: boom", Steps: []workflow.RunStep{
				{ID: "a", ToolID: "code", Status: workflow.StepFailed, Error: "boom"}}},
			[]workflow.RunEvent{{Type: workflow.EventRunStarted, Attempt: 1}, started("a"), retrying("a", 1), started("a"), retrying("a", 2), started("a"),
				{Type: workflow.EventStepFailed, StepID: "a", ToolID: "code", Error: "boom"}, {Type: workflow.EventRunFailed, Error: "step a failed: boom"}},
			[]string{`{"error":"boom"}`}},
		{"retried until it completed",
			workflow.Run{ID: "r", WorkflowID: "w", Status: workflow.RunCompleted, Steps: []workflow.RunStep{
				{ID: "a", ToolID: "code", Status: workflow.StepCompleted, Output: map[string]any{"v": 2.0}},
				{ID: "b", ToolID: "code", Status: workflow.StepCompleted, Output: map[string]any{"v": 3.0}}}},
			[]workflow.RunEvent{{Type: workflow.EventRunStarted, Attempt: 1}, started("a"), retrying("a", 1), started("a"),
				{Type: workflow.EventStepCompleted, StepID: "a", ToolID: "code", Output: map[string]any{"v": 2.0}}, started("b"),
				{Type: workflow.EventStepCompleted, StepID: "b", ToolID: "code", Output: map[string]any{"v": 3.0}}, {Type: workflow.EventRunCompleted}},
			[]string{`{"v":2}`, `{"v":3}`}},
		{"waiting for an authorization",
			workflow.Run{ID: "r", WorkflowID: "w", Status: workflow.RunWaiting, Steps: []workflow.RunStep{
				{ID: "a", ToolID: "code", Status: workflow.StepWaiting, Reason: workflow.WaitAuthorization}}},
			[]workflow.RunEvent{{Type: workflow.EventRunStarted, Attempt: 1}, started("a"),
				{Type: workflow.EventStepWaiting, StepID: "a", ToolID: "code", Reason: workflow.WaitAuthorization, AuthorizationURL: "/api/mcp-servers/s/authorize"}},
			[]string{`{"error":"the step waits for the authorization of its server (/api/mcp-servers/s/authorize); the run goes on without this reply"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runs := &scriptedRuns{run: tt.run, events: tt.events}
			f := newFixtureWith(t, 0, 0, func(o *chat.Options) { o.Runs = runs })
			id := f.newChat(t)
			authed := auth.WithSession(context.Background(), auth.Session{User: auth.User{ID: f.userID}})
			wfID := "0b7c7c8e-3f57-4c2e-9a55-5d7c9d3f0a11"
			turn, err := f.svc.StartStream(authed, id, chat.StreamRequest{MessageRequest: chat.MessageRequest{
				Content: "run it", ModelID: "builtin", UserID: &f.userID, WorkflowID: &wfID}})
			if err != nil {
				t.Fatal(err)
			}
			var events []chat.Event
			msg, err := f.svc.RunStream(context.Background(), turn, func(e chat.Event) { events = append(events, e) })
			if err != nil {
				t.Fatal(err)
			}
			var types, results []string
			for _, e := range events {
				types = append(types, e.Type)
				if e.Type == chat.EventToolResult {
					results = append(results, string(e.Result))
				}
			}
			want := "start," + strings.Repeat("tool_call,tool_result,", len(tt.results)) + "content,end"
			if got := strings.Join(types, ","); got != want || strings.Join(results, "|") != strings.Join(tt.results, "|") {
				t.Fatalf("events %s, results %v; want %s, %v", got, results, want, tt.results)
			}
			if end := events[len(events)-1]; end.Reason != chat.ReasonCompleted {
				t.Fatalf("end %+v", end)
			}
			var list struct {
				Data struct{ Messages []chat.Message }
			}
			decode(t, f.do(t, "GET", "/api/chats/"+id+"/messages", ""), &list)
			if n := len(list.Data.Messages); n != 2 {
				t.Fatalf("stored messages %+v", list.Data.Messages)
			}
			stored := list.Data.Messages[1]
			var got []string
			for _, c := range stored.ToolCalls {
				var args map[string]any
				if c.ToolName != "code" || json.Unmarshal(c.ToolArgs, &args) != nil || args["step"] == nil {
					t.Errorf("stored call %+v", c)
				}
				got = append(got, string(c.Result))
			}
			if stored.ID != msg.ID || strings.Join(got, "|") != strings.Join(tt.results, "|") {
				t.Fatalf("stored tool calls %+v, want the results %v", stored.ToolCalls, tt.results)
			}
		})
	}
}
