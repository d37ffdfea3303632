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
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/sandbox"
	"github.com/workflowchat/service/shared/tools"
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

// newHandler builds the tool server from its builder, mcpfn.Mcp, the one
// infra/local mounts for the dev server, with worker the program of the
// sandbox workers (this binary; empty in tests: see mcpfn.Lambda).
func newHandler(getenv func(string) string, worker string) (http.Handler, error) {
	return mcpfn.Lambda(context.Background(), getenv, worker, mcpfn.Mcp)
}
