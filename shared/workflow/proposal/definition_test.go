package proposal

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/workflow"
)

// defBase is a workflow with an input schema and three steps: a CSV parse
// of the input's text, a hash and a forEach over the rows.
func defBase() workflow.Workflow {
	return workflow.Workflow{ID: "w", Name: "n", Version: 2,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"items":{"type":"array"},"n":{"type":"integer"},"file":{"type":"string","format":"attachment"}},"required":["text"]}`),
		Steps: []workflow.Step{
			{ID: "csv", ToolID: "csv_parse", Inputs: map[string]any{"text": "{{input.text}}"}},
			{ID: "h", ToolID: "hash", Inputs: map[string]any{"text": "{{input.file}}", "algorithm": "sha256"}},
			{ID: "each", ToolID: "json_query", Inputs: map[string]any{"input": "{{item}}", "query": ".name"}, ForEach: "{{csv.rows}}"},
		}}
}

func steps(ss ...workflow.Step) []workflow.Step { return ss }

// TestValidateDefinition covers every bad input of a direct edit (PATCH
// steps and inputSchema), each named by its field.
func TestValidateDefinition(t *testing.T) {
	t.Parallel()
	catalog := builtinToolInfos(t)
	hash := func(id, text string) workflow.Step {
		return workflow.Step{ID: id, ToolID: "hash", Inputs: map[string]any{"text": text, "algorithm": "md5"}}
	}
	with := func(s workflow.Step, f func(*workflow.Step)) workflow.Step { f(&s); return s }
	base := defBase()
	tests := []struct {
		name   string
		schema json.RawMessage // nil: base's
		steps  []workflow.Step // nil: base's
		field  string          // the problem's field; "" means valid
		msg    string          // substring of its message
	}{
		{"valid base", nil, nil, "", ""},
		{"no steps", nil, steps(), "", ""},
		{"if over an earlier output", nil, append(base.Steps, with(hash("x", "a"), func(s *workflow.Step) { s.If = `h.digest != "" and len(each.results) > 0` })), "", ""},
		{"if over the input", nil, append(base.Steps, with(hash("x", "a"), func(s *workflow.Step) { s.If = "input.n > 3" })), "", ""},
		{"forEach over an input array", nil, steps(with(hash("x", "{{item}}"), func(s *workflow.Step) { s.ForEach = "{{input.items}}"; s.Concurrency = vptr(16) })), "", ""},
		{"item field in forEach", nil, steps(with(hash("x", "n: {{item.name}}"), func(s *workflow.Step) { s.ForEach = "{{ input.items }}" })), "", ""},
		{"continueOnError", nil, steps(with(hash("x", "a"), func(s *workflow.Step) { s.ContinueOnError = true })), "", ""},
		{"results of a forEach step", nil, append(base.Steps, workflow.Step{ID: "all", ToolID: "json_query", Inputs: map[string]any{"input": "{{each.results}}", "query": "length"}}), "", ""},
		{"ask_human with a values schema", nil, steps(workflow.Step{ID: "ok", ToolID: "ask_human", Inputs: map[string]any{"message": "Go?", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"note": map[string]any{"type": "string"}}}}}), "", ""},
		{"ask_human then if", nil, steps(workflow.Step{ID: "ok", ToolID: "ask_human", Inputs: map[string]any{"message": "Go?"}}, with(hash("x", "{{ok.values}}"), func(s *workflow.Step) { s.If = "ok.approved" })), "", ""},

		{"if does not compile", nil, append(base.Steps, with(hash("x", "a"), func(s *workflow.Step) { s.If = "h.digest ==" })), "steps[3].if", "unexpected"},
		{"if names a later step", nil, steps(with(hash("x", "a"), func(s *workflow.Step) { s.If = "y.digest == 1" }), hash("y", "b")), "steps[0].if", "unknown name y"},
		{"if names a missing output", nil, append(base.Steps, with(hash("x", "a"), func(s *workflow.Step) { s.If = "h.nope == 1" })), "steps[3].if", `no output "nope"`},
		{"if over a missing input", nil, steps(with(hash("x", "a"), func(s *workflow.Step) { s.If = "input.nope == 1" })), "steps[0].if", `no property "nope"`},
		{"if not a boolean", nil, steps(with(hash("x", "a"), func(s *workflow.Step) { s.If = "input.n + 1" })), "steps[0].if", "expected bool"},
		{"if with a loop", nil, steps(with(hash("x", "a"), func(s *workflow.Step) { s.If = "all(input.items, # > 1)" })), "steps[0].if", "not available"},
		{"forEach over a non-array output", nil, steps(base.Steps[0], base.Steps[1], with(hash("x", "{{item}}"), func(s *workflow.Step) { s.ForEach = "{{h.digest}}" })), "steps[2].forEach", "string, not an array"},
		{"forEach over a non-array input", nil, steps(with(hash("x", "{{item}}"), func(s *workflow.Step) { s.ForEach = "{{input.n}}" })), "steps[0].forEach", "integer, not an array"},
		{"forEach not one template", nil, steps(with(hash("x", "{{item}}"), func(s *workflow.Step) { s.ForEach = "rows: {{input.items}}" })), "steps[0].forEach", "exactly one template"},
		{"forEach over item", nil, steps(with(hash("x", "{{item}}"), func(s *workflow.Step) { s.ForEach = "{{item}}" })), "steps[0].forEach", "do not nest"},
		{"forEach over a later step", nil, steps(with(hash("x", "{{item}}"), func(s *workflow.Step) { s.ForEach = "{{y.digest}}" }), hash("y", "b")), "steps[0].forEach", "not an earlier step"},
		{"forEach over a missing input", nil, steps(with(hash("x", "{{item}}"), func(s *workflow.Step) { s.ForEach = "{{input.nope}}" })), "steps[0].forEach", `no property "nope"`},
		{"forEach of ask_human", nil, steps(workflow.Step{ID: "ok", ToolID: "ask_human", Inputs: map[string]any{"message": "{{item}}"}, ForEach: "{{input.items}}"}), "steps[0].forEach", "cannot run in a forEach step"},
		{"item outside forEach", nil, steps(hash("x", "{{item}}")), "steps[0].inputs", "only available in a step with forEach"},
		{"item field outside forEach", nil, steps(hash("x", "a {{item.name}}")), "steps[0].inputs", "only available in a step with forEach"},
		{"concurrency 0", nil, steps(with(hash("x", "{{item}}"), func(s *workflow.Step) { s.ForEach = "{{input.items}}"; s.Concurrency = vptr(0) })), "steps[0].concurrency", "from 1 to 16"},
		{"concurrency 17", nil, steps(with(hash("x", "{{item}}"), func(s *workflow.Step) { s.ForEach = "{{input.items}}"; s.Concurrency = vptr(17) })), "steps[0].concurrency", "from 1 to 16"},
		{"concurrency without forEach", nil, steps(with(hash("x", "a"), func(s *workflow.Step) { s.Concurrency = vptr(2) })), "steps[0].concurrency", "only to a step with forEach"},
		{"unknown input name", nil, steps(hash("x", "{{input.nope}}")), "steps[0].inputs", `no property "nope"`},
		{"input without a schema", json.RawMessage(`null`), steps(hash("x", "{{input.text}}")), "steps[0].inputs", "has no inputSchema"},
		{"forEach results only", nil, append(base.Steps, hash("x", "{{each.result}}")), "steps[3].inputs", `a forEach step) has no output "result"`},
		{"inputSchema not an object schema", json.RawMessage(`{"type":"array"}`), steps(), "inputSchema", `"type": "object"`},
		{"inputSchema not a schema", json.RawMessage(`{"type":"object","properties":{"a":{"type":"strin"}}}`), steps(), "inputSchema", "not a JSON type"},
		{"inputSchema too large", json.RawMessage(`{"type":"object","description":"` + strings.Repeat("d", 70000) + `"}`), steps(), "inputSchema", "at most 65536 bytes"},
		{"attachment not a string", json.RawMessage(`{"type":"object","properties":{"f":{"type":"number","format":"attachment"}}}`), steps(), "inputSchema", "attachment"},
		{"agent with tools", nil, steps(workflow.Step{ID: "a", ToolID: "agent", Inputs: map[string]any{"instructions": "x", "toolIds": []any{"hash", "json_query", "{{input.text}}"}}}), "", ""},
		{"agent given agent", nil, steps(workflow.Step{ID: "a", ToolID: "agent", Inputs: map[string]any{"instructions": "x", "toolIds": []any{"hash", "agent"}}}), "steps[0].inputs.toolIds[1]", "runs only as a workflow step"},
		{"agent given ask_human", nil, steps(workflow.Step{ID: "a", ToolID: "agent", Inputs: map[string]any{"instructions": "x", "toolIds": []any{"ask_human"}}}), "steps[0].inputs.toolIds[0]", "runs only as a workflow step"},
		{"agent given run_workflow", nil, steps(workflow.Step{ID: "a", ToolID: "agent", Inputs: map[string]any{"instructions": "x", "toolIds": []any{"run_workflow"}}}), "steps[0].inputs.toolIds[0]", "runs only as a workflow step"},
		{"agent given an unknown tool", nil, steps(workflow.Step{ID: "a", ToolID: "agent", Inputs: map[string]any{"instructions": "x", "toolIds": []any{"nope"}}}), "steps[0].inputs.toolIds[0]", `unknown tool "nope"`},
		{"ask_human bad values schema", nil, steps(workflow.Step{ID: "ok", ToolID: "ask_human", Inputs: map[string]any{"message": "Go?", "inputSchema": map[string]any{"type": "string"}}}), "steps[0].inputs.inputSchema", `"type": "object"`},
		{"reserved id input", nil, steps(hash("input", "a")), "steps[0].id", "reserved"},
		{"reserved id item", nil, steps(hash("item", "a")), "steps[0].id", "reserved"},
		{"bad id", nil, steps(hash("1x", "a")), "steps[0].id", "not a valid step id"},
		{"duplicate id", nil, steps(hash("x", "a"), hash("x", "b")), "steps[1].id", "comes earlier"},
		{"unknown tool", nil, steps(workflow.Step{ID: "x", ToolID: "nope"}), "steps[0].toolId", `unknown tool "nope"`},
		{"bad inputs", nil, steps(workflow.Step{ID: "x", ToolID: "hash", Inputs: map[string]any{"text": 1.0, "algorithm": "md5"}}), "steps[0].inputs.text", ""},
		{"missing input", nil, steps(workflow.Step{ID: "x", ToolID: "http_request", Inputs: map[string]any{}}), "steps[0].inputs.url", "is required"},
		{"too many steps", nil, func() []workflow.Step {
			var ss []workflow.Step
			for i := range workflow.MaxSteps + 1 {
				ss = append(ss, hash("s"+strings.Repeat("x", i), "a"))
			}
			return ss
		}(), "steps", "at most 50 steps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := defBase()
			if tt.schema != nil {
				w.InputSchema = tt.schema
			}
			if tt.steps != nil {
				w.Steps = tt.steps
			}
			before, _ := json.Marshal(w)
			got, probs := ValidateDefinition(w, catalog)
			if after, _ := json.Marshal(w); string(after) != string(before) {
				t.Fatal("ValidateDefinition modified its workflow")
			}
			if tt.field == "" {
				if len(probs) > 0 {
					t.Fatalf("unexpected problems: %+v", probs)
				}
				for _, s := range got.Steps {
					if len(s.Outputs) == 0 {
						t.Errorf("step %s has no outputs", s.ID)
					}
					if s.ForEach != "" && !slices.Equal(s.Outputs, []string{workflow.ForEachOutput}) {
						t.Errorf("forEach step %s has outputs %v, want [results]", s.ID, s.Outputs)
					}
				}
				return
			}
			if !hasProblem(probs, tt.field, tt.msg) {
				t.Fatalf("problems %s, want %s: ...%s...", summarizeAll(probs), tt.field, tt.msg)
			}
		})
	}
}

func hasProblem(probs []errs.FieldError, field, msg string) bool {
	for _, p := range probs {
		if p.Field == field && strings.Contains(p.Message, msg) {
			return true
		}
	}
	return false
}

// TestApplyChangesControl: proposals carry the control fields and
// inputSchema too, validated by the same rules, each problem under its
// change's field, and a removal or move that breaks an untouched step's
// if or forEach is caught under that step.
func TestApplyChangesControl(t *testing.T) {
	t.Parallel()
	catalog := builtinToolInfos(t)
	base, probs := ValidateDefinition(defBase(), catalog)
	if len(probs) > 0 {
		t.Fatalf("base: %+v", probs)
	}
	add := func(s workflow.StepSpec) workflow.Change {
		return workflow.Change{Type: workflow.ChangeAddStep, Step: &s}
	}
	hash := workflow.StepSpec{ID: "x", ToolID: "hash", Inputs: map[string]any{"text": "a", "algorithm": "md5"}}
	withIf := func(cond string) workflow.StepSpec { s := hash; s.If = cond; return s }
	tests := []struct {
		name    string
		changes []workflow.Change
		field   string // "" means valid
		msg     string
	}{
		{"add with if", []workflow.Change{add(withIf("h.digest != nil"))}, "", ""},
		{"add forEach", []workflow.Change{add(workflow.StepSpec{ID: "x", ToolID: "hash", Inputs: map[string]any{"text": "{{item.a}}", "algorithm": "md5"}, ForEach: "{{csv.rows}}", Concurrency: vptr(2), ContinueOnError: true})}, "", ""},
		{"update step control", []workflow.Change{{Type: workflow.ChangeUpdateStep, StepID: "each", Concurrency: vptr(8), ContinueOnError: vptr(true), If: vptr("input.n > 1")}}, "", ""},
		{"remove forEach and item", []workflow.Change{{Type: workflow.ChangeUpdateStep, StepID: "each", ForEach: vptr(""), Inputs: &map[string]any{"input": "{{csv.rows}}", "query": "."}}}, "", ""},
		{"update input schema", []workflow.Change{{Type: workflow.ChangeUpdateWorkflow, InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"file":{"type":"string"}}}`)}}, "", ""},
		{"add ask_human", []workflow.Change{add(workflow.StepSpec{ID: "ok", ToolID: "ask_human", Inputs: map[string]any{"message": "Proceed with {{h.digest}}?", "timeoutSeconds": 3600, "onTimeout": "continue"}})}, "", ""},

		{"add with bad if", []workflow.Change{add(withIf("h.digest >"))}, "changes[0].step.if", "unexpected"},
		{"update to bad if", []workflow.Change{{Type: workflow.ChangeUpdateStep, StepID: "h", If: vptr("ghost.x == 1")}}, "changes[0].if", "unknown name ghost"},
		{"update concurrency 17", []workflow.Change{{Type: workflow.ChangeUpdateStep, StepID: "each", Concurrency: vptr(17)}}, "changes[0].concurrency", "from 1 to 16"},
		{"remove forEach leaves item", []workflow.Change{{Type: workflow.ChangeUpdateStep, StepID: "each", ForEach: vptr("")}}, "changes[0].inputs", "only available in a step with forEach"},
		{"forEach over a string", []workflow.Change{{Type: workflow.ChangeUpdateStep, StepID: "each", ForEach: vptr("{{h.digest}}")}}, "changes[0].forEach", "not an array"},
		{"schema drops a used property", []workflow.Change{{Type: workflow.ChangeUpdateWorkflow, InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}}, "steps[h].inputs", `no property "file"`},
		{"schema removed", []workflow.Change{{Type: workflow.ChangeUpdateWorkflow, InputSchema: json.RawMessage(`null`)}}, "steps[csv].inputs", "no inputSchema"},
		{"bad schema", []workflow.Change{{Type: workflow.ChangeUpdateWorkflow, InputSchema: json.RawMessage(`{"type":"string"}`)}}, "changes[0].inputSchema", `"type": "object"`},
		{"remove breaks forEach", []workflow.Change{{Type: workflow.ChangeRemoveStep, StepID: "csv"}}, "steps[each].forEach", "does not exist"},
		{"move breaks if", []workflow.Change{add(withIf("h.digest != nil")), {Type: workflow.ChangeMoveStep, StepID: "x", Position: vptr(0)}}, "changes[0].step.if", "unknown name h"},
		{"reserved id", []workflow.Change{add(workflow.StepSpec{ID: "input", ToolID: "hash"})}, "changes[0].step.id", "reserved"},
		{"update_workflow empty", []workflow.Change{{Type: workflow.ChangeUpdateWorkflow}}, "changes[0]", "needs name, description or inputSchema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			next, probs := ApplyChanges(base, tt.changes, catalog)
			if tt.field == "" {
				if len(probs) > 0 {
					t.Fatalf("unexpected problems: %+v", probs)
				}
				if _, again := ValidateDefinition(next, catalog); len(again) > 0 {
					t.Fatalf("the result does not revalidate: %+v", again)
				}
				return
			}
			if !hasProblem(probs, tt.field, tt.msg) {
				t.Fatalf("problems %s, want %s: ...%s...", summarizeAll(probs), tt.field, tt.msg)
			}
		})
	}
}

// TestBuiltinProposesControlAndHumanSteps: the built-in assistant's "add a
// step using <tool> with {json}" rule resolves tools generically, so it
// proposes ask_human steps and steps reading {{input.x}}.
func TestBuiltinProposesControlAndHumanSteps(t *testing.T) {
	t.Parallel()
	catalog := builtinToolInfos(t)
	base, _ := ValidateDefinition(defBase(), catalog)
	for _, text := range []string{
		`add a step using ask_human with {"message": "Approve {{h.digest}}?", "timeoutSeconds": 86400}`,
		`add a step using hash with {"text": "{{input.text}}", "algorithm": "sha256"}`,
		"add a step using ask_human",
	} {
		reply, changes, ok := builtinPropose(base, nil, text, catalog)
		if !ok || len(changes) != 1 {
			t.Fatalf("%q: no proposal: %s", text, reply)
		}
		if _, probs := ApplyChanges(base, changes, catalog); len(probs) > 0 {
			t.Errorf("%q: the proposal does not validate: %+v", text, probs)
		}
	}
}

func TestProposeSchemaIsJSON(t *testing.T) {
	t.Parallel()
	var v map[string]any
	if err := json.Unmarshal(proposeSchema, &v); err != nil {
		t.Fatal(err)
	}
}
