// Command tools is ToolsFunction: the REST tool endpoints (list, search,
// get), served from the tool server (MCP_URL, MCP_SERVICE_KEY) through an
// in-memory cache that lives for TOOLS_CACHE_TTL in a warm Lambda.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/workflowchat/service/functions/internal/services"
	"github.com/workflowchat/service/functions/internal/wiring"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/tools"
)

// toolServerTimeout bounds one call to the tool server: below the
// function's own timeout (10 s in template.yaml), so that a hung tool
// server yields the stale copy or TOOLS_UNAVAILABLE, not a Lambda timeout.
// The catalog calls never run a tool.
const toolServerTimeout = 8 * time.Second

func main() {
	h, err := newHandler(context.Background(), os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambdahttp.Start(h)
}

func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	// The session middleware reads and renews sessions only: no
	// USERS_TABLE (template.yaml grants ToolsFunction no access to it).
	cfg, err := wiring.Config(getenv, "SESSIONS_TABLE", "MCP_URL", "MCP_SERVICE_KEY")
	if err != nil {
		return nil, err
	}
	b, err := wiring.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	catalog := services.ToolCatalog(cfg, services.ToolClient(cfg, toolServerTimeout))
	return wiring.Stack(cfg, tools.Routes(catalog, b.Auth)), nil
}
