// Package proposal is the workflow chat: a user's message, the assistant's
// reply (a model, or the built-in proposer) with a proposal of changes,
// checked against the tool catalog (ApplyChanges: step ids, tools, inputs
// against each tool's JSON Schema, references to earlier outputs), and
// applying or rejecting it.
package proposal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/workflow"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/workflowchat/service/shared/errs"
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
//     inputs match the tool's input schema (JSON Schema, jsonschema/v6),
//     where a template stands in for a value that is only known at run
//     time: an input that is exactly one template ({{s.o}}) may be of any
//     type, so every schema error at or below its location is ignored; a
//     string with templates inside it is still a string (type errors
//     count) but its content is unknown (other errors there are ignored);
//   - every template of every step (not only the changed ones, since a
//     removal or a move can break another step's reference) names an
//     earlier step and an output that step's tool declares.

// CodeInvalidProposal is the code of a proposal whose changes do not
// validate.
const CodeInvalidProposal = "INVALID_PROPOSAL"

// ApplyChanges returns w with changes applied (steps, name, description;
// each step's Outputs set from its tool), and the problems found; the
// result is meaningful only when there are none. w is not modified.
func ApplyChanges(w workflow.Workflow, changes []workflow.Change, tools []toolclient.ToolDetail) (workflow.Workflow, []errs.FieldError) {
	byID := make(map[string]*toolclient.ToolDetail, len(tools))
	for i := range tools {
		byID[tools[i].ID] = &tools[i]
	}
	var probs errs.FieldErrors
	steps := make([]workflow.Step, 0, len(w.Steps)+len(changes))
	for _, s := range w.Steps {
		s.Inputs = cloneInputs(s.Inputs)
		steps = append(steps, s)
	}
	index := func(id string) int {
		return slices.IndexFunc(steps, func(s workflow.Step) bool { return s.ID == id })
	}
	touched := map[string]string{} // step id -> field prefix of the change that last touched it
	for i, c := range changes {
		at := fmt.Sprintf("changes[%d]", i)
		switch c.Type {
		case workflow.ChangeAddStep:
			if c.Step == nil {
				probs.Add(at+".step", "is required for add_step")
				continue
			}
			sp := *c.Step
			ok := true
			if !workflow.ValidIdent(sp.ID) {
				probs.Add(at+".step.id", "%q is not a valid step id (letters, digits and _, starting with a letter, at most 64)", sp.ID)
				ok = false
			} else if index(sp.ID) >= 0 {
				probs.Add(at+".step.id", "a step with id %q already exists", sp.ID)
				ok = false
			}
			tool := byID[sp.ToolID]
			if tool == nil {
				probs.Add(at+".step.toolId", "unknown tool %q", sp.ToolID)
				ok = false
			}
			pos := len(steps)
			if c.Position != nil {
				if *c.Position < 0 || *c.Position > len(steps) {
					probs.Add(at+".position", "must be from 0 to %d", len(steps))
					ok = false
				} else {
					pos = *c.Position
				}
			}
			if !ok {
				continue
			}
			inputs := cloneInputs(sp.Inputs)
			if inputs == nil {
				inputs = map[string]any{}
			}
			steps = slices.Insert(steps, pos, workflow.Step{ID: sp.ID, ToolID: sp.ToolID, Inputs: inputs, Outputs: slices.Clone(tool.Outputs)})
			touched[sp.ID] = at + ".step"
		case workflow.ChangeUpdateStep:
			j := index(c.StepID)
			if j < 0 {
				probs.Add(at+".stepId", "no step with id %q", c.StepID)
				continue
			}
			if c.ToolID == nil && c.Inputs == nil {
				probs.Add(at, "update_step needs toolId or inputs")
				continue
			}
			if c.ToolID != nil {
				tool := byID[*c.ToolID]
				if tool == nil {
					probs.Add(at+".toolId", "unknown tool %q", *c.ToolID)
					continue
				}
				steps[j].ToolID = tool.ID
				steps[j].Outputs = slices.Clone(tool.Outputs)
			}
			if c.Inputs != nil {
				steps[j].Inputs = cloneInputs(*c.Inputs)
				if steps[j].Inputs == nil {
					steps[j].Inputs = map[string]any{}
				}
			}
			touched[c.StepID] = at
		case workflow.ChangeRemoveStep:
			j := index(c.StepID)
			if j < 0 {
				probs.Add(at+".stepId", "no step with id %q", c.StepID)
				continue
			}
			steps = slices.Delete(steps, j, j+1)
			delete(touched, c.StepID)
		case workflow.ChangeMoveStep:
			j := index(c.StepID)
			if j < 0 {
				probs.Add(at+".stepId", "no step with id %q", c.StepID)
				continue
			}
			if c.Position == nil || *c.Position < 0 || *c.Position >= len(steps) {
				probs.Add(at+".position", "is required, from 0 to %d", len(steps)-1)
				continue
			}
			s := steps[j]
			steps = slices.Delete(steps, j, j+1)
			steps = slices.Insert(steps, *c.Position, s)
		case workflow.ChangeUpdateWorkflow:
			if c.Name == nil && c.Description == nil {
				probs.Add(at, "update_workflow needs name or description")
				continue
			}
			n := len(probs)
			if c.Name != nil {
				workflow.ValidateName(&probs, at+".name", c.Name)
			}
			workflow.ValidateDescription(&probs, at+".description", c.Description)
			if len(probs) > n {
				continue
			}
			if c.Name != nil {
				w.Name = strings.TrimSpace(*c.Name)
			}
			if c.Description != nil {
				w.Description = *c.Description
			}
		default:
			probs.Add(at+".type", "unknown change type %q (one of add_step, update_step, remove_step, move_step, update_workflow)", c.Type)
		}
	}
	if len(steps) > workflow.MaxSteps {
		probs.Add("steps", "a workflow has at most %d steps", workflow.MaxSteps)
	}
	for j := range steps {
		if tool := byID[steps[j].ToolID]; tool != nil {
			steps[j].Outputs = slices.Clone(tool.Outputs) // outputs follow the tool's current schema
		}
	}
	for j, s := range steps {
		at, changed := touched[s.ID]
		if !changed {
			at = "steps[" + s.ID + "]"
		}
		if changed {
			if tool := byID[s.ToolID]; tool == nil {
				probs.Add(at+".toolId", "unknown tool %q", s.ToolID)
			} else {
				for _, fe := range validateInputs(tool, s.Inputs) {
					probs.Add(joinField(at+".inputs", fe.Field), "%s", fe.Message)
				}
			}
		}
		for _, r := range workflow.Refs(s.Inputs) {
			k := slices.IndexFunc(steps, func(e workflow.Step) bool { return e.ID == r.StepID })
			switch {
			case k < 0:
				probs.Add(at+".inputs", "%s refers to step %q, which does not exist", r, r.StepID)
			case k >= j:
				probs.Add(at+".inputs", "%s refers to step %q, which is not an earlier step", r, r.StepID)
			default:
				outs := steps[k].Outputs
				if !slices.Contains(outs, r.Output) {
					probs.Add(at+".inputs", "%s: step %q (tool %s) has no output %q (outputs: %s)", r, r.StepID, steps[k].ToolID, r.Output, strings.Join(outs, ", "))
				}
			}
		}
	}
	w.Steps = steps
	return w, slices.Compact(probs)
}

