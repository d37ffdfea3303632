// Package proposal is the workflow chat: a user's message, the assistant's
// reply (a model, or the built-in proposer) with a proposal of changes,
// checked against the tool catalog (ApplyChanges: step ids, tools, inputs
// against each tool's JSON Schema, references to earlier outputs), and
// applying or rejecting it.
package proposal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/schema"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/workflow"
)

// Proposal validation (docs/decisions.md, Workflows and runs). ApplyChanges applies a
// proposal's changes to a workflow and validates the result; it runs when
// a proposal is made (against the workflow the assistant saw) and again
// when it is applied (against the current workflow, which may have moved
// on: a rebase).
//
// Rules:
//   - every change is well formed for its type; step ids match
//     IdentPattern and are unique; positions are in range; at most
//     MaxSteps steps; name and description within their limits;
//   - every added or updated step names a tool of the catalog and its
//     inputs match the tool's input schema (JSON Schema, package schema),
//     where a template stands in for a value that is only known at run
//     time: an input that is exactly one template ({{s.o}}) may be of any
//     type, so every schema error at or below its location is ignored; a
//     string with templates inside it is still a string (type errors
//     count) but its content is unknown (other errors there are ignored);
//   - every template of every step (not only the changed ones, since a
//     removal or a move can break another step's reference) names an
//     earlier step and an output that step declares (a forEach step's is
//     results), an input property the inputSchema declares
//     ({{input.name}}), or, in a forEach step only, the element
//     ({{item}}, {{item.field}});
//   - every step's control (definition.go): concurrency 1-16 and only
//     with forEach; forEach exactly one template naming an array (an
//     earlier step's output or an input property; refused when the type
//     is known and not an array); if a condition over input and the
//     earlier steps (package condition); ask_human's own inputSchema a
//     valid object schema, and never in a forEach step;
//   - the workflow's inputSchema a valid object schema (package
//     inputschema).

// CodeInvalidProposal is the code of a proposal whose changes do not
// validate.
const CodeInvalidProposal = "INVALID_PROPOSAL"

// ApplyChanges returns w with changes applied (steps, name, description;
// each step's Outputs set from its tool), and the problems found; the
// result is meaningful only when there are none. w is not modified.
func ApplyChanges(w workflow.Workflow, changes []workflow.Change, tools []toolclient.ToolDetail) (workflow.Workflow, []errs.FieldError) {
	e := newEdit(w, tools)
	for i, c := range changes {
		e.apply(fmt.Sprintf("changes[%d]", i), c)
	}
	e.check()
	e.w.Steps = e.steps
	return e.w, slices.Compact(e.probs)
}

// edit is one run of ApplyChanges: the workflow being changed, its steps
// (copies), the catalog by tool id, the problems found so far, and which
// change last touched each step (its inputs are validated under that
// change's field).
type edit struct {
	w       workflow.Workflow
	steps   []workflow.Step
	tools   map[string]*toolclient.ToolDetail
	touched map[string]string // step id -> field prefix of the change that last touched it
	probs   errs.FieldErrors
	// schemaAt is the field of the change that last set the input schema
	// ("" while it is the workflow's own); props are its properties once
	// checked (nil: no input schema).
	schemaAt string
	props    map[string][]string
	// outputTypeCache holds each tool's outputs' JSON types.
	outputTypeCache map[string]map[string][]string
}

func newEdit(w workflow.Workflow, tools []toolclient.ToolDetail) *edit {
	e := &edit{w: w, tools: make(map[string]*toolclient.ToolDetail, len(tools)), touched: map[string]string{}}
	for i := range tools {
		e.tools[tools[i].ID] = &tools[i]
	}
	e.steps = make([]workflow.Step, 0, len(w.Steps))
	for _, s := range w.Steps {
		s.Inputs = cloneInputs(s.Inputs)
		e.steps = append(e.steps, s)
	}
	return e
}

