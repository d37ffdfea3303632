// Command auth is AuthFunction: sign-up, sign-in, session and sign-out.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/authfn"
	"github.com/workflowchat/service/shared/lambdahttp"
)

func main() {
	h, err := newHandler(context.Background(), os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambdahttp.Start(h)
}

// newHandler builds the function from its builder, authfn.Auth, the one
// infra/local mounts for the dev server.
func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	return assembly.Lambda(ctx, getenv, authfn.Auth)
}
