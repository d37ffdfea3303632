package tools

import (
	"context"
	"time"

	"github.com/workflowchat/service/shared/askhuman"
	"github.com/workflowchat/service/shared/errs"
)

// AskHumanID is the id of the human step (askhuman.ID): a workflow step
// that pauses the run until a person answers (docs/decisions.md, Workflow
// definitions).
const AskHumanID = askhuman.ID

// askHumanTool is ask_human, whose contract (inputs, bounds, output) is
// package askhuman's. It is in the catalog so that proposals validate its
// inputs and models can propose it, but only the workflow engine carries
// it out (it waits for the person's answer outside any tool call):
// running it as a tool fails with INVALID_PARAMS. It changes nothing and
// reaches no outside system (read-only, closed world), and asking again
// has no further effect (idempotent), so policies allow it and a resumed
// run may ask again.
func askHumanTool() *Tool {
	return &Tool{
		ID:           AskHumanID,
		Name:         "Ask a person",
		Category:     CategoryUtil,
		Description:  askhuman.Description,
		InputSchema:  askhuman.InputSchema,
		OutputSchema: askhuman.OutputSchema,
		Annotations:  Annotations{ReadOnly: true, Idempotent: true},
		Timeout:      time.Second,
		Run:          runAskHuman,
	}
}

// errStepOnly is ask_human's answer to being run as a tool.
const errStepOnly = AskHumanID + " runs only as a workflow step (the run waits for a person's answer)"

func runAskHuman(context.Context, map[string]any) (map[string]any, error) {
	return nil, &errs.Error{Kind: errs.Invalid, Code: CodeInvalidParams, Message: errStepOnly,
		Details: []errs.FieldError{{Field: "toolId", Message: errStepOnly}}}
}
