package workflow

import (
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
)

// Routes returns the handler of the workflow endpoints (WorkflowsFunction):
// workflows, their chat and proposals. Every route requires a session;
// posting a message is rate limited per user by the Messages rule of l.
func Routes(s *Service, authn *auth.Service, l Limits) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("POST /api/workflows", authn.Require(handleCreate(s)))
	r.Handle("GET /api/workflows/{workflowId}", authn.Require(handleGet(s)))
	r.Handle("PATCH /api/workflows/{workflowId}", authn.Require(handleUpdate(s)))
	r.Handle("DELETE /api/workflows/{workflowId}", authn.Require(handleDelete(s)))
	r.Handle("GET /api/users/{userId}/workflows", authn.Require(handleList(s)))
	r.Handle("POST /api/workflows/{workflowId}/messages", authn.Require(l.Limiter.Limit(l.Messages)(handleSend(s))))
	r.Handle("GET /api/workflows/{workflowId}/messages", authn.Require(handleMessages(s)))
	r.Handle("POST /api/workflows/{workflowId}/messages/apply", authn.Require(handleApply(s)))
	r.Handle("POST /api/workflows/{workflowId}/messages/reject", authn.Require(handleReject(s)))
	return r
}
