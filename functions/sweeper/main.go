// Command sweeper is SweeperFunction: on an EventBridge schedule (every
// minute) it finds the streamed replies whose lease ran out, because the
// process generating them died, and ends them failed (INTERRUPTED) so that
// their followers finish and their chats take messages again. The dev
// server runs the same sweeper (sweeperfn.Sweeper) on a ticker.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/sweeperfn"
	"github.com/workflowchat/service/shared/knowledge"
)

func main() {
	// A PDF worker of this binary's knowledge service (knowledgecore.PDF).
	if knowledge.IsPDFWorker() {
		knowledge.ServePDFWorker() // never returns
	}
	assembly.Main(newHandler, func(h func(context.Context, events.EventBridgeEvent) error) { lambda.Start(h) })
}

// newHandler builds the function from its builder, sweeperfn.Lambda, over
// sweeperfn.Sweeper, the sweeper infra/local runs for the dev server.
func newHandler(ctx context.Context, getenv func(string) string) (func(context.Context, events.EventBridgeEvent) error, error) {
	return sweeperfn.Lambda(ctx, getenv)
}
