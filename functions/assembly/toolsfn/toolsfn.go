// Package toolsfn builds ToolsFunction: the REST tool endpoints (list,
// search, get), served from the tool server (MCP_URL, MCP_SERVICE_KEY)
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
)

// toolServerTimeout bounds one call to the tool server: below the
// function's own timeout (10 s in template.yaml), so that a hung tool
// server yields the stale copy or TOOLS_UNAVAILABLE, not a Lambda timeout.
// The catalog calls never run a tool.
const toolServerTimeout = 8 * time.Second

// Tools is ToolsFunction. Its session middleware reads and renews
// sessions only: no USERS_TABLE (template.yaml grants ToolsFunction no
// access to it).
var Tools = assembly.Function{
	LogicalID: "ToolsFunction",
	Required:  []string{"SESSIONS_TABLE", "MCP_URL", "MCP_SERVICE_KEY"},
	Build:     build,
}

func build(_ context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	client := d.ToolClient(cfg, toolServerTimeout)
	catalog := toolclient.NewCatalog(client, cfg.ToolsCacheTTL, d.Now)
	return toolclient.Routes(catalog, d.Auth(cfg)), nil
}