// index returns the position of step id, -1 when there is none.
func (e *edit) index(id string) int {
	return slices.IndexFunc(e.steps, func(s workflow.Step) bool { return s.ID == id })
}

// existing returns the position of step id, or -1 after recording that
// there is none at field at.
func (e *edit) existing(at, id string) int {
	j := e.index(id)
	if j < 0 {
		e.probs.Add(at+".stepId", "no step with id %q", id)
	}
	return j
}

// apply applies one change, recording its problems under at; a change
// with problems leaves the steps as they were.
func (e *edit) apply(at string, c workflow.Change) {
	switch c.Type {
	case workflow.ChangeAddStep:
		e.addStep(at, c)
	case workflow.ChangeUpdateStep:
		e.updateStep(at, c)
	case workflow.ChangeRemoveStep:
		if j := e.existing(at, c.StepID); j >= 0 {
			e.steps = slices.Delete(e.steps, j, j+1)
			delete(e.touched, c.StepID)
		}
	case workflow.ChangeMoveStep:
		e.moveStep(at, c)
	case workflow.ChangeUpdateWorkflow:
		e.updateWorkflow(at, c)
	default:
		e.probs.Add(at+".type", "unknown change type %q (one of add_step, update_step, remove_step, move_step, update_workflow)", c.Type)
	}
}

func (e *edit) addStep(at string, c workflow.Change) {
	if c.Step == nil {
		e.probs.Add(at+".step", "is required for add_step")
		return
	}
	sp := *c.Step
	ok := true
	if !workflow.ValidIdent(sp.ID) {
		e.probs.Add(at+".step.id", "%q is not a valid step id (letters, digits and _, starting with a letter, at most 64)", sp.ID)
		ok = false
	} else if workflow.ReservedStepID(sp.ID) {
		e.probs.Add(at+".step.id", "%q is reserved for templates ({{input.name}}, {{item}}); choose another step id", sp.ID)
		ok = false
	} else if e.index(sp.ID) >= 0 {
		e.probs.Add(at+".step.id", "a step with id %q already exists", sp.ID)
		ok = false
	}
	tool := e.tools[sp.ToolID]
	if tool == nil {
		e.probs.Add(at+".step.toolId", "unknown tool %q", sp.ToolID)
		ok = false
	}
	pos := len(e.steps)
	if c.Position != nil {
		if *c.Position < 0 || *c.Position > len(e.steps) {
			e.probs.Add(at+".position", "must be from 0 to %d", len(e.steps))
			ok = false
		} else {
			pos = *c.Position
		}
	}
	if !ok {
		return
	}
	inputs := cloneInputs(sp.Inputs)
	if inputs == nil {
		inputs = map[string]any{}
	}
	e.steps = slices.Insert(e.steps, pos, workflow.Step{ID: sp.ID, ToolID: sp.ToolID, Inputs: inputs, If: sp.If, ForEach: sp.ForEach,
		Concurrency: cloneInt(sp.Concurrency), ContinueOnError: sp.ContinueOnError, Outputs: slices.Clone(tool.Outputs)})
	e.touched[sp.ID] = at + ".step"
}

func (e *edit) updateStep(at string, c workflow.Change) {
	j := e.existing(at, c.StepID)
	if j < 0 {
		return
	}
	if c.ToolID == nil && c.Inputs == nil && c.If == nil && c.ForEach == nil && c.Concurrency == nil && c.ContinueOnError == nil {
		e.probs.Add(at, "update_step needs toolId, inputs, if, forEach, concurrency or continueOnError")
		return
	}
	if c.ToolID != nil {
		tool := e.tools[*c.ToolID]
		if tool == nil {
			e.probs.Add(at+".toolId", "unknown tool %q", *c.ToolID)
			return
		}
		e.steps[j].ToolID = tool.ID
		e.steps[j].Outputs = slices.Clone(tool.Outputs)
	}
	if c.Inputs != nil {
		e.steps[j].Inputs = cloneInputs(*c.Inputs)
		if e.steps[j].Inputs == nil {
			e.steps[j].Inputs = map[string]any{}
		}
	}
	if c.If != nil {
		e.steps[j].If = *c.If
	}
	if c.ForEach != nil {
		e.steps[j].ForEach = *c.ForEach
		if *c.ForEach == "" {
			e.steps[j].Concurrency = nil
		}
	}
	if c.Concurrency != nil {
		e.steps[j].Concurrency = cloneInt(c.Concurrency)
	}
	if c.ContinueOnError != nil {
		e.steps[j].ContinueOnError = *c.ContinueOnError
	}
	e.touched[c.StepID] = at
}

