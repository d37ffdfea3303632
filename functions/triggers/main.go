// Command triggers is TriggersFunction: the triggers of workflows (CRUD
// under /api/workflows/{workflowId}/triggers, rotate-secret) and the
// webhook route POST /hooks/{triggerId}, which takes no session: the
// trigger's signature authorizes it.
package main

import (
	"context"
	"net/http"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/triggersfn"
	"github.com/workflowchat/service/shared/lambdahttp"
)

func main() { assembly.Main(newHandler, lambdahttp.Start) }

// newHandler builds the function from its builder, triggersfn.Triggers, the
// one infra/local mounts for the dev server.
func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	return assembly.Lambda(ctx, getenv, triggersfn.Triggers)
}
