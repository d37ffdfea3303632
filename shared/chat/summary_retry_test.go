package chat_test

import (
	"testing"
	"time"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/workflow"
)

// TestSummarizeRunWaitingToRetry: a run waiting for its step's next
// attempt is told as such, not as a question for the user; a run waiting
// at a human step still asks.
func TestSummarizeRunWaitingToRetry(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 10, 0, 5, 0, time.UTC)
	tests := []struct {
		name string
		run  workflow.Run
		want string
	}{
		{"retrying", workflow.Run{ID: "r", WorkflowID: "w", Status: workflow.RunWaiting, Steps: []workflow.RunStep{
			{ID: "fetch", ToolID: "http_request", Status: workflow.StepPending, RetryAt: &at,
				Attempts: []workflow.StepAttempt{{Attempt: 1, Status: workflow.StepFailed, Error: "boom"}}}}},
			`Workflow "W" will retry step fetch (http_request) at 2026-03-01T10:00:05Z after attempt 1 failed.`},
		{"asking", workflow.Run{ID: "r", WorkflowID: "w", Status: workflow.RunWaiting, Steps: []workflow.RunStep{
			{ID: "ask", ToolID: "ask_human", Status: workflow.StepWaiting, Input: map[string]any{"message": "ok?"}}}},
			`Workflow "W" is waiting for your answer at step ask: "ok?" (answer with POST /api/workflows/w/runs/r/steps/ask/respond).`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := chat.SummarizeWorkflow("W", tt.run); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
