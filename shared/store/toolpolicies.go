package store

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcpserver"
)

// ToolPolicies stores the users' tool policy overrides in the Users table:
// one item per user, TOOLPOLICY#<userId>, with a string attribute
// p_<toolId> per overridden tool (tool ids are lower-case letters, digits
// and underscores, plain attribute names). Reading a user's overrides is
// one GetItem; setting one is one UpdateItem. It implements
// toolpolicy.Store.
type ToolPolicies struct {
	table dynamo.Table
}

// NewToolPolicies returns a ToolPolicies over the named Users table.
func NewToolPolicies(db *dynamo.DB, usersTable string) *ToolPolicies {
	return &ToolPolicies{table: db.Table(usersTable)}
}

func toolPolicyKey(userID string) string { return "TOOLPOLICY#" + userID }

const toolPolicyPrefix = "p_"

// ToolPolicies returns userID's overrides, tool id to policy.
func (s *ToolPolicies) ToolPolicies(ctx context.Context, userID string) (map[string]string, error) {
	var item dynamo.Item
	err := s.table.Get("PK", toolPolicyKey(userID)).Consistent(true).One(ctx, &item)
	out := map[string]string{}
	if errors.Is(err, dynamo.ErrNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, storeError("store.ToolPolicies", err)
	}
	for name, av := range item {
		id, ok := strings.CutPrefix(name, toolPolicyPrefix)
		if v, isS := av.(*types.AttributeValueMemberS); ok && isS {
			out[id] = v.Value
		}
	}
	return out, nil
}

// SetToolPolicy stores policy for userID's calls of toolID. Invalid
// INVALID_TOOL_ID for an id that is not a plain attribute name, nor a
// remote tool's id (mcp/<server>/<tool>, named through a placeholder: its
// slashes and dots are no path).
func (s *ToolPolicies) SetToolPolicy(ctx context.Context, userID, toolID, policy string) error {
	const op = "store.SetToolPolicy"
	if _, _, remote := mcpserver.ParseToolID(toolID); remote {
		return storeError(op, s.table.Update("PK", toolPolicyKey(userID)).SetExpr("$ = ?", toolPolicyPrefix+toolID, policy).Run(ctx))
	}
	for _, r := range toolID {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return errs.E(op, errs.Invalid, "INVALID_TOOL_ID", "tool ids are lower-case letters, digits and underscores, or mcp/<server>/<tool>")
		}
	}
	return storeError(op, s.table.Update("PK", toolPolicyKey(userID)).Set(toolPolicyPrefix+toolID, policy).Run(ctx))
}
