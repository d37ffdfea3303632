// Package wiring builds, from the configuration, the clients and services
// the Lambda functions share, so that each functions/<name>/main.go stays a
// few lines: load the config, build once per cold start, fail init loudly,
// start the adapter. Like the mains, it is where concrete types are named.
package wiring

import (
	"context"
	"net/http"
	"os"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

// Config loads the configuration from getenv and requires the named
// variables. Its errors name the variables at fault.
func Config(getenv func(string) string, required ...string) (config.Config, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return config.Config{}, err
	}
	return cfg, cfg.Require(required...)
}

// Stack wraps routes in the standard middleware, logging to stdout in the
// configured format (JSON in Lambda).
func Stack(cfg config.Config, routes http.Handler) http.Handler {
	logger := logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
	return httpapi.Stack(routes, httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins})
}

// Base is what every authenticated function needs: DynamoDB, the users
// store and the auth service, and the per-user rate limiter (over
// RATE_LIMITS_TABLE; only the functions with limited routes use it, and
// they require that variable).
type Base struct {
	DB      *dynamo.DB
	Users   *store.Users
	Auth    *auth.Service
	Limiter *ratelimit.Limiter
}

// Open connects to DynamoDB (AWS, or DYNAMODB_ENDPOINT) and builds Base.
func Open(ctx context.Context, cfg config.Config) (Base, error) {
	db, err := store.Open(ctx, store.Options{Region: cfg.Region, Endpoint: cfg.DynamoDBEndpoint})
	if err != nil {
		return Base{}, err
	}
	users := store.NewUsers(db, cfg.UsersTable, cfg.SessionsTable)
	return Base{DB: db, Users: users, Auth: auth.NewService(users, nil, time.Now),
		Limiter: ratelimit.New(store.NewRateLimits(db, cfg.RateLimitsTable), time.Now)}, nil
}

// ChatLimits returns the rate limits of the chat routes: the configured
// RATE_LIMIT_MESSAGES and RATE_LIMIT_STREAMS rules on b's limiter.
func ChatLimits(cfg config.Config, b Base) chat.Limits {
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
func Chat(ctx context.Context, cfg config.Config, b Base) (*chat.Service, error) {
	models, err := Models(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return chat.NewService(chat.Options{
		Store: store.NewChats(b.DB, cfg.DataTable), Models: models, Preferences: b.Users, DefaultModelID: cfg.DefaultModelID,
		Tools: toolserver.NewModelTools(ToolClient(cfg, 0), cfg.ToolsCacheTTL, time.Now),
	}), nil
}
