// Package mcpgatewayfn builds McpGatewayFunction: POST /api/mcp, the
// per-user MCP server of the user's workflows, behind a Lambda function
// URL with response streaming (progress notifications are an SSE stream,
// and a call may wait mcpgateway.MaxCallWait for its run). A call is a
// durable run handed to the runner (RUNNER_FUNCTION), counted against
// RATE_LIMIT_RUNS; the tool server (MCP_URL) gives the output schemas;
// large inputs and results go through the blob store (BLOB_BUCKET).
package mcpgatewayfn

import (
	"context"
	"encoding/json"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/functions/assembly/runstart"
	"github.com/workflowchat/service/functions/assembly/signingkeys"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/mcpgateway"
	"github.com/workflowchat/service/shared/oauth/bearer"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolclient"
)

// McpGateway is McpGatewayFunction.
var McpGateway = assembly.Function{
	LogicalID:   "McpGatewayFunction",
	Required:    []string{"OAUTH_TABLE", "DATA_TABLE", "RATE_LIMITS_TABLE", "RUNNER_FUNCTION", "MCP_URL", "MCP_SERVICE_KEY", "BLOB_BUCKET"},
	FunctionURL: true,
	Build:       build,
}

func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	keys, err := signingkeys.Source(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	tools, err := workflowTools(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	return mcpgateway.Routes(mcpgateway.Options{
		Tools:    tools,
		Verifier: bearer.NewVerifier(d.OAuthStore(cfg), keys, cfg.PublicBaseURL, d.Now),
		BaseURL:  cfg.PublicBaseURL,
		Logger:   d.Logger,
		Limit:    d.Limiter(cfg).Limit(cfg.RateLimitMCP),
	}), nil
}

// workflowTools returns the run engine's tools (mcpgateway.Engine) over
// the one run service (runstart.Build): a call's run is checked, stored,
// rate limited and handed to the runner as every other. It fails when
// the blob store or the runner's Invoker cannot be built.
func workflowTools(ctx context.Context, cfg config.Config, d assembly.Deps) (mcpgateway.WorkflowTools, error) {
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	rs, err := runstart.Build(ctx, cfg, d, blobs, runstart.NoSchedules)
	if err != nil {
		return nil, err
	}
	catalog := toolclient.NewCatalog(d.ToolClient(cfg, 0), cfg.ToolsCacheTTL, d.Now)
	return &mcpgateway.Engine{
		Catalog: store.NewWorkflows(d.DB, cfg.DataTable), Runs: rs.Service, Wait: d.MCPCallWait,
		OutputSchema: func(ctx context.Context, toolID string) (json.RawMessage, error) {
			t, err := catalog.Get(ctx, toolID)
			return t.OutputSchema, err
		},
	}, nil
}
