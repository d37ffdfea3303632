package workflow

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/paging"
)

// Versions returns a page of the caller's workflow id's versions, newest
// first. Errors: NotFound WORKFLOW_NOT_FOUND, Forbidden, Invalid
// INVALID_PAGINATION.
func (s *Service) Versions(ctx context.Context, id string, page paging.Cursor) (VersionsPage, error) {
	const op = "workflow.Versions"
	w, err := s.Get(ctx, id)
	if err != nil {
		return VersionsPage{}, errs.Wrap(op, err)
	}
	p, err := s.store.WorkflowVersions(ctx, w, page.Limit, page.After)
	return p, errs.Wrap(op, err)
}

// Version returns version n of the caller's workflow id. Errors: NotFound
// WORKFLOW_NOT_FOUND, Forbidden, NotFound VERSION_NOT_FOUND.
func (s *Service) Version(ctx context.Context, id string, n int) (Version, error) {
	const op = "workflow.Version"
	w, err := s.Get(ctx, id)
	if err != nil {
		return Version{}, errs.Wrap(op, err)
	}
	v, err := s.store.WorkflowVersion(ctx, w, n)
	return v, errs.Wrap(op, err)
}

// Restore makes version n of the caller's workflow id its definition
// again, as a new version (source restore), when pre holds: the version's
// name, description, inputSchema, steps, exposeAsTool and toolName are
// written as a PATCH of them all would be, checked against today's tool
// catalog. Errors: Version's, then Update's (a version whose steps no
// longer pass is Invalid VALIDATION_FAILED; its toolName taken since,
// Conflict TOOL_NAME_TAKEN).
func (s *Service) Restore(ctx context.Context, id string, n int, pre Precondition) (Workflow, error) {
	const op = "workflow.Restore"
	v, err := s.Version(ctx, id, n)
	if err != nil {
		return Workflow{}, errs.Wrap(op, err)
	}
	schema := v.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage("null")
	}
	steps := slices.Clone(v.Steps)
	req := UpdateRequest{Name: &v.Name, Description: &v.Description, InputSchema: schema, Steps: &steps,
		ExposeAsTool: &v.ExposeAsTool, ToolName: &v.ToolName}
	return s.change(ctx, op, id, req, pre, s.store.RestoreWorkflow)
}