func (e *edit) moveStep(at string, c workflow.Change) {
	j := e.existing(at, c.StepID)
	if j < 0 {
		return
	}
	if c.Position == nil || *c.Position < 0 || *c.Position >= len(e.steps) {
		e.probs.Add(at+".position", "is required, from 0 to %d", len(e.steps)-1)
		return
	}
	s := e.steps[j]
	e.steps = slices.Delete(e.steps, j, j+1)
	e.steps = slices.Insert(e.steps, *c.Position, s)
}

func (e *edit) updateWorkflow(at string, c workflow.Change) {
	if c.Name == nil && c.Description == nil && c.InputSchema == nil {
		e.probs.Add(at, "update_workflow needs name, description or inputSchema")
		return
	}
	n := len(e.probs)
	if c.Name != nil {
		workflow.ValidateName(&e.probs, at+".name", c.Name)
	}
	workflow.ValidateDescription(&e.probs, at+".description", c.Description)
	if len(e.probs) > n {
		return
	}
	if c.InputSchema != nil && !e.setInputSchema(at+".inputSchema", c.InputSchema) {
		return
	}
	if c.Name != nil {
		e.w.Name = strings.TrimSpace(*c.Name)
	}
	if c.Description != nil {
		e.w.Description = *c.Description
	}
}

// check validates the steps as the changes left them: their number, the
// inputs of every step a change touched against its tool's schema, and
// the references of every step (a removal or a move can break a step no
// change touched).
func (e *edit) check() {
	if len(e.steps) > workflow.MaxSteps {
		e.probs.Add("steps", "a workflow has at most %d steps", workflow.MaxSteps)
	}
	if e.schemaAt == "" {
		e.loadInputSchema()
	}
	for j := range e.steps {
		if e.steps[j].ForEach != "" {
			e.steps[j].Outputs = []string{workflow.ForEachOutput}
		} else if tool := e.tools[e.steps[j].ToolID]; tool != nil {
			e.steps[j].Outputs = slices.Clone(tool.Outputs) // outputs follow the tool's current schema
		}
		if e.steps[j].Outputs == nil {
			e.steps[j].Outputs = []string{} // run_workflow declares none: its child's last step decides
		}
	}
	for j, s := range e.steps {
		at, changed := e.touched[s.ID]
		if !changed {
			at = "steps[" + s.ID + "]"
		}
		if changed {
			e.checkInputs(at, s)
		}
		e.checkRefs(at, j, s)
		e.checkControl(at, j, s)
	}
}

// checkInputs validates the inputs of step s against its tool's schema.
func (e *edit) checkInputs(at string, s workflow.Step) {
	tool := e.tools[s.ToolID]
	if tool == nil {
		e.probs.Add(at+".toolId", "unknown tool %q", s.ToolID)
		return
	}
	for _, fe := range validateInputs(tool, s.Inputs) {
		e.probs.Add(joinField(at+".inputs", fe.Field), "%s", fe.Message)
	}
	e.checkToolInputs(at, s)
}

