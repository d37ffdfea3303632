// Command auth is AuthFunction: sign-up, sign-in, session and sign-out.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/workflowchat/service/functions/internal/wiring"
	"github.com/workflowchat/service/shared/auth"
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

func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	cfg, err := wiring.Config(getenv, "USERS_TABLE", "SESSIONS_TABLE", "RATE_LIMITS_TABLE")
	if err != nil {
		return nil, err
	}
	b, err := wiring.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return wiring.Stack(cfg, auth.Routes(b.Auth, wiring.Attempts(cfg, b))), nil
}
