package runs

import (
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/workflow"
)

// Routes returns the handler of the workflow run endpoints (composed
// into WorkflowsFunction). Every route requires a session; starting a run
// is rate limited per user by the Runs rule of l.
func Routes(s *Service, authn *auth.Service, l workflow.Limits) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("POST /api/chats/{chatId}/workflow-runs", authn.Require(l.Limiter.Limit(l.Runs)(handleStartRun(s))))
	r.Handle("GET /api/chats/{chatId}/workflow-runs", authn.Require(handleListRuns(s)))
	r.Handle("POST /api/chats/{chatId}/workflow-runs/{runId}/cancel", authn.Require(handleCancelRun(s)))
	return r
}
