package runs

import (
	"context"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/workflow"
)

// Triggered is s as the triggers start runs (trigger.RunStarter): a
// schedule's fire or a webhook call is a durable run with the trigger's
// run id, started through Service.Start like any other (the input
// checked against the workflow's inputSchema, its attachments checked,
// its large values in the blob store, counted against the user's run
// rate limit), unless the run of that id exists already.
type Triggered struct{ *Service }

// StartTriggered starts req's run for req.UserID (ctx acts for them), or
// answers for the run of that id if it exists, counting nothing: its id
// while it is active, Conflict RUN_ENDED once it has ended. Errors:
// NotFound WORKFLOW_NOT_FOUND, Forbidden, Invalid INVALID_INPUT,
// RateLimited RATE_LIMITED, storage errors.
func (t Triggered) StartTriggered(ctx context.Context, req trigger.TriggeredRun) (string, error) {
	const op = "runs.StartTriggered"
	ctx = auth.ActingFor(ctx, req.UserID)
	existing := func(r workflow.Run) (string, error) {
		if workflow.Active(r.Status) {
			return r.ID, nil
		}
		return "", errs.E(op, errs.Conflict, trigger.CodeRunEnded, "the trigger's run has ended")
	}
	if req.RunID != "" {
		if r, err := t.Run(ctx, req.RunID); err == nil {
			return existing(r)
		}
	}
	run, err := t.Start(ctx, StartRequest{WorkflowID: req.WorkflowID, Input: req.Input, RunID: req.RunID,
		Trigger: &workflow.Trigger{Type: req.TriggerType, TriggerID: req.TriggerID}, Version: req.WorkflowVersion})
	if errs.CodeOf(err) == workflow.CodeRunExists {
		// A concurrent start of the same id won.
		r, rerr := t.Run(ctx, req.RunID)
		if rerr != nil {
			return "", errs.Wrap(op, err)
		}
		return existing(r)
	}
	if err != nil {
		return "", errs.Wrap(op, err)
	}
	return run.ID, nil
}
