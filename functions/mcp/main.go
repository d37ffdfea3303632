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

	"github.com/workflowchat/service/functions/assembly/mcpfn"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/sandbox"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/tracing/otlp"
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

// newHandler builds the tool server from its builder, mcpfn.Mcp, the
// one infra/local mounts for the dev server. worker is the program of the
// sandbox workers that run the isolated tools: this binary in production;
// empty runs them in process, for tests that cannot start their own binary
// as a worker (a test binary is not one).
func newHandler(getenv func(string) string, worker string) (http.Handler, error) {
	cfg, err := config.Load(getenv)
	if err == nil {
		err = cfg.Require(mcpfn.Required...)
	}
	if err != nil {
		return nil, err
	}
	logger := logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
	if _, err := otlp.FromEnv(getenv, "", logger); err != nil {
		return nil, err
	}
	var sb tools.Sandbox
	if worker != "" {
		// The workers start with the first isolated tool call, not at
		// the cold start.
		lazy, err := mcpfn.NewLazySandbox(cfg, worker, logger)
		if err != nil {
			return nil, err
		}
		sb = lazy
	}
	blobs, err := mcpfn.Blobs(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	routes, err := mcpfn.Mcp(context.Background(), cfg, sb, blobs)
	if err != nil {
		return nil, err
	}
	return httpapi.Stack(routes, httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins}), nil
}
