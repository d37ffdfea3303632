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
// configured models.
func ToolRegistry(cfg config.Config, models *model.Registry) (*tools.Registry, error) {
	return tools.NewRegistry(tools.Builtin(tools.Config{
		Generator:            models,
		DefaultModelID:       cfg.DefaultModelID,
		AllowPrivateNetworks: cfg.ToolsAllowPrivateNetworks,
	})...)
}

// Chat builds the chat service: chats in the Data table, the configured
// models, the tool server's tools, the users' model preferences.
func Chat(ctx context.Context, cfg config.Config, b wiring.Base) (*chat.Service, error) {
	models, err := Models(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return chat.NewService(chat.Options{
		Store: store.NewChats(b.DB, cfg.DataTable), Models: models, Preferences: b.Users, DefaultModelID: cfg.DefaultModelID,
		Tools: toolserver.NewModelTools(ToolClient(cfg, 0), cfg.ToolsCacheTTL, time.Now),
	}), nil
}
