// Package toolpolicy decides whether a model may run a tool on a user's
// behalf: allow (run it), ask (pause the reply until the user approves or
// denies the call) or deny (the model gets a refusal). A tool's default
// comes from its MCP annotations as the tool server's catalog serves them:
// read-only and closed-world tools are allowed, every other tool asks. A
// user may override the policy of any tool.
package toolpolicy

import (
	"context"
	"github.com/workflowchat/service/shared/audit"
	"slices"
	"strings"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/toolclient"
)

// Policies.
const (
	Allow = "allow"
	Ask   = "ask"
	Deny  = "deny"
)

// Sources of a Permission's policy.
const (
	SourceDefault = "default"
	SourceUser    = "user"
)

// Default is the policy of a tool with annotations a: allow when it is
// read-only and closed-world, else ask.
func Default(a toolclient.Annotations) string {
	if a.ReadOnlyHint && !a.OpenWorldHint {
		return Allow
	}
	return Ask
}

// Store keeps the users' overrides. ToolPolicies returns userID's (tool id
// to policy; empty when none); SetToolPolicy stores one.
type Store interface {
	ToolPolicies(ctx context.Context, userID string) (map[string]string, error)
	SetToolPolicy(ctx context.Context, userID, toolID, policy string) error
}

// Catalog gives every tool with its annotations (toolclient.Catalog).
type Catalog interface {
	Details(ctx context.Context) ([]toolclient.ToolDetail, error)
}

// Service answers and changes the users' tool policies.
type Service struct {
	store   Store
	catalog Catalog
	audit   *audit.Log
}

// NewService returns a Service over store and catalog.
func NewService(store Store, catalog Catalog) *Service {
	return &Service{store: store, catalog: catalog}
}

// WithAudit makes s record the policies users set in l. Call it while
// building the service.
func (s *Service) WithAudit(l *audit.Log) *Service {
	s.audit = l
	return s
}

// Permission is the policy of one tool for one user.
type Permission struct {
	ToolID string `json:"toolId"`
	Policy string `json:"policy"`
	// Source is default (from the tool's annotations) or user.
	Source string `json:"source"`
}

// List returns userID's policy of every tool of the catalog, sorted by
// tool id. Forbidden unless userID is the signed-in user; the catalog's
// and the store's errors.
func (s *Service) List(ctx context.Context, userID string) ([]Permission, error) {
	const op = "toolpolicy.List"
	if err := auth.Authorize(ctx, op, userID); err != nil {
		return nil, err
	}
	tools, err := s.catalog.Details(ctx)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	own, err := s.store.ToolPolicies(ctx, userID)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	out := make([]Permission, 0, len(tools))
	for _, t := range tools {
		out = append(out, permission(t, own))
	}
	slices.SortFunc(out, func(a, b Permission) int { return strings.Compare(a.ToolID, b.ToolID) })
	return out, nil
}

func permission(t toolclient.ToolDetail, own map[string]string) Permission {
	if p, ok := own[t.ID]; ok {
		return Permission{ToolID: t.ID, Policy: p, Source: SourceUser}
	}
	return Permission{ToolID: t.ID, Policy: Default(t.Annotations), Source: SourceDefault}
}

// Set stores policy for userID's calls of toolID. Errors: Forbidden
// unless userID is the signed-in user; Invalid VALIDATION_FAILED for a
// policy other than allow, ask or deny; NotFound TOOL_NOT_FOUND for a tool
// the catalog does not have; the catalog's and the store's errors.
func (s *Service) Set(ctx context.Context, userID, toolID, policy string) (Permission, error) {
	const op = "toolpolicy.Set"
	if err := auth.Authorize(ctx, op, userID); err != nil {
		return Permission{}, err
	}
	if err := CheckPolicy(op, policy); err != nil {
		return Permission{}, err
	}
	if _, err := s.tool(ctx, op, toolID); err != nil {
		return Permission{}, err
	}
	if err := s.store.SetToolPolicy(ctx, userID, toolID, policy); err != nil {
		return Permission{}, errs.Wrap(op, err)
	}
	s.audit.Record(ctx, userID, audit.PolicyChanged, map[string]any{"toolId": toolID, "policy": policy})
	return Permission{ToolID: toolID, Policy: policy, Source: SourceUser}, nil
}

// CheckPolicy fails with Invalid VALIDATION_FAILED unless p is allow, ask
// or deny.
func CheckPolicy(op, p string) error {
	switch p {
	case Allow, Ask, Deny:
		return nil
	}
	var f errs.FieldErrors
	f.Add("policy", "must be allow, ask or deny")
	return f.Err(op)
}

func (s *Service) tool(ctx context.Context, op, id string) (toolclient.ToolDetail, error) {
	tools, err := s.catalog.Details(ctx)
	if err != nil {
		return toolclient.ToolDetail{}, errs.Wrap(op, err)
	}
	for _, t := range tools {
		if t.ID == id {
			return t, nil
		}
	}
	return toolclient.ToolDetail{}, errs.E(op, errs.NotFound, "TOOL_NOT_FOUND", "no tool with this id")
}

// Policy returns userID's policy of tool id: the user's override, else
// the default of its annotations. A tool the catalog does not have is
// allowed: running it fails with the tool server's own error. It fails
// with the catalog's and the store's errors.
func (s *Service) Policy(ctx context.Context, userID, id string) (string, error) {
	const op = "toolpolicy.Policy"
	own, err := s.store.ToolPolicies(ctx, userID)
	if err != nil {
		return "", errs.Wrap(op, err)
	}
	if p, ok := own[id]; ok {
		return p, nil
	}
	t, err := s.tool(ctx, op, id)
	if errs.Is(err, errs.NotFound) {
		return Allow, nil
	}
	if err != nil {
		return "", err
	}
	return Default(t.Annotations), nil
}

// Allow stores allow for userID's calls of toolID (an approval the user
// asked to remember). It fails with the store's errors.
func (s *Service) Allow(ctx context.Context, userID, toolID string) error {
	return errs.Wrap("toolpolicy.Allow", s.store.SetToolPolicy(ctx, userID, toolID, Allow))
}

// Override returns userID's own policy of tool id, "" when the user set
// none (only a user's own policy can deny: no default does). One read of
// the store, no catalog. It fails with the store's errors.
func (s *Service) Override(ctx context.Context, userID, id string) (string, error) {
	own, err := s.store.ToolPolicies(ctx, userID)
	if err != nil {
		return "", errs.Wrap("toolpolicy.Override", err)
	}
	return own[id], nil
}
