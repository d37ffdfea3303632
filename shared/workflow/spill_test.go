package workflow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/workflow"
)

// TestMinJSONSize: the bound is the exact length of the JSON of a value
// with nothing to escape, never more than the length with escapes, and
// stops counting past its limit however often the value repeats one
// large part.
func TestMinJSONSize(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1<<20)
	many := make([]any, 1000)
	for i := range many {
		many[i] = big // one string, a thousand times: 1 GB of JSON
	}
	for _, tc := range []struct {
		name  string
		v     any
		exact bool
	}{
		{"null", nil, true},
		{"booleans", []any{true, false}, false},
		{"number", 12.0, false},
		{"empty object", map[string]any{}, true},
		{"empty array", []any{}, true},
		{"object", map[string]any{"a": "b", "cc": []any{"d", map[string]any{"e": "f"}}}, true},
		{"escapes", map[string]any{"a": "\"\n<"}, false},
		{"raw", map[string]any{"a": json.RawMessage(`{"b":1}`)}, true},
	} {
		b, _ := json.Marshal(tc.v)
		n := workflow.MinJSONSize(tc.v, 1<<20)
		if n > len(b) || (tc.exact && n != len(b)) {
			t.Errorf("%s: %d for %d bytes of JSON (%s)", tc.name, n, len(b), b)
		}
	}
	if n := workflow.MinJSONSize(many, 8<<20); n <= 8<<20 || n > 10<<20 {
		t.Errorf("a value of 1 GB of JSON: %d, want just past the 8 MiB limit", n)
	}
}

// TestResolveInputsWithin: interpolated text is bounded as it is built;
// a whole-string reference is not copied and costs nothing.
func TestResolveInputsWithin(t *testing.T) {
	t.Parallel()
	s := workflow.Scope{Steps: map[string]map[string]any{"a": {"t": strings.Repeat("x", 1000)}}}
	if _, err := s.ResolveInputsWithin(map[string]any{"x": strings.Repeat("{{a.t}}", 10)}, 10_000); err != nil {
		t.Errorf("10,000 bytes within 10,000: %v", err)
	}
	if _, err := s.ResolveInputsWithin(map[string]any{"x": strings.Repeat("{{a.t}}", 11)}, 10_000); !errors.Is(err, workflow.ErrTextTooLarge) {
		t.Errorf("11,000 bytes within 10,000: %v", err)
	}
	refs := map[string]any{}
	for _, k := range []string{"p", "q", "r", "s", "u"} {
		refs[k] = "{{a.t}}"
	}
	if _, err := s.ResolveInputsWithin(refs, 10); err != nil {
		t.Errorf("whole-string references within 10 bytes: %v", err)
	}
}
