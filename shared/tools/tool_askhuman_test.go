package tools_test

import (
	"testing"

	"github.com/workflowchat/service/shared/tools"
)

// TestAskHumanRunsOnlyAsAStep: ask_human is in the catalog (proposals and
// models need its schema) but running it as a tool is INVALID_PARAMS with
// a message saying why, whatever the input.
func TestAskHumanRunsOnlyAsAStep(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	if _, err := r.Get(tools.AskHumanID); err != nil {
		t.Fatalf("ask_human is not in the catalog: %v", err)
	}
	runToolCases(t, r, tools.AskHumanID, []toolCase{
		{name: "valid input", input: map[string]any{"message": "Publish?", "timeoutSeconds": 60.0, "onTimeout": "continue"},
			code: tools.CodeInvalidParams, msg: "runs only as a workflow step", field: "toolId"},
		{name: "with an input schema", input: map[string]any{"message": "Note?", "inputSchema": map[string]any{"type": "object"}},
			code: tools.CodeInvalidParams, msg: "runs only as a workflow step", field: "toolId"},
		{name: "no message", input: map[string]any{},
			code: tools.CodeInvalidParams, msg: "message", field: "message"},
		{name: "timeout over 30 days", input: map[string]any{"message": "x", "timeoutSeconds": 2592001.0},
			code: tools.CodeInvalidParams, field: "timeoutSeconds"},
		{name: "timeout zero", input: map[string]any{"message": "x", "timeoutSeconds": 0.0},
			code: tools.CodeInvalidParams, field: "timeoutSeconds"},
		{name: "unknown onTimeout", input: map[string]any{"message": "x", "onTimeout": "retry"},
			code: tools.CodeInvalidParams, field: "onTimeout"},
	})
}
