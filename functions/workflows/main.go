// Command workflows is WorkflowsFunction: workflows, their chat and
// proposals.
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
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/workflow"
)

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
		err = cfg.Require("USERS_TABLE", "SESSIONS_TABLE", "DATA_TABLE", "MCP_URL", "MCP_SERVICE_KEY")
	}
	if err != nil {
		return nil, err
	}
	db, err := store.Open(ctx, store.Options{Region: cfg.Region, Endpoint: cfg.DynamoDBEndpoint})
	if err != nil {
		return nil, err
	}
	models, err := providers.Registry(ctx, cfg)
	if err != nil {
		return nil, err
	}
	users := store.NewUsers(db, cfg.UsersTable, cfg.SessionsTable)
	svc := workflow.NewService(workflow.Options{
		Store:   store.NewWorkflows(db, cfg.DataTable),
		Runs:    store.NewRuns(db, cfg.DataTable),
		Models:  models,
		Catalog: workflow.NewToolserverCatalog(toolserver.NewClient(cfg.MCPURL, cfg.MCPServiceKey, nil), cfg.ToolsCacheTTL),
	})
	logger := logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
	routes := workflow.Routes(svc, auth.NewService(users, nil, time.Now))
	return httpapi.Stack(routes, httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins}), nil
}
