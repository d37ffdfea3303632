// Command models is ModelsFunction: the model list and model preferences.
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
	"github.com/workflowchat/service/shared/model"
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
	users := store.NewUsers(db, cfg.UsersTable, cfg.SessionsTable)
	models, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		return nil, err
	}
	logger := logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
	routes := model.Routes(models, users, auth.NewService(users, nil, time.Now))
	return httpapi.Stack(routes, httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins}), nil
}
