package runworkflow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/runworkflow"
)

func TestParse(t *testing.T) {
	req, err := runworkflow.Parse(map[string]any{"workflowId": "w1", "input": map[string]any{"a": 1.0}})
	if err != nil || req.WorkflowID != "w1" || req.Input["a"] != 1.0 {
		t.Fatalf("%+v %v", req, err)
	}
	for _, tc := range []struct {
		name  string
		in    map[string]any
		field string
	}{
		{"missing", map[string]any{}, "workflowId"},
		{"not a string", map[string]any{"workflowId": 3.0}, "workflowId"},
		{"blank", map[string]any{"workflowId": "  "}, "workflowId"},
		{"over 200 bytes", map[string]any{"workflowId": strings.Repeat("w", 201)}, "workflowId"},
		{"input not an object", map[string]any{"workflowId": "w", "input": []any{1.0}}, "input"},
		{"another field", map[string]any{"workflowId": "w", "x": 1.0}, "x"},
	} {
		_, err := runworkflow.Parse(tc.in)
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != "INVALID_PARAMS" || len(e.Details) == 0 || e.Details[0].Field != tc.field {
			t.Errorf("%s: %v, want INVALID_PARAMS naming %s", tc.name, err, tc.field)
		}
	}
	// At the bound: 200 bytes is a workflow id.
	if _, err := runworkflow.Parse(map[string]any{"workflowId": strings.Repeat("w", 200)}); err != nil {
		t.Errorf("200 bytes: %v", err)
	}
}

func TestLiteral(t *testing.T) {
	if id, ok := runworkflow.Literal(map[string]any{"workflowId": "w1"}); !ok || id != "w1" {
		t.Errorf("literal: %q %v", id, ok)
	}
	for _, in := range []map[string]any{{"workflowId": "{{input.wf}}"}, {"workflowId": ""}, {"workflowId": 1.0}, {}} {
		if _, ok := runworkflow.Literal(in); ok {
			t.Errorf("%v is not a literal workflow id", in)
		}
	}
}

func TestSchemas(t *testing.T) {
	for _, raw := range [][]byte{runworkflow.InputSchema, runworkflow.OutputSchema} {
		var s map[string]any
		if err := json.Unmarshal(raw, &s); err != nil || s["type"] != "object" {
			t.Errorf("schema %s: %v", raw, err)
		}
	}
}
