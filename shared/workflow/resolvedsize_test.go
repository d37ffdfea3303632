package workflow_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/workflow"
)

// ResolvedSize counts, without resolving, the MinJSONSize of what
// ResolveInputs returns: exactly, for values of strings, objects and
// arrays; and stops just past its limit.
func TestResolvedSizeIsTheResolutionsMinJSONSize(t *testing.T) {
	big := strings.Repeat("z", 100_000)
	results := make([]any, 80)
	for i := range results {
		results[i] = map[string]any{"result": big}
	}
	scope := workflow.Scope{
		Steps: map[string]map[string]any{"fe": {"results": results}, "s": {"text": "abc", "obj": map[string]any{"k": "v"}}},
		Input: map[string]any{"name": "ann"},
	}.WithItem(map[string]any{"id": "e1"})
	for _, inputs := range []map[string]any{
		nil,
		{},
		{"x": "{{fe.results}}"},
		{"x": "{{fe.results}}", "y": "{{ fe.results }}", "i": "{{item.id}}", "whole": "{{item}}"},
		{"text": "all: {{fe.results}} and {{s.text}}, {{s.obj}}, {{input.name}}!"},
		{"nested": []any{map[string]any{"a": "{{s.text}}-{{item.id}}"}, "plain", "{{missing.x}}"}},
	} {
		want := 0
		if got, err := scope.ResolveInputs(inputs); err == nil {
			want = workflow.MinJSONSize(got, 1<<30)
		} else if _, ok := inputs["nested"]; !ok {
			t.Fatalf("%v: %v", inputs, err)
		} else {
			// The missing reference counts nothing: what is left.
			want = len(`{"nested":[{"a":"abc-e1"},"plain",]}`)
		}
		if got := scope.ResolvedSize(inputs, 1<<30); got != want {
			t.Errorf("ResolvedSize(%.80v) = %d, the resolution's MinJSONSize is %d", inputs, got, want)
		}
	}
	if got := scope.ResolvedSize(map[string]any{"a": "{{fe.results}}", "b": "{{fe.results}}"}, 1000); got <= 1000 || got > 200_000 {
		t.Errorf("ResolvedSize past its limit = %d: not stopped just past it", got)
	}
}

func TestUsesItem(t *testing.T) {
	for in, want := range map[string]bool{`{"x":"{{fe.results}}"}`: false, `{"x":"{{item}}"}`: true, `{"x":["a {{ item.id }}"]}`: true, `{"x":"{{.item}}"}`: false} {
		var m map[string]any
		if err := json.Unmarshal([]byte(in), &m); err != nil {
			t.Fatal(err)
		}
		if got := workflow.UsesItem(m); got != want {
			t.Errorf("UsesItem(%s) = %v, want %v", in, got, want)
		}
	}
}
