package runs

import (
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/workflow"
)

// Routes returns the handler of the workflow run endpoints (composed
// into WorkflowsFunction): a chat's runs under
// /api/chats/{chatId}/workflow-runs, and every run of a workflow,
// whatever started it, under /api/workflows/{workflowId}/runs, where POST
// starts one with no chat. Every route requires a session. Starting a
// run and retrying one count against the user's run rate limit inside
// s (Options.Limiter), as every other start does; following a run's
// events is limited by the Resumes rule of l; ping is the events'
// keep-alive interval. A human step is answered at
// .../{runId}/steps/{stepId}/respond.
func Routes(s *Service, authn *auth.Service, l workflow.Limits, ping time.Duration) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("POST /api/chats/{chatId}/workflow-runs", authn.Require(handleStartRun(s, WaitBound)))
	r.Handle("POST /api/workflows/{workflowId}/runs", authn.Require(handleStartWorkflowRun(s, WaitBound)))
	for _, base := range []string{"/api/chats/{chatId}/workflow-runs", "/api/workflows/{workflowId}/runs"} {
		r.Handle("GET "+base, authn.Require(handleListRuns(s)))
		r.Handle("GET "+base+"/{runId}", authn.Require(handleGetRun(s)))
		r.Handle("GET "+base+"/{runId}/events", authn.Require(l.Limiter.Limit(l.Resumes)(handleRunEvents(s, ping))))
		r.Handle("POST "+base+"/{runId}/cancel", authn.Require(handleCancelRun(s)))
		r.Handle("POST "+base+"/{runId}/retry", authn.Require(handleRetryRun(s)))
		r.Handle("POST "+base+"/{runId}/steps/{stepId}/respond", authn.Require(handleRespond(s)))
	}
	return r
}
