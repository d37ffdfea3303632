package export

import (
	"net/http"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
)

// Routes adds the export endpoints to r (AuthFunction's group, which
// owns /api/users/{userId}): require signs the request in, limit counts
// each request of an export (RATE_LIMIT_EXPORTS) before it is queued. A
// request made while an export is pending or running is refused (409
// EXPORT_IN_PROGRESS) before limit sees it, so that it is not counted.
// Another user's id in the path is 403 (auth.SelfPath).
func Routes(r *httpapi.Router, s *Service, require, limit httpapi.Middleware) {
	r.Handle("POST /api/users/{userId}/exports", require(auth.SelfPath(idle(s, limit(handleRequest(s))))))
	r.Handle("GET /api/users/{userId}/exports/{exportId}", require(auth.SelfPath(httpapi.PathIDs(handleGet(s), "exportId"))))
}

type requested struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
}

// idle answers 409 EXPORT_IN_PROGRESS while the user has an export pending
// or running, and otherwise passes the request to next.
func idle(s *Service, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.CheckIdle(r.Context()); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func handleRequest(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusAccepted, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (requested, error) {
		e, err := s.Request(r.Context())
		if err != nil {
			return requested{}, err
		}
		return requested{ID: e.ID, Status: e.Status}, nil
	})
}

func handleGet(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Export, error) {
		return s.Get(r.Context(), r.PathValue("exportId"))
	})
}
