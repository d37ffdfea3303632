package proposal

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/workflowchat/service/shared/agent"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/condition"
	"github.com/workflowchat/service/shared/workflow/inputschema"
)

// ValidateDefinition checks a whole definition, as a direct edit (PATCH
// or create with steps or inputSchema) gives it: the steps replace the
// workflow's, each validated as an added step is (its id, its tool, its
// inputs against the tool's schema, its templates and its control), and
// the inputSchema is checked. It returns w with each step's Outputs set
// (from its tool, or results for a forEach step) and the input schema in
// compact form, and the problems, named "steps[<index>]...",
// "inputSchema" and "steps"; the result is meaningful only when there
// are none. w is not modified.
func ValidateDefinition(w workflow.Workflow, tools []toolclient.ToolDetail) (workflow.Workflow, []errs.FieldError) {
	steps := w.Steps
	w.Steps = nil
	e := newEdit(w, tools)
	if len(w.InputSchema) > 0 {
		e.setInputSchema("inputSchema", w.InputSchema)
	}
	seen := map[string]bool{}
	for i, s := range steps {
		at := fmt.Sprintf("steps[%d]", i)
		ok := true
		switch {
		case !workflow.ValidIdent(s.ID):
			e.probs.Add(at+".id", "%q is not a valid step id (letters, digits and _, starting with a letter, at most 64)", s.ID)
			ok = false
		case workflow.ReservedStepID(s.ID):
			e.probs.Add(at+".id", "%q is reserved for templates ({{input.name}}, {{item}}); choose another step id", s.ID)
			ok = false
		case seen[s.ID]:
			e.probs.Add(at+".id", "a step with id %q comes earlier", s.ID)
			ok = false
		}
		seen[s.ID] = true
		tool := e.tools[s.ToolID]
		if tool == nil {
			e.probs.Add(at+".toolId", "unknown tool %q", s.ToolID)
			ok = false
		}
		if !ok {
			continue
		}
		s.Inputs = cloneInputs(s.Inputs)
		if s.Inputs == nil {
			s.Inputs = map[string]any{}
		}
		s.Concurrency = cloneInt(s.Concurrency)
		s.Outputs = slices.Clone(tool.Outputs)
		e.steps = append(e.steps, s)
		e.touched[s.ID] = at
	}
	e.check()
	e.w.Steps = e.steps
	if e.w.Steps == nil {
		e.w.Steps = []workflow.Step{}
	}
	return e.w, slices.Compact(e.probs)
}

// Definitions checks direct edits against the tool catalog: it
// implements workflow.Definitions for the workflow service.
type Definitions struct {
	Catalog Catalog
}

// CheckDefinition runs ValidateDefinition against the catalog. Errors:
// the catalog's (TOOLS_UNAVAILABLE).
func (d Definitions) CheckDefinition(ctx context.Context, w workflow.Workflow) (workflow.Workflow, []errs.FieldError, error) {
	tools, err := d.Catalog.Details(ctx)
	if err != nil {
		return workflow.Workflow{}, nil, errs.Wrap("proposal.CheckDefinition", err)
	}
	next, probs := ValidateDefinition(w, tools)
	return next, probs, nil
}

// setInputSchema checks raw as the workflow's new input schema (JSON null
// removes it) and records it, reporting a problem under at; it reports
// whether the schema was taken.
func (e *edit) setInputSchema(at string, raw json.RawMessage) bool {
	e.schemaAt = at
	if string(raw) == "null" {
		e.w.InputSchema, e.props = nil, nil
		return true
	}
	s, err := inputschema.Check(raw)
	if err != nil {
		e.probs.Add(at, "%s", err.Error())
		e.props = map[string][]string{} // references to input are checked against no properties
		return false
	}
	e.w.InputSchema, e.props = s.JSON(), s.Properties()
	return true
}

// loadInputSchema reads the properties of the workflow's own input
// schema, which was checked when it was written.
func (e *edit) loadInputSchema() {
	if len(e.w.InputSchema) == 0 {
		return
	}
	if s, err := inputschema.Check(e.w.InputSchema); err == nil {
		e.props = s.Properties()
	} else {
		e.probs.Add("inputSchema", "%s", err.Error())
		e.props = map[string][]string{}
	}
}

// inputProblem says what is wrong with reading input property name, ""
// when nothing is.
func (e *edit) inputProblem(name string) string {
	switch {
	case e.props == nil:
		return "the workflow has no inputSchema (add one with the property " + name + ")"
	case e.props[name] == nil && !hasKey(e.props, name):
		return fmt.Sprintf("the inputSchema has no property %q (properties: %s)", name, strings.Join(slices.Sorted(maps.Keys(e.props)), ", "))
	}
	return ""
}

func hasKey(m map[string][]string, k string) bool { _, ok := m[k]; return ok }

// outputProblem says what is wrong with reading output name of the step
// at k, "" when nothing is.
func (e *edit) outputProblem(k int, name string) string {
	outs := e.steps[k].Outputs
	if slices.Contains(outs, name) || (e.steps[k].ToolID == workflow.RunWorkflowToolID && e.steps[k].ForEach == "") {
		return "" // a child run's output is its last step's, whatever the child workflow's steps are then
	}
	what := "tool " + e.steps[k].ToolID
	if e.steps[k].ForEach != "" {
		what = "a forEach step"
	}
	return fmt.Sprintf("step %q (%s) has no output %q (outputs: %s)", e.steps[k].ID, what, name, strings.Join(outs, ", "))
}

