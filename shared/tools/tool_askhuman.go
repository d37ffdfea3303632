package tools

import (
	"context"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// AskHumanID is the id of the human step: a workflow step that pauses the
// run until a person answers (docs/decisions.md, Workflow definitions).
const AskHumanID = "ask_human"

// Bounds of ask_human's timeoutSeconds: one second to 30 days.
const (
	AskHumanMinTimeout = 1
	AskHumanMaxTimeout = 30 * 24 * 60 * 60
)

// askHumanTool is ask_human. It is in the catalog so that proposals
// validate its inputs and models can propose it, but only the workflow
// engine carries it out (it waits for the person's answer outside any
// tool call): running it as a tool fails with INVALID_PARAMS. It changes
// nothing and reaches no outside system (read-only, closed world), and
// asking again has no further effect (idempotent), so policies allow it
// and a resumed run may ask again.
func askHumanTool() *Tool {
	return &Tool{
		ID:       AskHumanID,
		Name:     "Ask a person",
		Category: CategoryUtil,
		Description: "Workflow steps only: pauses the workflow run until a person approves or rejects, optionally giving values, then continues. " +
			"It cannot be called directly. Fields: message (what to ask), inputSchema (a JSON Schema object describing the values the person may give), " +
			"timeoutSeconds (how long to wait, 1 to 2592000; default: no limit), onTimeout (fail, the default: the run fails; continue: the step completes with approved false and timedOut true). " +
			"Later steps read approved, values, respondedAt and timedOut, e.g. an if of \"review.approved\". " +
			`Example: {"message": "Publish this summary?", "inputSchema": {"type": "object", "properties": {"note": {"type": "string"}}}, "timeoutSeconds": 86400}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "message": {"type": "string", "minLength": 1, "maxLength": 4000, "pattern": "\\S", "description": "What to ask the person, shown with the run.", "examples": ["Publish this summary?"]},
    "inputSchema": {"type": "object", "description": "A JSON Schema object (\"type\": \"object\") for the values the person gives with the answer; omitted: no values."},
    "timeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 2592000, "description": "How long to wait for an answer, in seconds (at most 30 days). Omitted: wait until the run is cancelled."},
    "onTimeout": {"type": "string", "enum": ["fail", "continue"], "default": "fail", "description": "At the timeout: fail the run, or continue with approved false and timedOut true."}
  },
  "required": ["message"],
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "approved": {"type": "boolean", "description": "Whether the person approved (false after a timeout)."},
    "values": {"type": "object", "description": "The values the person gave, valid against the step's inputSchema; {} when none (a rejection or a timeout may give none, whatever the schema requires)."},
    "respondedAt": {"type": "string", "format": "date-time", "description": "When the person answered, or when the wait timed out."},
    "timedOut": {"type": "boolean", "description": "True when no one answered in time and onTimeout is continue."}
  },
  "required": ["approved", "values", "respondedAt"],
  "additionalProperties": false
}`),
		Annotations: Annotations{ReadOnly: true, Idempotent: true},
		Timeout:     time.Second,
		Run:         runAskHuman,
	}
}

// errStepOnly is ask_human's answer to being run as a tool.
const errStepOnly = AskHumanID + " runs only as a workflow step (the run waits for a person's answer)"

func runAskHuman(context.Context, map[string]any) (map[string]any, error) {
	return nil, &errs.Error{Kind: errs.Invalid, Code: CodeInvalidParams, Message: errStepOnly,
		Details: []errs.FieldError{{Field: "toolId", Message: errStepOnly}}}
}
