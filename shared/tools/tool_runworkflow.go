package tools

import (
	"context"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/runworkflow"
)

// RunWorkflowID is the id of the child-run step (runworkflow.ID).
const RunWorkflowID = runworkflow.ID

// runWorkflowTool is run_workflow, whose contract is package
// runworkflow's. It is in the catalog so that definitions validate its
// inputs and models can propose it, but only the workflow runner carries
// it out (it starts a child run and waits for it): running it as a tool
// fails with INVALID_PARAMS. Starting the child again has no further
// effect (the child's id derives from the parent's run and step), so it
// is idempotent; what the child does is anything: not read-only.
func runWorkflowTool() *Tool {
	return &Tool{
		ID:           RunWorkflowID,
		Name:         "Run a workflow",
		Category:     CategoryUtil,
		Description:  runworkflow.Description,
		InputSchema:  runworkflow.InputSchema,
		OutputSchema: runworkflow.OutputSchema,
		Annotations:  Annotations{Idempotent: true, OpenWorld: true},
		Timeout:      time.Second,
		Run:          runRunWorkflow,
	}
}

const errRunWorkflowStepOnly = RunWorkflowID + " runs only as a workflow step (it starts a child run and waits for it)"

func runRunWorkflow(context.Context, map[string]any) (map[string]any, error) {
	return nil, &errs.Error{Kind: errs.Invalid, Code: CodeInvalidParams, Message: errRunWorkflowStepOnly,
		Details: []errs.FieldError{{Field: "toolId", Message: errRunWorkflowStepOnly}}}
}
