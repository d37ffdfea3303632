package runs

import (
	"context"

	"github.com/workflowchat/service/shared/workflow"
)

// pinned returns wf as a run of its version n runs it: wf itself for 0 or
// its current version, else the workflow with version n's definition
// (inputSchema, steps) and number. NotFound VERSION_NOT_FOUND when wf has
// no version n.
func (s *Service) pinned(ctx context.Context, wf workflow.Workflow, n int) (workflow.Workflow, error) {
	if n == 0 || n == wf.Version {
		return wf, nil
	}
	v, err := s.workflows.WorkflowVersion(ctx, wf, n)
	if err != nil {
		return workflow.Workflow{}, err
	}
	return v.Pinned(wf), nil
}
