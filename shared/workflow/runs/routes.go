package runs

import (
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/workflow"
)

// Routes returns the handler of the workflow run endpoints (composed
// into WorkflowsFunction). Every route requires a session; starting a run
// and retrying one are rate limited per user by the Runs rule of l,
// following a run's events by its Resumes rule; ping is the events'
// keep-alive interval.
func Routes(s *Service, authn *auth.Service, l workflow.Limits, ping time.Duration) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("POST /api/chats/{chatId}/workflow-runs", authn.Require(l.Limiter.Limit(l.Runs)(handleStartRun(s, WaitBound))))
	r.Handle("GET /api/chats/{chatId}/workflow-runs", authn.Require(handleListRuns(s)))
	r.Handle("POST /api/chats/{chatId}/workflow-runs/{runId}/cancel", authn.Require(handleCancelRun(s)))
	r.Handle("GET /api/chats/{chatId}/workflow-runs/{runId}", authn.Require(handleGetRun(s)))
	r.Handle("GET /api/chats/{chatId}/workflow-runs/{runId}/events", authn.Require(l.Limiter.Limit(l.Resumes)(handleRunEvents(s, ping))))
	r.Handle("POST /api/chats/{chatId}/workflow-runs/{runId}/retry", authn.Require(l.Limiter.Limit(l.Runs)(handleRetryRun(s))))
	return r
}
