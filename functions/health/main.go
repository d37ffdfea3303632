// Command health is HealthFunction: GET /api/liveness. It needs no storage
// and imports no DynamoDB client, so it stays the smallest, fastest function.
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/workflowchat/service/functions/assembly/healthfn"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/logging"
)

func main() {
	h, err := newHandler(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambdahttp.Start(h)
}

// newHandler builds the function from its builder, healthfn.Health, the
// one infra/local mounts for the dev server.
func newHandler(getenv func(string) string) (http.Handler, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return nil, err
	}
	logger := logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
	return httpapi.Stack(healthfn.Health(time.Now), httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins}), nil
}
