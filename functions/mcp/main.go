// Command mcp is McpFunction: the key-protected tool server (POST /mcp),
// behind a Lambda function URL in BUFFERED mode. Function URL events use
// payload format 2.0, so lambdahttp's HTTP API adapter serves them.
package main

import (
	"fmt"
	"net/http"
	"os"

	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/tools"
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
	cfg, err := config.Load(getenv)
	if err == nil {
		err = cfg.Require("MCP_SERVICE_KEY")
	}
	if err != nil {
		return nil, err
	}
	models, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		return nil, err
	}
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{
		Generator:            models,
		DefaultModelID:       cfg.DefaultModelID,
		AllowPrivateNetworks: cfg.ToolsAllowPrivateNetworks,
	})...)
	if err != nil {
		return nil, err
	}
	logger := logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
	return httpapi.Stack(toolserver.Routes(reg, cfg.MCPServiceKey), httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins}), nil
}
