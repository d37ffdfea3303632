package runs

import (
	"context"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/workflow"
)

// The chat stream runs workflows through chat.WorkflowRunner, which
// Service implements: the chat package knows nothing of the engine.
var _ chat.WorkflowRunner = (*Service)(nil)

// CheckWorkflow checks that workflowID is the caller's workflow.
func (s *Service) CheckWorkflow(ctx context.Context, workflowID string) error {
	_, err := s.ownedWorkflow(ctx, "workflow.CheckWorkflow", workflowID)
	return err
}

// PrepareRun checks the caller's workflow (the chat has been checked by
// the stream) and returns its execution.
func (s *Service) PrepareRun(ctx context.Context, chatID, workflowID string) (chat.PreparedRun, error) {
	wf, err := s.ownedWorkflow(ctx, "workflow.PrepareRun", workflowID)
	if err != nil {
		return chat.PreparedRun{}, err
	}
	userID := auth.UserID(ctx)
	return chat.PreparedRun{
		WorkflowName: wf.Name,
		Execute: func(ctx context.Context, observe func(chat.WorkflowStep)) (chat.WorkflowOutcome, error) {
			run := s.engine.NewRun(wf, chatID, userID)
			err := s.engine.Execute(ctx, wf, &run, func(e StepEvent) {
				observe(chat.WorkflowStep{Done: e.Kind == StepFinished, StepID: e.StepID, ToolID: e.ToolID,
					Input: e.Input, Output: e.Output, Error: e.Error, Status: e.Status})
			})
			if err != nil {
				return chat.WorkflowOutcome{}, err
			}
			return outcomeOf(run), nil
		},
	}, nil
}

func outcomeOf(r workflow.Run) chat.WorkflowOutcome {
	o := chat.WorkflowOutcome{RunID: r.ID, Status: r.Status, Error: r.Error}
	for _, st := range r.Steps {
		o.Steps = append(o.Steps, chat.WorkflowStepOutcome{ID: st.ID, ToolID: st.ToolID, Status: st.Status, Output: st.Output, Error: st.Error})
	}
	return o
}
