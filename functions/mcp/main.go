// Command mcp is McpFunction: the key-protected tool server (POST /mcp),
// behind a Lambda function URL in BUFFERED mode. Function URL events use
// payload format 2.0, so lambdahttp's HTTP API adapter serves them.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/workflowchat/service/functions/internal/services"
	"github.com/workflowchat/service/functions/internal/wiring"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/toolserver"
)

func main() {
	h, err := newHandler(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambdahttp.Start(h)
}

func newHandler(getenv func(string) string) (http.Handler, error) {
	cfg, err := wiring.Config(getenv, "MCP_SERVICE_KEY")
	if err != nil {
		return nil, err
	}
	models, err := services.Models(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	reg, err := services.ToolRegistry(cfg, models)
	if err != nil {
		return nil, err
	}
	return wiring.Stack(cfg, toolserver.Routes(reg, cfg.MCPServiceKey)), nil
}
