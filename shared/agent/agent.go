// Package agent is the contract of the agent step: a workflow step in
// which a model, given instructions and a list of tools, calls those
// tools in a loop until it answers. Its id, input fields, bounds,
// defaults and output are declared here once: the tool catalog shows them
// as JSON Schemas (InputSchema, OutputSchema) and the step's runner
// (package agentstep) reads a step's inputs with Parse.
package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
)

// ID is the tool id of an agent step.
const ID = "agent"

// The input fields of an agent step.
const (
	FieldInstructions = "instructions"
	FieldInput        = "input"
	FieldModelID      = "modelId"
	FieldToolIDs      = "toolIds"
	FieldMaxTurns     = "maxTurns"
)

// Bounds of the inputs (docs/limits.md).
const (
	MaxInstructionsLen = 20_000
	MaxTools           = 32
	MinTurns           = 1
	MaxTurns           = 20
	DefaultTurns       = 8
	// MaxCalls bounds the tool calls of one step, whatever the turns:
	// a call past it is not run, and the model gets an error for it.
	MaxCalls = 50
	// MaxCallValue bounds a call's output as the model reads it and as
	// the step's toolCalls keep it (its JSON, in bytes): a longer output
	// is cut for the model and left out of toolCalls (outputTruncated).
	MaxCallValue = 32 << 10
)

// Description is the tool's description in the catalog.
var Description = "Workflow steps only: a language model follows instructions, calling the listed tools as it needs, until it answers without a tool call or has used maxTurns model turns (the last one is offered no tools). " +
	"Fields: instructions (what to do), input (any JSON value the model is given with the instructions, e.g. an earlier step's output), " +
	"modelId (optional model id from the model list; the deployment's default when omitted), toolIds (the ids of the tools it may call, from the tool list; not ask_human or agent), " +
	fmt.Sprintf("maxTurns (%d to %d, default %d). ", MinTurns, MaxTurns, DefaultTurns) +
	"Each call goes through the user's tool policies: a tool the policy denies, or one that asks for approval (no one is there to answer), is refused and the model is told so. Model turns and metered tools count against the token budget. " +
	"Outputs: text (the model's answer), turns (model turns used), toolCalls (each call's toolId, input, and output or error). " +
	`Example: {"instructions": "Find the price of b.", "input": {"items": [{"name": "b", "price": 1}]}, "toolIds": ["json_query"]}.`

// InputSchema is the JSON Schema of an agent step's inputs.
var InputSchema = []byte(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    %q: {"type": "string", "minLength": 1, "maxLength": %d, "pattern": "\\S", "description": "What the model should do.", "examples": ["Summarize the input, then hash the summary."]},
    %q: {"description": "Any JSON value the model gets with the instructions.", "default": null},
    %q: {"type": "string", "minLength": 1, "maxLength": 200, "description": "The model to use (as listed by the models endpoint); omitted: the default model."},
    %q: {"type": "array", "maxItems": %d, "uniqueItems": true, "items": {"type": "string", "minLength": 1, "maxLength": 200}, "description": "The tools the model may call."},
    %q: {"type": "integer", "minimum": %d, "maximum": %d, "default": %d, "description": "The most model turns; the last one answers without tools."}
  },
  "required": [%q, %q],
  "additionalProperties": false
}`, FieldInstructions, MaxInstructionsLen, FieldInput, FieldModelID, FieldToolIDs, MaxTools,
	FieldMaxTurns, MinTurns, MaxTurns, DefaultTurns, FieldInstructions, FieldToolIDs))

// OutputSchema is the JSON Schema of an agent step's output (Output).
var OutputSchema = []byte(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The model's answer (every turn's text)."},
    "turns": {"type": "integer", "description": "The model turns used."},
    "toolCalls": {"type": "array", "description": "Each tool call in order: toolId, input, and output or error (outputTruncated when the output was too long to keep).", "items": {"type": "object"}}
  },
  "required": ["text", "turns", "toolCalls"],
  "additionalProperties": false
}`)

// Request is an agent step's inputs, read by Parse.
type Request struct {
	Instructions string
	Input        any
	ModelID      string // "": the default model
	ToolIDs      []string
	MaxTurns     int
}

// Call is one tool call of an agent step, as its output lists it.
type Call struct {
	ToolID          string         `json:"toolId"`
	Input           map[string]any `json:"input"`
	Output          any            `json:"output,omitempty"`
	OutputTruncated bool           `json:"outputTruncated,omitempty"`
	Error           string         `json:"error,omitempty"`
}

