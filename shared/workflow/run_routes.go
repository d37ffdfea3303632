package workflow

import (
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
)

// RunRoutes returns the handler of the workflow run endpoints (composed
// into WorkflowsFunction). Every route requires a session.
func RunRoutes(s *RunService, authn *auth.Service) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("POST /api/chats/{chatId}/workflow-runs", authn.Require(handleStartRun(s)))
	r.Handle("GET /api/chats/{chatId}/workflow-runs", authn.Require(handleListRuns(s)))
	r.Handle("POST /api/chats/{chatId}/workflow-runs/{runId}/cancel", authn.Require(handleCancelRun(s)))
	return r
}
