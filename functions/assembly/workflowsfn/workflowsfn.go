// Package workflowsfn builds WorkflowsFunction: workflows, their chat and
// proposals, and workflow runs in chats (durable runs handed to
// RunnerFunction through runstart.Invoker). Deleting a workflow deletes
// its triggers with their schedules, through the one trigger service
// (runstart.Build over schedules.Open).
package workflowsfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/functions/assembly/runstart"
	"github.com/workflowchat/service/functions/assembly/schedules"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/proposal"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// Workflows is WorkflowsFunction. It requires SCHEDULE_GROUP: deleting a
// workflow deletes its triggers' schedules, which in AWS are EventBridge
// Scheduler's (without the group it would delete them from the Data
// table's due index, the dev server's keeper, and leave them firing).
var Workflows = assembly.Function{
	LogicalID: "WorkflowsFunction",
	Required: []string{"USERS_TABLE", "SESSIONS_TABLE", "DATA_TABLE", "RATE_LIMITS_TABLE", "MCP_URL", "MCP_SERVICE_KEY", "RUNNER_FUNCTION", "BLOB_BUCKET",
		"SCHEDULE_GROUP"},
	Build: build,
}

// build mounts the workflow routes and the run routes on one router, over
// one tool catalog; runs are handed to RunnerFunction.
func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	models, err := providers.Registry(ctx, cfg)
	if err != nil {
		return nil, err
	}
	client := d.ToolClient(cfg, 0)
	// Steps and proposals are checked against the built-in tools and the
	// user's own remote MCP tools (their stored lists; none is called here).
	catalog := d.UserTools(cfg, toolclient.NewCatalog(client, cfg.ToolsCacheTTL, d.Now), nil, -1)
	// Runs' large values: kept in the blob store, signed for reads,
	// deleted with their workflow.
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	// Deleting a workflow deletes its triggers and their schedules.
	sched, err := schedules.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	// The one run service (a waiting run cancelled here ends here: a
	// schedule's overlap marker is released), whose run store the
	// workflow service deletes a workflow's runs through, and trigger
	// service, which deletes its triggers.
	rs, err := runstart.Build(ctx, cfg, d, blobs, sched)
	if err != nil {
		return nil, err
	}
	workflows := store.NewWorkflows(d.DB, cfg.DataTable)
	svc := rs.Workflows(cfg, d, proposal.Definitions{Catalog: catalog})
	proposals := proposal.NewService(proposal.Options{Store: workflows, Models: models, Catalog: catalog, Usage: d.Meter(cfg), Now: d.Now})
	authn := d.Auth(cfg)
	lim := workflow.Limits{Limiter: d.Limiter(cfg), Messages: cfg.RateLimitMessages, Resumes: cfg.RateLimitResumes}
	ping := d.PingInterval
	if ping <= 0 {
		ping = chat.PingInterval
	}
	routes := workflow.Routes(svc, authn)
	for _, r := range []*httpapi.Router{proposal.Routes(proposals, authn, lim), runs.Routes(rs.Service, authn, lim, ping)} {
		routes.Mount(r, r.Patterns()...)
	}
	return routes, nil
}
