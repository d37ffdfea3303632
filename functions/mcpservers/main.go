// Command mcpservers is McpServersFunction: the users' own remote MCP
// servers (/api/mcp-servers), their tool lists and their sealed secrets.
package main

import (
	"context"
	"net/http"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/mcpserversfn"
	"github.com/workflowchat/service/shared/lambdahttp"
)

func main() { assembly.Main(newHandler, lambdahttp.Start) }

// newHandler builds the function from its builder, mcpserversfn.McpServers,
// the one infra/local mounts for the dev server.
func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	return assembly.Lambda(ctx, getenv, mcpserversfn.McpServers)
}
