package toolpolicy

import (
	"net/http"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
)

// Routes returns the handler of the tool permission endpoints
// (ToolsFunction). Every route requires a session.
//
//   - GET /api/users/{userId}/tool-permissions: every tool's policy.
//   - PUT /api/users/{userId}/tool-permissions/{toolId} {policy}: store
//     the user's policy of one tool; the path is checked (400 INVALID_ID,
//     403 another user's) before the body.
func Routes(s *Service, authn *auth.Service) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("GET /api/users/{userId}/tool-permissions", authn.Require(auth.SelfPath(handleList(s))))
	r.Handle("PUT /api/users/{userId}/tool-permissions/{toolId}", authn.Require(auth.SelfPath(handleSet(s))))
	return r
}

type permissionsResponse struct {
	Permissions []Permission `json:"permissions"`
}

func handleList(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (permissionsResponse, error) {
		ps, err := s.List(r.Context(), r.PathValue("userId"))
		return permissionsResponse{Permissions: ps}, err
	})
}

// SetRequest is the body of PUT .../tool-permissions/{toolId}.
type SetRequest struct {
	Policy string `json:"policy"`
}

// Validate requires policy to be allow, ask or deny.
func (r SetRequest) Validate() error { return CheckPolicy("toolpolicy.SetRequest", r.Policy) }

func handleSet(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in SetRequest) (Permission, error) {
		return s.Set(r.Context(), r.PathValue("userId"), r.PathValue("toolId"), in.Policy)
	})
}
