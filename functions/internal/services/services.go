// Package services builds, from the configuration, the heavier services
// some Lambda functions share: the model registry with every configured
// provider, the tool server's client and catalog, and the chat service.
// Functions that need none of these import only package wiring, which
// keeps their binaries and cold starts small.
package services

import (
	"context"
	"net/http"
	"time"

	"github.com/workflowchat/service/functions/internal/wiring"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/workflow"
)

// ChatLimits returns the rate limits of the chat routes: the configured
// RATE_LIMIT_MESSAGES and RATE_LIMIT_STREAMS rules on b's limiter.
func ChatLimits(cfg config.Config, b wiring.Base) chat.Limits {
	return chat.Limits{Limiter: b.Limiter, Messages: cfg.RateLimitMessages, Streams: cfg.RateLimitStreams}
}

// Models builds the registry of every model the configuration enables.
func Models(ctx context.Context, cfg config.Config) (*model.Registry, error) {
	return providers.Registry(ctx, cfg)
}

// ToolClient returns a client of the tool server at MCP_URL; timeout zero
// means the client's default.
func ToolClient(cfg config.Config, timeout time.Duration) *toolserver.Client {
	var hc *http.Client
	if timeout > 0 {
		hc = &http.Client{Timeout: timeout}
	}
	return toolserver.NewClient(cfg.MCPURL, cfg.MCPServiceKey, hc)
}

// ToolRegistry builds the built-in tool catalog, with llm_generate on the
// configured models and the isolated tools (jq, expressions, templates,
// regular expressions, CSV, HTML) running in sb's worker processes; nil sb
// runs them in process, where nothing bounds their memory (tests only).
func ToolRegistry(cfg config.Config, models *model.Registry, sb tools.Sandbox) (*tools.Registry, error) {
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{
		Generator:            models,
		DefaultModelID:       cfg.DefaultModelID,
		AllowPrivateNetworks: cfg.ToolsAllowPrivateNetworks,
	})...)
	if err != nil || sb == nil {
		return reg, err
	}
	return reg.WithSandbox(sb), nil
}

// ToolCatalog returns the function's one tool catalog over client, cached
// for TOOLS_CACHE_TTL.
func ToolCatalog(cfg config.Config, client *toolserver.Client) *tools.Catalog {
	return tools.NewCatalog(client.Catalog(), cfg.ToolsCacheTTL, time.Now)
}

// Chat builds the chat service: chats in the Data table, the configured
// models, the tool server's tools, the users' model preferences, and the
// workflow runner for chats that run workflows.
func Chat(ctx context.Context, cfg config.Config, b wiring.Base) (*chat.Service, error) {
	models, err := Models(ctx, cfg)
	if err != nil {
		return nil, err
	}
	client := ToolClient(cfg, 0)
	tools := toolserver.NewModelTools(client, ToolCatalog(cfg, client))
	return chat.NewService(chat.Options{
		Store: store.NewChats(b.DB, cfg.DataTable), Models: models, Preferences: b.Users, DefaultModelID: cfg.DefaultModelID,
		Tools: tools, Workflows: runService(cfg, b, tools, workflow.StreamRunTimeout).ChatRunner(),
	}), nil
}

func runService(cfg config.Config, b wiring.Base, tools *toolserver.ModelTools, timeout time.Duration) *workflow.RunService {
	return workflow.NewRunService(workflow.RunServiceOptions{
		Runs: store.NewRuns(b.DB, cfg.DataTable), Workflows: store.NewWorkflows(b.DB, cfg.DataTable), Tools: tools, RunTimeout: timeout,
	})
}

// Workflows builds the workflow service (workflows, their chat, proposals)
// and the run service.
func Workflows(ctx context.Context, cfg config.Config, b wiring.Base) (*workflow.Service, *workflow.RunService, error) {
	models, err := Models(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	client := ToolClient(cfg, 0)
	catalog := ToolCatalog(cfg, client)
	svc := workflow.NewService(workflow.Options{
		Store: store.NewWorkflows(b.DB, cfg.DataTable), Runs: store.NewRuns(b.DB, cfg.DataTable), Models: models,
		Catalog: workflow.NewToolCatalog(catalog),
	})
	return svc, runService(cfg, b, toolserver.NewModelTools(client, catalog), workflow.APIRunTimeout), nil
}

// WorkflowLimits returns the rate limits of the workflow routes: the
// configured RATE_LIMIT_MESSAGES and RATE_LIMIT_RUNS rules on b's limiter.
func WorkflowLimits(cfg config.Config, b wiring.Base) workflow.Limits {
	return workflow.Limits{Limiter: b.Limiter, Messages: cfg.RateLimitMessages, Runs: cfg.RateLimitRuns}
}
