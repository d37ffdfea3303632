// Command auth is AuthFunction: sign-up, sign-in, session and sign-out.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/store"
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
	cfg, err := config.Load(getenv)
	if err == nil {
		err = cfg.Require("USERS_TABLE", "SESSIONS_TABLE")
	}
	if err != nil {
		return nil, err
	}
	db, err := store.Open(ctx, store.Options{Region: cfg.Region, Endpoint: cfg.DynamoDBEndpoint})
	if err != nil {
		return nil, err
	}
	authn := auth.NewService(store.NewUsers(db, cfg.UsersTable, cfg.SessionsTable), nil, time.Now)
	logger := logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
	return httpapi.Stack(auth.Routes(authn), httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins}), nil
}
