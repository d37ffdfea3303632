// Command health is HealthFunction: GET /api/liveness.
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/health"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/logging"
)

func main() {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambdahttp.Start(newHandler(cfg))
}

func newHandler(cfg config.Config) http.Handler {
	logger := logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
	return httpapi.Stack(health.Routes(time.Now), httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins})
}
