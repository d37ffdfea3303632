// Package mcpfn builds McpFunction: the key-protected tool server (POST
// /mcp), served by its own Lambda function URL, not the HTTP API. Its
// builder takes the sandbox that runs the isolated tools instead of
// assembly.Deps: the tool server needs no DynamoDB, and it does not import
// package assembly, so it links no DynamoDB client.
package mcpfn

import (
	"context"

	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

// Required are the variables the bootstrap refuses to start without.
var Required = []string{"MCP_SERVICE_KEY"}

// Mcp builds the tool server's router: the built-in tools, llm_generate on
// the configured models (plus tools.TestTools with TOOLS_TEST_HOOKS),
// under MCP_SERVICE_KEY. The isolated tools (jq,
// expressions, templates, regular expressions, CSV, HTML) run in sb's
// worker processes; nil sb runs them in process, where nothing bounds
// their memory (tests only). It fails when a model provider or the tool
// registry cannot be built.
func Mcp(ctx context.Context, cfg config.Config, sb tools.Sandbox) (*httpapi.Router, error) {
	models, err := providers.Registry(ctx, cfg)
	if err != nil {
		return nil, err
	}
	all := tools.Builtin(tools.Config{
		Generator:            toolserver.Models(models),
		DefaultModelID:       cfg.DefaultModelID,
		AllowPrivateNetworks: cfg.ToolsAllowPrivateNetworks,
	})
	if cfg.ToolsTestHooks {
		all = append(all, tools.TestTools()...)
	}
	reg, err := tools.NewRegistry(all...)
	if err != nil {
		return nil, err
	}
	if sb != nil {
		reg = reg.WithSandbox(sb)
	}
	return toolserver.Routes(reg, cfg.MCPServiceKey), nil
}
