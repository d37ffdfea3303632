// Command workflows is WorkflowsFunction: workflows, their chat and
// proposals, and workflow runs in chats.
package main

import (
	"context"
	"net/http"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/workflowsfn"
	"github.com/workflowchat/service/shared/lambdahttp"
)

func main() { assembly.Main(newHandler, lambdahttp.Start) }

// newHandler builds the function from its builder, workflowsfn.Workflows, the one
// infra/local mounts for the dev server.
func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	return assembly.Lambda(ctx, getenv, workflowsfn.Workflows)
}
