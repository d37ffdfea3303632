// Package mcpgatewayfn builds McpGatewayFunction: POST /api/mcp, the
// per-user MCP server of the user's workflows, behind a Lambda function
// URL with response streaming (progress notifications are an SSE stream,
// and a call may wait mcpgateway.MaxCallWait for its run).
package mcpgatewayfn

import (
	"context"
	"fmt"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/signingkeys"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/mcpgateway"
	"github.com/workflowchat/service/shared/oauth/bearer"
)

// McpGateway is McpGatewayFunction.
var McpGateway = assembly.Function{
	LogicalID:   "McpGatewayFunction",
	Required:    []string{"OAUTH_TABLE"},
	FunctionURL: true,
	Build:       build,
}

func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	keys, err := signingkeys.Source(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	tools, err := workflowTools(d)
	if err != nil {
		return nil, err
	}
	return mcpgateway.Routes(mcpgateway.Options{
		Tools:    tools,
		Verifier: bearer.NewVerifier(d.OAuthStore(cfg), keys, cfg.PublicBaseURL, d.Now),
		BaseURL:  cfg.PublicBaseURL,
		Logger:   d.Logger,
	}), nil
}

// workflowTools returns d.WorkflowTools, or mcpgateway.NoTools until the
// workflow engine provides them.
func workflowTools(d assembly.Deps) (mcpgateway.WorkflowTools, error) {
	if d.WorkflowTools == nil {
		return mcpgateway.NoTools{}, nil
	}
	t, ok := d.WorkflowTools.(mcpgateway.WorkflowTools)
	if !ok {
		return nil, fmt.Errorf("mcpgatewayfn: Deps.WorkflowTools is a %T, not a mcpgateway.WorkflowTools", d.WorkflowTools)
	}
	return t, nil
}
