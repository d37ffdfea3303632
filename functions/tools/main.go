// Command tools is ToolsFunction: the REST tool endpoints (list, search,
// get) and the users' tool permissions, served from the tool server (MCP_URL, MCP_SERVICE_KEY) through an
// in-memory cache that lives for TOOLS_CACHE_TTL in a warm Lambda.
package main

import (
	"context"
	"net/http"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/toolsfn"
	"github.com/workflowchat/service/shared/lambdahttp"
)

func main() { assembly.Main(newHandler, lambdahttp.Start) }

// newHandler builds the function from its builder, toolsfn.Tools, the one
// infra/local mounts for the dev server.
func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	return assembly.Lambda(ctx, getenv, toolsfn.Tools)
}
