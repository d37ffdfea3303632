// Command health is HealthFunction: GET /api/liveness.
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/workflowchat/service/functions/internal/wiring"
	"github.com/workflowchat/service/shared/health"
	"github.com/workflowchat/service/shared/lambdahttp"
)

func main() {
	h, err := newHandler(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambdahttp.Start(h)
}

func newHandler(getenv func(string) string) (http.Handler, error) {
	cfg, err := wiring.Config(getenv)
	if err != nil {
		return nil, err
	}
	return wiring.Stack(cfg, health.Routes(time.Now)), nil
}
