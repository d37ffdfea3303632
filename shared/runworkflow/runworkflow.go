// Package runworkflow is the contract of run_workflow, the step that runs
// another workflow of the same user as a child durable run: its id, input
// fields, bounds, codes and output are declared here once. The tool
// catalog shows them as JSON Schemas (InputSchema, OutputSchema), the
// definition checks and the run engine read a step's inputs with Parse.
package runworkflow

import (
	"strings"

	"github.com/workflowchat/service/shared/errs"
)

// ID is the tool id of a child-run step.
const ID = "run_workflow"

// The input fields of a child-run step.
const (
	FieldWorkflowID = "workflowId"
	FieldInput      = "input"
)

// MaxDepth bounds the nesting of child runs: a run started by a person,
// a trigger or an MCP client has depth 0, its child 1, and no run deeper
// than MaxDepth starts.
const MaxDepth = 5

// Codes of a child-run step's failures, at the start of its error.
const (
	// CodeWorkflowNotFound: the workflow is unknown or another user's.
	CodeWorkflowNotFound = "WORKFLOW_NOT_FOUND"
	// CodeWorkflowCycle: the workflow is the run's own or one of its
	// ancestors' (a cycle), or the child would nest past MaxDepth.
	CodeWorkflowCycle = "WORKFLOW_CYCLE"
	// CodeChildRunFailed: the child run failed or was cancelled.
	CodeChildRunFailed = "CHILD_RUN_FAILED"
)

// Description is the tool's description in the catalog.
var Description = "Workflow steps only: runs another of your workflows as a child run and waits for it, without holding any compute while it runs. " +
	"Fields: workflowId (the workflow to run; not this workflow, nor one that runs this one: cycles are refused), input (the child run's input, checked against that workflow's inputSchema). " +
	"The step's output is the output of the child's last step that ran; later steps read any of its fields. The child run has trigger.type workflow and parentRunId; " +
	"cancelling this run cancels it. Child runs nest at most 5 deep. " +
	`Example: {"workflowId": "3f0c1d6e-...", "input": {"url": "{{input.url}}"}}.`

// InputSchema is the JSON Schema of a child-run step's inputs.
var InputSchema = []byte(`{
  "type": "object",
  "properties": {
    "workflowId": {"type": "string", "minLength": 1, "maxLength": 200, "description": "The id of one of your workflows, run as a child run."},
    "input": {"type": "object", "description": "The child run's input, checked against the workflow's inputSchema; omitted: no input."}
  },
  "required": ["workflowId"],
  "additionalProperties": false
}`)

// OutputSchema is the JSON Schema of a child-run step's output: the
// output of the child's last step, whose fields depend on that workflow.
var OutputSchema = []byte(`{
  "type": "object",
  "description": "The output of the child run's last step that ran ({} when none did).",
  "additionalProperties": true
}`)

// Request is the resolved input of a child-run step.
type Request struct {
	WorkflowID string
	Input      map[string]any
}

// Parse reads a child-run step's resolved inputs. It fails with Invalid
// INVALID_PARAMS naming the field: workflowId missing, not a string,
// blank or over 200 bytes; input not an object; another field.
func Parse(in map[string]any) (Request, error) {
	var probs errs.FieldErrors
	var req Request
	for k := range in {
		if k != FieldWorkflowID && k != FieldInput {
			probs.Add(k, "is not an input of %s", ID)
		}
	}
	switch s, ok := in[FieldWorkflowID].(string); {
	case !ok:
		probs.Add(FieldWorkflowID, "is required: a workflow id")
	case strings.TrimSpace(s) == "" || len(s) > 200:
		probs.Add(FieldWorkflowID, "must be a workflow id")
	default:
		req.WorkflowID = s
	}
	if v, ok := in[FieldInput]; ok && v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			probs.Add(FieldInput, "must be an object")
		}
		req.Input = m
	}
	if len(probs) > 0 {
		return Request{}, &errs.Error{Op: "runworkflow.Parse", Kind: errs.Invalid, Code: "INVALID_PARAMS",
			Message: "the run_workflow step's inputs are invalid: " + probs[0].Field + " " + probs[0].Message, Details: probs}
	}
	return req, nil
}

// Literal returns the workflow id a step's inputs name when it is
// literal (no template), for the checks made when a definition is saved.
func Literal(inputs map[string]any) (string, bool) {
	s, ok := inputs[FieldWorkflowID].(string)
	if !ok || s == "" || strings.Contains(s, "{{") {
		return "", false
	}
	return s, true
}
