// Command runner is RunnerFunction: invoked asynchronously (InvocationType
// Event) by WorkflowsFunction and the sweeper, it executes one attempt of
// a durable workflow run, checkpointing each step. The dev server runs the
// same runner (runnerfn.Runner) in process.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/workflowchat/service/functions/assembly/runnerfn"
	"github.com/workflowchat/service/shared/workflow"
)

func main() {
	h, err := newHandler(context.Background(), os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.Start(h)
}

// newHandler builds the function from its builder, runnerfn.Lambda.
func newHandler(ctx context.Context, getenv func(string) string) (func(context.Context, workflow.RunRef) error, error) {
	return runnerfn.Lambda(ctx, getenv)
}
