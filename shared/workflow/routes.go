package workflow

import (
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
)

// Routes returns the handler of the workflow endpoints (WorkflowsFunction)
// that create, read, update, delete and list workflows and read their
// chat; package proposal's and package run's routes are mounted beside
// them. Every route requires a session.
func Routes(s *Service, authn *auth.Service) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("POST /api/workflows", authn.Require(handleCreate(s)))
	r.Handle("GET /api/workflows/{workflowId}", authn.Require(handleGet(s)))
	r.Handle("PATCH /api/workflows/{workflowId}", authn.Require(handleUpdate(s)))
	r.Handle("DELETE /api/workflows/{workflowId}", authn.Require(handleDelete(s)))
	r.Handle("GET /api/users/{userId}/workflows", authn.Require(auth.SelfPath(handleList(s))))
	r.Handle("GET /api/workflows/{workflowId}/messages", authn.Require(handleMessages(s)))
	r.Handle("GET /api/workflows/{workflowId}/versions", authn.Require(handleVersions(s)))
	r.Handle("GET /api/workflows/{workflowId}/versions/{version}", authn.Require(handleVersion(s)))
	r.Handle("POST /api/workflows/{workflowId}/versions/{version}/restore", authn.Require(handleRestore(s)))
	return r
}
