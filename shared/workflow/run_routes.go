package workflow

import (
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
)

// RunRoutes returns the handler of the workflow run endpoints (composed
// into WorkflowsFunction). Every route requires a session; starting a run
// is rate limited per user by the Runs rule of lim (at most one Limits).
func RunRoutes(s *RunService, authn *auth.Service, lim ...Limits) *httpapi.Router {
	l := limitsOf(lim)
	r := httpapi.NewRouter()
	r.Handle("POST /api/chats/{chatId}/workflow-runs", authn.Require(l.Limiter.Limit(l.Runs)(handleStartRun(s))))
	r.Handle("GET /api/chats/{chatId}/workflow-runs", authn.Require(handleListRuns(s)))
	r.Handle("POST /api/chats/{chatId}/workflow-runs/{runId}/cancel", authn.Require(handleCancelRun(s)))
	return r
}
