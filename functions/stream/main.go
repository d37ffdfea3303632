// Command stream is StreamFunction: the chat reply as Server-Sent Events,
// behind a Lambda function URL with response streaming.
package main

import (
	"context"
	"net/http"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/streamfn"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/lambdahttp"
)

func main() {
	// A PDF worker of this binary's knowledge service (knowledgecore.PDF).
	if knowledge.IsPDFWorker() {
		knowledge.ServePDFWorker() // never returns
	}
	assembly.Main(newHandler, lambdahttp.StartStreaming)
}

// newHandler builds the function from its builder, streamfn.Stream, the one
// infra/local mounts for the dev server.
func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	return assembly.Lambda(ctx, getenv, streamfn.Stream)
}
