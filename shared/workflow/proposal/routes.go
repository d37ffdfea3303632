package proposal

import (
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/workflow"
)

// Routes returns the handler of the workflow chat's writes
// (WorkflowsFunction): posting a message, applying and rejecting a
// proposal. Every route requires a session; posting a message is rate
// limited per user by the Messages rule of l.
func Routes(s *Service, authn *auth.Service, l workflow.Limits) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("POST /api/workflows/{workflowId}/messages", authn.Require(l.Limiter.Limit(l.Messages)(handleSend(s))))
	r.Handle("POST /api/workflows/{workflowId}/messages/apply", authn.Require(handleApply(s)))
	r.Handle("POST /api/workflows/{workflowId}/messages/reject", authn.Require(handleReject(s)))
	return r
}