// checkRefs checks that every template of step s, at position j, names
// an earlier step and an output that step declares, a property of the
// input schema, or (in a forEach step) the element.
func (e *edit) checkRefs(at string, j int, s workflow.Step) {
	for _, r := range workflow.Refs(s.Inputs) {
		switch {
		case r.IsItem():
			if s.ForEach == "" {
				e.probs.Add(at+".inputs", "%s is only available in a step with forEach", r)
			}
			continue
		case r.IsInput():
			if msg := e.inputProblem(r.Output); msg != "" {
				e.probs.Add(at+".inputs", "%s: %s", r, msg)
			}
			continue
		}
		k := e.index(r.StepID)
		switch {
		case k < 0:
			e.probs.Add(at+".inputs", "%s refers to step %q, which does not exist", r, r.StepID)
		case k >= j:
			e.probs.Add(at+".inputs", "%s refers to step %q, which is not an earlier step", r, r.StepID)
		default:
			if msg := e.outputProblem(k, r.Output); msg != "" {
				e.probs.Add(at+".inputs", "%s: %s", r, msg)
			}
		}
	}
}

// proposalError is the error of a proposal whose changes do not validate.
func proposalError(op, code, msg string, probs []errs.FieldError) *errs.Error {
	kindOf := errs.Invalid
	if code == workflow.CodeProposalConflict {
		kindOf = errs.Conflict
	}
	return &errs.Error{Op: op, Kind: kindOf, Code: code, Message: msg + ": " + errs.Summarize(probs), Details: probs}
}

func joinField(prefix, field string) string {
	if field == "" {
		return prefix
	}
	return prefix + "." + strings.ReplaceAll(field, "/", ".")
}

func cloneInputs(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return m
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		return m
	}
	return out
}

// compiled caches compiled input schemas by their text.
var compiled sync.Map // string -> compiledSchema

type compiledSchema struct {
	schema *schema.Schema
	err    error
}

// inputSchema compiles t's input schema once per schema text; nil when
// the tool declares none.
func inputSchema(t *toolclient.ToolDetail) (*schema.Schema, error) {
	raw := bytes.TrimSpace(t.InputSchema)
	if len(raw) == 0 {
		return nil, nil
	}
	if v, ok := compiled.Load(string(raw)); ok {
		c := v.(compiledSchema)
		return c.schema, c.err
	}
	var c compiledSchema
	c.schema, c.err = schema.Compile(raw)
	compiled.Store(string(raw), c)
	return c.schema, c.err
}

// validateInputs checks inputs against t's input schema, leniently where
// templates stand (see the package rules above). Fields are JSON-pointer
// paths without the leading slash.
func validateInputs(t *toolclient.ToolDetail, inputs map[string]any) []errs.FieldError {
	sch, err := inputSchema(t)
	if err != nil {
		return []errs.FieldError{{Message: "the tool's input schema does not compile: " + err.Error()}}
	}
	if sch == nil {
		return nil
	}
	b, err := json.Marshal(inputs)
	if err != nil {
		return []errs.FieldError{{Message: "inputs are not JSON"}}
	}
	var inst any
	if err := json.Unmarshal(b, &inst); err != nil {
		return []errs.FieldError{{Message: "inputs are not JSON"}}
	}
	var out []errs.FieldError
	for _, p := range sch.ValidatePartial(inst, templateMode) {
		field := strings.Join(p.Path, "/")
		switch p.Keyword {
		case "required":
			out = append(out, errs.FieldError{Field: field, Message: "is required"})
		case "additionalProperties":
			out = append(out, errs.FieldError{Field: field, Message: "is not an input of this tool"})
		default:
			out = append(out, errs.FieldError{Field: field, Message: p.Message})
		}
	}
	slices.SortFunc(out, func(a, b errs.FieldError) int { return strings.Compare(a.Field+a.Message, b.Field+b.Message) })
	return slices.Compact(out)
}

// templateMode is how much of an input value is known before the run: an
// exact template ({{s.o}}) stands for any value; a string with templates
// inside is a string of unknown content.
func templateMode(_ []string, v any) schema.Mode {
	s, ok := v.(string)
	if !ok {
		return schema.Known
	}
	if _, exact := workflow.IsExactTemplate(s); exact {
		return schema.Unknown
	}
	if len(workflow.Refs(s)) > 0 {
		return schema.TypeOnly
	}
	return schema.Known
}
