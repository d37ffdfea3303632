// Command workflows is WorkflowsFunction: workflows, their chat and
// proposals, and workflow runs in chats.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/workflowchat/service/functions/internal/services"
	"github.com/workflowchat/service/functions/internal/wiring"
	"github.com/workflowchat/service/shared/lambdahttp"
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
	cfg, err := wiring.Config(getenv, "USERS_TABLE", "SESSIONS_TABLE", "DATA_TABLE", "RATE_LIMITS_TABLE", "MCP_URL", "MCP_SERVICE_KEY")
	if err != nil {
		return nil, err
	}
	b, err := wiring.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	svc, runs, err := services.Workflows(ctx, cfg, b)
	if err != nil {
		return nil, err
	}
	lim := services.WorkflowLimits(cfg, b)
	routes := workflow.Routes(svc, b.Auth, lim)
	runRoutes := workflow.RunRoutes(runs, b.Auth, lim)
	routes.Mount(runRoutes, runRoutes.Patterns()...)
	return wiring.Stack(cfg, routes), nil
}
