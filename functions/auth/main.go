// Command auth is AuthFunction: sign-up, sign-in, session and sign-out.
package main

import (
	"context"
	"net/http"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/authfn"
	"github.com/workflowchat/service/shared/lambdahttp"
)

func main() { assembly.Main(newHandler, lambdahttp.Start) }

// newHandler builds the function from its builder, authfn.Auth, the one
// infra/local mounts for the dev server.
func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	return assembly.Lambda(ctx, getenv, authfn.Auth)
}
