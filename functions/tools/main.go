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

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
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
	cfg, err := config.Load(getenv)
	if err == nil {
		// The session middleware reads and renews sessions only: no
		// USERS_TABLE (template.yaml grants ToolsFunction no access to it).
		err = cfg.Require("SESSIONS_TABLE", "MCP_URL", "MCP_SERVICE_KEY")
	}
	if err != nil {
		return nil, err
	}
	db, err := store.Open(ctx, store.Options{Region: cfg.Region, Endpoint: cfg.DynamoDBEndpoint})
	if err != nil {
		return nil, err
	}
	authn := auth.NewService(store.NewUsers(db, cfg.UsersTable, cfg.SessionsTable), nil, time.Now)
	hc := &http.Client{Timeout: toolServerTimeout}
	catalog := toolserver.NewClient(cfg.MCPURL, cfg.MCPServiceKey, hc).Catalog()
	logger := logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
	routes := tools.Routes(catalog, authn, cfg.ToolsCacheTTL, time.Now)
	return httpapi.Stack(routes, httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins}), nil
}
