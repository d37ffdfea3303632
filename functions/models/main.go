// Command models is ModelsFunction: the models this deployment serves and
// users' model preferences.
package main

import (
	"context"
	"net/http"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/modelsfn"
	"github.com/workflowchat/service/shared/lambdahttp"
)

func main() { assembly.Main(newHandler, lambdahttp.Start) }

// newHandler builds the function from its builder, modelsfn.Models, the one
// infra/local mounts for the dev server.
func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	return assembly.Lambda(ctx, getenv, modelsfn.Models)
}