// proposalError is the error of a proposal whose changes do not validate.
func proposalError(op, code, msg string, probs []errs.FieldError) *errs.Error {
	kindOf := errs.Invalid
	if code == workflow.CodeProposalConflict {
		kindOf = errs.Conflict
	}
	return &errs.Error{Op: op, Kind: kindOf, Code: code, Message: msg + ": " + summarize(probs), Details: probs}
}

// summarize joins up to three problems into one sentence.
func summarize(probs []errs.FieldError) string {
	var b strings.Builder
	for i, p := range probs {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(probs)-3)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Field + ": " + p.Message)
	}
	return b.String()
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
	schema *jsonschema.Schema
	err    error
}

type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %q is not allowed", url)
}

func inputSchema(t *toolclient.ToolDetail) (*jsonschema.Schema, error) {
	raw := bytes.TrimSpace(t.InputSchema)
	if len(raw) == 0 {
		return nil, nil
	}
	if v, ok := compiled.Load(string(raw)); ok {
		c := v.(compiledSchema)
		return c.schema, c.err
	}
	var c compiledSchema
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err == nil {
		comp := jsonschema.NewCompiler()
		comp.DefaultDraft(jsonschema.Draft2020)
		comp.UseLoader(refusingLoader{})
		loc := "tool:" + t.ID + ".input.json"
		if err = comp.AddResource(loc, doc); err == nil {
			c.schema, err = comp.Compile(loc)
		}
	}
	c.err = err
	compiled.Store(string(raw), c)
	return c.schema, c.err
}

// validateInputs checks inputs against t's input schema, leniently where
// templates stand (see the package rules above). Fields are JSON-pointer
// paths without the leading slash.
func validateInputs(t *toolclient.ToolDetail, inputs map[string]any) []errs.FieldError {
	schema, err := inputSchema(t)
	if err != nil {
		return []errs.FieldError{{Message: "the tool's input schema does not compile: " + err.Error()}}
	}
	if schema == nil {
		return nil
	}
	b, err := json.Marshal(inputs)
	if err != nil {
		return []errs.FieldError{{Message: "inputs are not JSON"}}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return []errs.FieldError{{Message: "inputs are not JSON"}}
	}
	exact, interp := map[string]bool{}, map[string]bool{}
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		switch x := v.(type) {
		case string:
			if _, ok := workflow.IsExactTemplate(x); ok {
				exact[strings.Join(path, "/")] = true
			} else if len(workflow.Refs(x)) > 0 {
				interp[strings.Join(path, "/")] = true
			}
		case map[string]any:
			for k, e := range x {
				walk(e, append(slices.Clip(path), k))
			}
		case []any:
			for i, e := range x {
				walk(e, append(slices.Clip(path), fmt.Sprint(i)))
			}
		}
	}
	walk(inst, nil)
	err = schema.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []errs.FieldError{{Message: err.Error()}}
	}
	p := message.NewPrinter(language.English)
	var out []errs.FieldError
	var leaves func(e *jsonschema.ValidationError)
	leaves = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				leaves(c)
			}
			return
		}
		loc := e.InstanceLocation
		for i := 0; i <= len(loc); i++ {
			if exact[strings.Join(loc[:i], "/")] {
				return
			}
		}
		if _, isType := e.ErrorKind.(*kind.Type); interp[strings.Join(loc, "/")] && !isType {
			return
		}
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, m := range k.Missing {
				out = append(out, errs.FieldError{Field: strings.Join(append(slices.Clip(loc), m), "/"), Message: "is required"})
			}
		case *kind.AdditionalProperties:
			for _, m := range k.Properties {
				out = append(out, errs.FieldError{Field: strings.Join(append(slices.Clip(loc), m), "/"), Message: "is not an input of this tool"})
			}
		default:
			out = append(out, errs.FieldError{Field: strings.Join(loc, "/"), Message: e.ErrorKind.LocalizedString(p)})
		}
	}
	leaves(ve)
	slices.SortFunc(out, func(a, b errs.FieldError) int { return strings.Compare(a.Field+a.Message, b.Field+b.Message) })
	return slices.Compact(out)
}
