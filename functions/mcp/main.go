// Command mcp is McpFunction: the key-protected tool server (POST /mcp),
// behind a Lambda function URL in BUFFERED mode. Function URL events use
// payload format 2.0, so lambdahttp's HTTP API adapter serves them.
//
// The same binary is its own tool worker: the tools that evaluate untrusted
// input run in child processes of it (started with sandbox.WorkerArg)
// under memory and CPU limits, since the function has no other program.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/workflowchat/service/functions/internal/services"
	"github.com/workflowchat/service/functions/internal/wiring"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/sandbox"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

func main() {
	if sandbox.IsWorker() {
		tools.ServeWorker() // never returns
	}
	self, err := sandbox.SelfPath()
	var h http.Handler
	if err == nil {
		h, err = newHandler(os.Getenv, self)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambdahttp.Start(h)
}

// newHandler builds the tool server. worker is the program of the
// sandbox workers that run the isolated tools: this binary in production;
// empty runs them in process, for tests that cannot start their own binary
// as a worker (a test binary is not one).
func newHandler(getenv func(string) string, worker string) (http.Handler, error) {
	cfg, err := wiring.Config(getenv, "MCP_SERVICE_KEY")
	if err != nil {
		return nil, err
	}
	models, err := services.Models(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	var sb tools.Sandbox
	if worker != "" {
		pool, err := tools.NewSandbox(worker, logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel))
		if err != nil {
			return nil, err
		}
		sb = pool
	}
	reg, err := services.ToolRegistry(cfg, models, sb)
	if err != nil {
		return nil, err
	}
	return wiring.Stack(cfg, toolserver.Routes(reg, cfg.MCPServiceKey)), nil
}
