// Command models is ModelsFunction: the models this deployment serves and
// users' model preferences.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/workflowchat/service/functions/internal/services"
	"github.com/workflowchat/service/functions/internal/wiring"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/model"
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
	cfg, err := wiring.Config(getenv, "USERS_TABLE", "SESSIONS_TABLE")
	if err != nil {
		return nil, err
	}
	b, err := wiring.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	models, err := services.Models(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return wiring.Stack(cfg, model.Routes(models, b.Users, b.Auth)), nil
}