// checkControl checks step s's control fields: concurrency, forEach and
// if, and that a human step is not a forEach step.
func (e *edit) checkControl(at string, j int, s workflow.Step) {
	if c := s.Concurrency; c != nil {
		switch {
		case s.ForEach == "":
			e.probs.Add(at+".concurrency", "applies only to a step with forEach")
		case *c < 1 || *c > workflow.MaxConcurrency:
			e.probs.Add(at+".concurrency", "must be from 1 to %d (default %d)", workflow.MaxConcurrency, workflow.DefaultConcurrency)
		}
	}
	if s.ForEach != "" {
		e.checkForEach(at+".forEach", j, s)
	}
	e.checkRetry(at, s)
	if s.If != "" {
		env := condition.Env{Input: e.props, Steps: map[string]map[string][]string{}}
		for _, earlier := range e.steps[:j] {
			env.Steps[earlier.ID] = e.outputTypes(earlier)
		}
		if err := condition.Check(s.If, env); err != nil {
			e.probs.Add(at+".if", "%s", err.Error())
		}
	}
}

// checkForEach checks that forEach is exactly one template naming an
// array: an earlier step's output or an input property, whose type, when
// known, allows an array.
func (e *edit) checkForEach(at string, j int, s workflow.Step) {
	r, ok := workflow.IsExactTemplate(strings.TrimSpace(s.ForEach))
	switch {
	case !ok:
		e.probs.Add(at, "must be exactly one template naming an array, such as {{step1.rows}} or {{input.items}}")
		return
	case r.IsItem():
		e.probs.Add(at, "cannot be %s: forEach steps do not nest", r)
		return
	case s.ToolID == workflow.AskHumanToolID:
		e.probs.Add(at, "%s asks once: it cannot run in a forEach step", workflow.AskHumanToolID)
		return
	case s.ToolID == workflow.RunWorkflowToolID:
		e.probs.Add(at, "%s starts one child run: it cannot run in a forEach step", workflow.RunWorkflowToolID)
		return
	}
	var types []string
	if r.IsInput() {
		if msg := e.inputProblem(r.Output); msg != "" {
			e.probs.Add(at, "%s: %s", r, msg)
			return
		}
		types = e.props[r.Output]
	} else {
		k := e.index(r.StepID)
		switch {
		case k < 0:
			e.probs.Add(at, "%s refers to step %q, which does not exist", r, r.StepID)
			return
		case k >= j:
			e.probs.Add(at, "%s refers to step %q, which is not an earlier step", r, r.StepID)
			return
		}
		if msg := e.outputProblem(k, r.Output); msg != "" {
			e.probs.Add(at, "%s: %s", r, msg)
			return
		}
		types = e.outputTypes(e.steps[k])[r.Output]
	}
	if len(types) > 0 && !slices.Contains(types, "array") {
		named := make([]string, len(types))
		for i, t := range types {
			named[i] = withArticle(t)
		}
		e.probs.Add(at, "%s is %s, not an array", r, strings.Join(named, " or "))
	}
}

// checkToolInputs checks what a tool's schema cannot say about its
// inputs: a literal inputSchema of ask_human must be an object schema,
// and each literal tool id an agent step lists must name a tool of the
// catalog that an agent may call (not one only the run engine carries
// out: agent.StepOnly).
func (e *edit) checkToolInputs(at string, s workflow.Step) {
	if s.ToolID == agent.ID {
		e.checkAgentTools(at, s)
		return
	}
	if s.ToolID != workflow.AskHumanToolID {
		return
	}
	v, ok := s.Inputs["inputSchema"].(map[string]any)
	if !ok {
		return // absent, a template, or a type the tool's schema refused
	}
	raw, err := json.Marshal(v)
	if err == nil {
		_, err = inputschema.Check(raw)
	}
	if err != nil {
		e.probs.Add(at+".inputs.inputSchema", "%s", err.Error())
	}
}

// checkAgentTools checks the literal ids of agent step s's toolIds (a
// templated one is read when the step runs).
func (e *edit) checkAgentTools(at string, s workflow.Step) {
	list, ok := s.Inputs[agent.FieldToolIDs].([]any)
	if !ok {
		return // absent, a template, or a type the tool's schema refused
	}
	for i, v := range list {
		id, ok := v.(string)
		if !ok || strings.Contains(id, "{{") {
			continue
		}
		field := fmt.Sprintf("%s.inputs.%s[%d]", at, agent.FieldToolIDs, i)
		switch {
		case agent.IsStepOnly(id):
			e.probs.Add(field, "%s runs only as a workflow step; an agent cannot call it", id)
		case e.tools[id] == nil:
			e.probs.Add(field, "unknown tool %q", id)
		}
	}
}

// outputTypes returns the JSON types of step s's outputs: results, an
// array, for a forEach step; else what its tool's output schema says.
func (e *edit) outputTypes(s workflow.Step) map[string][]string {
	if s.ForEach != "" {
		return map[string][]string{workflow.ForEachOutput: {"array"}}
	}
	if e.outputTypeCache == nil {
		e.outputTypeCache = map[string]map[string][]string{}
	}
	if t, ok := e.outputTypeCache[s.ToolID]; ok {
		return t
	}
	types := map[string][]string{}
	if tool := e.tools[s.ToolID]; tool != nil {
		var schema struct {
			Properties map[string]struct {
				Type json.RawMessage `json:"type"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(tool.OutputSchema, &schema)
		for _, name := range tool.Outputs {
			types[name] = jsonTypes(schema.Properties[name].Type)
		}
	}
	e.outputTypeCache[s.ToolID] = types
	return types
}

// jsonTypes reads a schema's "type": one name or a list; nil when absent
// or malformed.
func jsonTypes(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil && one != "" {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return many
	}
	return nil
}

func withArticle(jsonType string) string {
	if strings.ContainsAny(jsonType[:min(1, len(jsonType))], "aeiou") {
		return "an " + jsonType
	}
	return "a " + jsonType
}

func cloneInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
