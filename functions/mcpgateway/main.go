// Command mcpgateway is McpGatewayFunction: POST /api/mcp, the per-user
// MCP server, behind a Lambda function URL with response streaming.
package main

import (
	"context"
	"net/http"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/mcpgatewayfn"
	"github.com/workflowchat/service/shared/lambdahttp"
)

func main() { assembly.Main(newHandler, lambdahttp.StartStreaming) }

// newHandler builds the function from its builder, mcpgatewayfn.McpGateway,
// the one infra/local mounts for the dev server.
func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	return assembly.Lambda(ctx, getenv, mcpgatewayfn.McpGateway)
}
