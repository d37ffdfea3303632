package proposal

import (
	"reflect"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/workflow"
)

// builtinToolInfos returns the built-in tools as the catalog sees them.
func builtinToolInfos(t *testing.T) []toolclient.ToolDetail {
	t.Helper()
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	var out []toolclient.ToolDetail
	for _, tl := range reg.List() {
		out = append(out, toolclient.ToolDetail{ID: tl.ID, Name: tl.Name, Description: tl.Description,
			InputSchema: tl.InputSchema, OutputSchema: tl.OutputSchema, Outputs: tl.Outputs()})
	}
	return out
}

func vptr[T any](v T) *T { return &v }

func addStepChange(id, tool string, inputs map[string]any) workflow.Change {
	return workflow.Change{Type: workflow.ChangeAddStep, Step: &workflow.StepSpec{ID: id, ToolID: tool, Inputs: inputs}}
}

func TestApplyChangesValidation(t *testing.T) {
	t.Parallel()
	catalog := builtinToolInfos(t)
	base := workflow.Workflow{ID: "w", Name: "n", Version: 3, Steps: []workflow.Step{
		{ID: "fetch", ToolID: "http_request", Inputs: map[string]any{"url": "https://example.com"}, Outputs: []string{"body", "headers", "json", "status"}},
	}}
	tests := []struct {
		name    string
		changes []workflow.Change
		wantErr string // substring of a problem; "" means valid
	}{
		{"valid add", []workflow.Change{addStepChange("q", "json_query", map[string]any{"input": map[string]any{"a": 1}, "query": ".a"})}, ""},
		{"unknown tool", []workflow.Change{addStepChange("q", "no_such_tool", nil)}, `unknown tool "no_such_tool"`},
		{"duplicate id", []workflow.Change{addStepChange("fetch", "hash", map[string]any{"text": "a", "algorithm": "md5"})}, `already exists`},
		{"duplicate within proposal", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": "a", "algorithm": "md5"}), addStepChange("h", "hash", map[string]any{"text": "b", "algorithm": "md5"})}, `already exists`},
		{"bad id pattern", []workflow.Change{addStepChange("1bad-id", "hash", map[string]any{"text": "a", "algorithm": "md5"})}, `not a valid step id`},
		{"forward reference", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": "{{later.text}}", "algorithm": "md5"}),
			addStepChange("later", "text_template", map[string]any{"template": "x", "values": map[string]any{}})}, `not an earlier step`},
		{"self reference", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": "{{h.digest}}", "algorithm": "md5"})}, `not an earlier step`},
		{"missing step reference", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": "{{ghost.body}}", "algorithm": "md5"})}, `does not exist`},
		{"unknown output", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": "{{fetch.nope}}", "algorithm": "md5"})}, `has no output "nope"`},
		{"schema mismatch: wrong type", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": 12, "algorithm": "md5"})}, `inputs.text`},
		{"schema mismatch: missing required", []workflow.Change{addStepChange("h", "hash", map[string]any{"algorithm": "md5"})}, `inputs.text: is required`},
		{"schema mismatch: enum", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": "a", "algorithm": "crc"})}, `inputs.algorithm`},
		{"schema mismatch: unknown input", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": "a", "algorithm": "md5", "extra": 1})}, `inputs.extra`},
		{"template stands for a non-string type", []workflow.Change{addStepChange("q", "json_query", map[string]any{"input": "{{fetch.json}}", "query": ".a"})}, ""},
		{"template stands for an object", []workflow.Change{addStepChange("t", "text_template", map[string]any{"template": "{{.x}}", "values": "{{fetch.json}}"})}, ""},
		{"template stands for an enum value", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": "{{fetch.body}}", "algorithm": "{{fetch.body}}"})}, ""},
		{"interpolated template is still a string", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": "body: {{fetch.body}}", "algorithm": "md5"})}, ""},
		{"interpolated template cannot be a number", []workflow.Change{addStepChange("m", "math_evaluate", map[string]any{"expression": "1", "variables": "x {{fetch.status}}"})}, `inputs.variables`},
		{"remove breaks a reference", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": "{{fetch.body}}", "algorithm": "md5"}),
			{Type: workflow.ChangeRemoveStep, StepID: "fetch"}}, `does not exist`},
		{"move breaks a reference", []workflow.Change{addStepChange("h", "hash", map[string]any{"text": "{{fetch.body}}", "algorithm": "md5"}),
			{Type: workflow.ChangeMoveStep, StepID: "h", Position: vptr(0)}}, `not an earlier step`},
		{"remove unknown step", []workflow.Change{{Type: workflow.ChangeRemoveStep, StepID: "ghost"}}, `no step with id "ghost"`},
		{"update step inputs", []workflow.Change{{Type: workflow.ChangeUpdateStep, StepID: "fetch", Inputs: &map[string]any{"url": "https://example.org", "method": "GET"}}}, ""},
		{"update step to bad inputs", []workflow.Change{{Type: workflow.ChangeUpdateStep, StepID: "fetch", Inputs: &map[string]any{"method": "GET"}}}, `inputs.url: is required`},
		{"update step needs something", []workflow.Change{{Type: workflow.ChangeUpdateStep, StepID: "fetch"}}, `update_step needs toolId, inputs`},
		{"position out of range", []workflow.Change{{Type: workflow.ChangeAddStep, Step: &workflow.StepSpec{ID: "h", ToolID: "hash", Inputs: map[string]any{"text": "a", "algorithm": "md5"}}, Position: vptr(5)}}, `position`},
		{"rename", []workflow.Change{{Type: workflow.ChangeUpdateWorkflow, Name: vptr("New")}}, ""},
		{"rename empty", []workflow.Change{{Type: workflow.ChangeUpdateWorkflow, Name: vptr(" ")}}, `name`},
		{"description too long", []workflow.Change{{Type: workflow.ChangeUpdateWorkflow, Description: vptr(strings.Repeat("d", 1001))}}, `description`},
		{"unknown change type", []workflow.Change{{Type: "explode"}}, `unknown change type`},
		{"empty proposal", []workflow.Change{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, probs := ApplyChanges(base, tt.changes, catalog)
			if tt.wantErr == "" {
				if len(probs) > 0 {
					t.Fatalf("unexpected problems: %+v", probs)
				}
				return
			}
			if len(probs) == 0 {
				t.Fatalf("no problems, want %q", tt.wantErr)
			}
			if s := summarizeAll(probs); !strings.Contains(s, tt.wantErr) {
				t.Errorf("problems %s, want %q", s, tt.wantErr)
			}
		})
	}
}

func summarizeAll(probs []errs.FieldError) string {
	var parts []string
	for _, p := range probs {
		parts = append(parts, p.Field+": "+p.Message)
	}
	return strings.Join(parts, "; ")
}

func TestApplyChangesResult(t *testing.T) {
	t.Parallel()
	catalog := builtinToolInfos(t)
	w := workflow.Workflow{ID: "w", Name: "old", Steps: []workflow.Step{}}
	next, probs := ApplyChanges(w, []workflow.Change{
		addStepChange("a", "datetime_now", map[string]any{}),
		addStepChange("b", "hash", map[string]any{"text": "{{a.iso}}", "algorithm": "sha256"}),
		{Type: workflow.ChangeAddStep, Step: &workflow.StepSpec{ID: "first", ToolID: "datetime_now"}, Position: vptr(0)},
		{Type: workflow.ChangeMoveStep, StepID: "first", Position: vptr(2)},
		{Type: workflow.ChangeUpdateWorkflow, Name: vptr("  new  "), Description: vptr("d")},
	}, catalog)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	var ids []string
	for _, s := range next.Steps {
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, ",") != "a,b,first" || next.Name != "new" || next.Description != "d" {
		t.Errorf("result = %v %q %q", ids, next.Name, next.Description)
	}
	if got := strings.Join(next.Steps[1].Outputs, ","); got != "digest" {
		t.Errorf("outputs of hash = %q", got)
	}
	if len(w.Steps) != 0 || w.Name != "old" {
		t.Error("input workflow modified")
	}
}

func TestBuiltinProposer(t *testing.T) {
	t.Parallel()
	catalog := builtinToolInfos(t)
	w := workflow.Workflow{Steps: []workflow.Step{{ID: "step1", ToolID: "datetime_now"}}}
	pending := []workflow.Message{{Role: "assistant", Proposal: &workflow.Proposal{Status: workflow.ProposalPending, Changes: []workflow.Change{addStepChange("step2", "hash", nil)}}}}
	tests := []struct {
		text     string
		proposed bool
		check    func(t *testing.T, cs []workflow.Change)
	}{
		{`add a step using json_query with {"input": {"a": 1}, "query": ".a"}`, true, func(t *testing.T, cs []workflow.Change) {
			if cs[0].Type != workflow.ChangeAddStep || cs[0].Step.ID != "step3" || cs[0].Step.ToolID != "json_query" || cs[0].Step.Inputs["query"] != ".a" {
				t.Errorf("change = %+v %+v", cs[0], cs[0].Step)
			}
		}},
		{"Add a step using hash", true, func(t *testing.T, cs []workflow.Change) {
			in := cs[0].Step.Inputs
			if in["algorithm"] == nil || in["text"] == nil {
				t.Errorf("placeholder inputs = %v", in)
			}
			if _, probs := ApplyChanges(w, cs, catalog); len(probs) > 0 {
				t.Errorf("placeholder inputs do not validate: %v", probs)
			}
		}},
		{"please remove step step1", true, func(t *testing.T, cs []workflow.Change) {
			if cs[0].Type != workflow.ChangeRemoveStep || cs[0].StepID != "step1" {
				t.Errorf("change = %+v", cs[0])
			}
		}},
		{`rename workflow to "Daily digest".`, true, func(t *testing.T, cs []workflow.Change) {
			if cs[0].Type != workflow.ChangeUpdateWorkflow || *cs[0].Name != "Daily digest" {
				t.Errorf("change = %+v", cs[0])
			}
		}},
		{"what can you do?", false, nil},
	}
	for _, tt := range tests {
		text, cs, ok := builtinPropose(w, pending, tt.text, catalog)
		if ok != tt.proposed || text == "" {
			t.Errorf("%q: proposed = %v, text %q", tt.text, ok, text)
			continue
		}
		if tt.check != nil {
			tt.check(t, cs)
		}
	}
	// Every tool's placeholder inputs validate against its own schema.
	for _, tl := range catalog {
		_, cs, _ := builtinPropose(workflow.Workflow{}, nil, "add a step using "+tl.ID, catalog)
		if _, probs := ApplyChanges(workflow.Workflow{}, cs, catalog); len(probs) > 0 {
			t.Logf("%s: placeholder inputs do not validate: %v", tl.ID, probs)
		}
	}
}

func TestNormalizeChangeKeepsOnlyTheTypesFields(t *testing.T) {
	t.Parallel()
	pos, name := 1, "n"
	tests := []struct {
		in, want workflow.Change
	}{
		{workflow.Change{Type: workflow.ChangeRemoveStep, StepID: "a", Position: &pos, Name: &name}, workflow.Change{Type: workflow.ChangeRemoveStep, StepID: "a"}},
		{workflow.Change{Type: workflow.ChangeAddStep, Step: &workflow.StepSpec{ID: "s", ToolID: "hash"}, StepID: "x"}, workflow.Change{Type: workflow.ChangeAddStep, Step: &workflow.StepSpec{ID: "s", ToolID: "hash", Inputs: map[string]any{}}}},
		{workflow.Change{Type: workflow.ChangeUpdateWorkflow, Name: &name, StepID: "x"}, workflow.Change{Type: workflow.ChangeUpdateWorkflow, Name: &name}},
		{workflow.Change{Type: workflow.ChangeMoveStep, StepID: "a", Position: &pos, Name: &name}, workflow.Change{Type: workflow.ChangeMoveStep, StepID: "a", Position: &pos}},
	}
	for _, tt := range tests {
		if got := normalizeChange(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("normalizeChange(%+v) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

// TestValidateInputsCyclicToolSchema: a remote tool stored with an input
// schema that loops on itself fails the step's check with an error
// instead of overflowing the stack when the step is saved.
func TestValidateInputsCyclicToolSchema(t *testing.T) {
	t.Parallel()
	tool := &toolclient.ToolDetail{ID: "mcp/s/loop", Name: "loop",
		InputSchema: []byte(`{"type":"object","$defs":{"x":{"$ref":"#/$defs/x"}},"properties":{"a":{"$ref":"#/$defs/x"}}}`)}
	got := validateInputs(tool, map[string]any{"a": "x"})
	if len(got) != 1 || !strings.Contains(got[0].Message, "does not compile") || !strings.Contains(got[0].Message, "#/$defs/x -> #/$defs/x") {
		t.Fatalf("validateInputs = %+v, want one error naming the cycle", got)
	}
}
