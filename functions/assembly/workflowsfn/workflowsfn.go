// Package workflowsfn builds WorkflowsFunction: workflows, their chat and
// proposals, and workflow runs in chats.
package workflowsfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/workflow"
)

// Workflows is WorkflowsFunction.
var Workflows = assembly.Function{
	LogicalID: "WorkflowsFunction",
	Required:  []string{"USERS_TABLE", "SESSIONS_TABLE", "DATA_TABLE", "RATE_LIMITS_TABLE", "MCP_URL", "MCP_SERVICE_KEY"},
	Build:     build,
}

// build mounts the workflow routes and the run routes on one router, over
// one tool catalog; runs through the API have the function's time limit.
func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	models, err := providers.Registry(ctx, cfg)
	if err != nil {
		return nil, err
	}
	client := d.ToolClient(cfg, 0)
	catalog := tools.NewCatalog(client.Catalog(), cfg.ToolsCacheTTL, d.Now)
	workflows, runs := store.NewWorkflows(d.DB, cfg.DataTable), store.NewRuns(d.DB, cfg.DataTable)
	svc := workflow.NewService(workflow.Options{
		Store: workflows, Runs: runs, Models: models, Now: d.Now, Catalog: workflow.NewToolCatalog(catalog),
	})
	runService := workflow.NewRunService(workflow.RunServiceOptions{
		Runs: runs, Workflows: workflows, Tools: toolserver.NewModelTools(client, catalog), Now: d.Now, RunTimeout: workflow.APIRunTimeout,
	})
	authn := d.Auth(cfg)
	lim := workflow.Limits{Limiter: d.Limiter(cfg), Messages: cfg.RateLimitMessages, Runs: cfg.RateLimitRuns}
	routes := workflow.Routes(svc, authn, lim)
	runRoutes := workflow.RunRoutes(runService, authn, lim)
	routes.Mount(runRoutes, runRoutes.Patterns()...)
	return routes, nil
}
