package usage

import (
	"net/http"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
)

// Routes returns the handler of GET /api/users/{userId}/usage?month=YYYY-MM
// (ModelsFunction). It requires a session.
func Routes(m *Meter, authn *auth.Service) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("GET /api/users/{userId}/usage", authn.Require(auth.SelfPath(handleReport(m))))
	return r
}

func handleReport(m *Meter) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Report, error) {
		return m.Report(r.Context(), r.PathValue("userId"), r.URL.Query().Get("month"))
	})
}
