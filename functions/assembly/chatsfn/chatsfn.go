// Package chatsfn builds ChatsFunction (chats and their messages) and
// StreamFunction (the chat reply as Server-Sent Events): two functions
// over the same chat service, so one builder package.
package chatsfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/workflow/runs"
)

var required = []string{"USERS_TABLE", "SESSIONS_TABLE", "DATA_TABLE", "RATE_LIMITS_TABLE", "MCP_URL", "MCP_SERVICE_KEY"}

// Chats is ChatsFunction.
var Chats = assembly.Function{
	LogicalID: "ChatsFunction",
	Required:  required,
	Build: func(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
		svc, err := service(ctx, cfg, d)
		if err != nil {
			return nil, err
		}
		return chat.Routes(svc, d.Auth(cfg), limits(cfg, d)), nil
	},
}

// Stream is StreamFunction, behind a Lambda function URL with response
// streaming.
var Stream = assembly.Function{
	LogicalID:   "StreamFunction",
	Required:    required,
	FunctionURL: true,
	Build: func(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
		svc, err := service(ctx, cfg, d)
		if err != nil {
			return nil, err
		}
		return chat.StreamRoutes(svc, d.Auth(cfg), d.PingInterval, limits(cfg, d)), nil
	},
}

// limits are the chat routes' rate limits: RATE_LIMIT_MESSAGES,
// RATE_LIMIT_STREAMS and RATE_LIMIT_RESUMES.
func limits(cfg config.Config, d assembly.Deps) chat.Limits {
	return chat.Limits{Limiter: d.Limiter(cfg), Messages: cfg.RateLimitMessages, Streams: cfg.RateLimitStreams, Resumes: cfg.RateLimitResumes}
}

// service builds the chat service: chats in the Data table, the configured
// models under the usage meter (each model call reserves the user's
// budget and settles its usage in the Users table), the tool server's
// tools (one catalog) behind the tool gate (policies, budget, identity),
// the users' model preferences, and the runner of workflows in chats
// (its steps through the same gate), with the stream's time limit.
func service(ctx context.Context, cfg config.Config, d assembly.Deps) (*chat.Service, error) {
	models, err := providers.Registry(ctx, cfg)
	if err != nil {
		return nil, err
	}
	catalog := toolclient.NewCatalog(d.ToolClient(cfg, 0), cfg.ToolsCacheTTL, d.Now)
	gate := d.Gate(cfg, catalog)
	runner := runs.NewService(runs.Options{
		Runs: store.NewRuns(d.DB, cfg.DataTable), Workflows: store.NewWorkflows(d.DB, cfg.DataTable),
		Tools: gate.Steps(), Now: d.Now, StepTimeout: d.StepTimeout, RunTimeout: runs.StreamRunTimeout,
	})
	return chat.NewService(chat.Options{
		Store: store.NewChats(d.DB, cfg.DataTable), Usage: d.Meter(cfg), Gate: gate, Models: models, Preferences: d.Users(cfg), DefaultModelID: cfg.DefaultModelID,
		Tools: catalog, Workflows: runner, Now: d.Now, Lease: cfg.GenerationLease,
	}), nil
}