// Output is an agent step's output.
type Output struct {
	Text      string `json:"text"`
	Turns     int    `json:"turns"`
	ToolCalls []Call `json:"toolCalls"`
}

// Map is o as a step's output object.
func (o Output) Map() map[string]any {
	calls := make([]any, len(o.ToolCalls))
	for i, c := range o.ToolCalls {
		m := map[string]any{"toolId": c.ToolID, "input": c.Input}
		if c.Input == nil {
			m["input"] = map[string]any{}
		}
		switch {
		case c.Error != "":
			m["error"] = c.Error
		case c.OutputTruncated:
			m["outputTruncated"] = true
		default:
			m["output"] = c.Output
		}
		calls[i] = m
	}
	return map[string]any{"text": o.Text, "turns": o.Turns, "toolCalls": calls}
}

// StepOnly are the tools an agent may not be given: those only the run
// engine carries out.
var StepOnly = []string{ID, "ask_human", "run_workflow"}

// Parse reads an agent step's resolved inputs. It fails with Invalid
// INVALID_PARAMS naming the field: instructions missing, blank or over
// MaxInstructionsLen characters; modelId not a string; toolIds not a list
// of at most MaxTools distinct tool ids, or naming a step-only tool;
// maxTurns not an integer from MinTurns to MaxTurns; another field.
func Parse(in map[string]any) (Request, error) {
	var probs errs.FieldErrors
	req := Request{Input: in[FieldInput], MaxTurns: DefaultTurns}
	for k := range in {
		switch k {
		case FieldInstructions, FieldInput, FieldModelID, FieldToolIDs, FieldMaxTurns:
		default:
			probs.Add(k, "is not a field of an agent step")
		}
	}
	switch s, ok := in[FieldInstructions].(string); {
	case !ok:
		probs.Add(FieldInstructions, "is required: a string")
	case strings.TrimSpace(s) == "":
		probs.Add(FieldInstructions, "must not be blank")
	case utf8.RuneCountInString(s) > MaxInstructionsLen:
		probs.Add(FieldInstructions, "has more than %d characters", MaxInstructionsLen)
	default:
		req.Instructions = s
	}
	if v, ok := in[FieldModelID]; ok && v != nil {
		s, ok := v.(string)
		if !ok || s == "" || len(s) > 200 {
			probs.Add(FieldModelID, "must be a model id")
		}
		req.ModelID = s
	}
	switch list, ok := in[FieldToolIDs].([]any); {
	case !ok:
		probs.Add(FieldToolIDs, "is required: a list of tool ids")
	case len(list) > MaxTools:
		probs.Add(FieldToolIDs, "has %d tools, more than %d", len(list), MaxTools)
	default:
		seen := map[string]bool{}
		for i, v := range list {
			id, ok := v.(string)
			at := fmt.Sprintf("%s[%d]", FieldToolIDs, i)
			switch {
			case !ok || id == "" || len(id) > 200:
				probs.Add(at, "must be a tool id")
			case seen[id]:
				probs.Add(at, "repeats %s", id)
			case IsStepOnly(id):
				probs.Add(at, "%s runs only as a workflow step; an agent cannot call it", id)
			default:
				seen[id] = true
				req.ToolIDs = append(req.ToolIDs, id)
			}
		}
	}
	if v, ok := in[FieldMaxTurns]; ok && v != nil {
		n, ok := integer(v)
		if !ok || n < MinTurns || n > MaxTurns {
			probs.Add(FieldMaxTurns, "must be an integer from %d to %d", MinTurns, MaxTurns)
		}
		req.MaxTurns = n
	}
	if len(probs) > 0 {
		return Request{}, &errs.Error{Op: "agent.Parse", Kind: errs.Invalid, Code: "INVALID_PARAMS", Message: "the agent step's inputs are invalid: " + probs[0].Field + " " + probs[0].Message, Details: probs}
	}
	return req, nil
}

// IsStepOnly reports whether tool id is one an agent may not be given
// (StepOnly).
func IsStepOnly(id string) bool {
	for _, s := range StepOnly {
		if s == id {
			return true
		}
	}
	return false
}

// integer reads a JSON number that is a whole number.
func integer(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		if n != float64(int(n)) {
			return 0, false
		}
		return int(n), true
	case int:
		return n, true
	case int64:
		return int(n), true
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	}
	return 0, false
}
