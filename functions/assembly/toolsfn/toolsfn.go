// Package toolsfn builds ToolsFunction: the REST tool endpoints (list,
// search, get) and the users' tool permissions, served from the tool server (MCP_URL, MCP_SERVICE_KEY)
// through an in-memory cache that lives for TOOLS_CACHE_TTL in a warm
// Lambda.
package toolsfn

import (
	"context"
	"time"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/toolpolicy"
	"github.com/workflowchat/service/shared/usertools"
)

// toolServerTimeout bounds one call to the tool server: below the
// function's own timeout (10 s in template.yaml), so that a hung tool
// server yields the stale copy or TOOLS_UNAVAILABLE, not a Lambda timeout.
// The catalog calls never run a tool.
const toolServerTimeout = 8 * time.Second

// Tools is ToolsFunction. USERS_TABLE holds the users' tool policies.
var Tools = assembly.Function{
	LogicalID: "ToolsFunction",
	Required:  []string{"USERS_TABLE", "SESSIONS_TABLE", "MCP_URL", "MCP_SERVICE_KEY"},
	Build:     build,
}

func build(_ context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	client := d.ToolClient(cfg, toolServerTimeout)
	catalog := toolclient.NewCatalog(client, cfg.ToolsCacheTTL, d.Now)
	authn := d.Auth(cfg)
	// The tool routes list, search and get the user's own remote MCP
	// tools too (their stored lists in the Data table), and their
	// policies can be set.
	all := d.UserTools(cfg, catalog, nil, usertools.DefaultTTL)
	routes := toolclient.RoutesWith(all, authn)
	p := toolpolicy.Routes(d.ToolPolicies(cfg, all), authn)
	routes.Mount(p, p.Patterns()...)
	return routes, nil
}
