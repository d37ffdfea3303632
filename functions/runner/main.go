// Command runner is RunnerFunction: invoked asynchronously (InvocationType
// Event) by WorkflowsFunction and the sweeper, it executes one attempt of
// a durable workflow run, checkpointing each step. The dev server runs the
// same runner (runnerfn.Runner) in process.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/runnerfn"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/workflow"
)

func main() {
	// A PDF worker of this binary's knowledge service (knowledgecore.PDF).
	if knowledge.IsPDFWorker() {
		knowledge.ServePDFWorker() // never returns
	}
	assembly.Main(newHandler, func(h func(context.Context, workflow.RunRef) error) { lambda.Start(h) })
}

// newHandler builds the function from its builder, runnerfn.Lambda.
func newHandler(ctx context.Context, getenv func(string) string) (func(context.Context, workflow.RunRef) error, error) {
	return runnerfn.Lambda(ctx, getenv)
}
