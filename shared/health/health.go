// Package health is the liveness endpoint (HealthFunction).
package health

import (
	"net/http"
	"time"

	"github.com/workflowchat/service/shared/httpapi"
)

// Status is the liveness body. It is not wrapped in {"data": ...}.
type Status struct {
	Status    string    `json:"status"`
	Timestamp time.Time `json:"timestamp"`
}

// Routes returns the handler of GET /api/liveness, which needs no session
// and reports the time from now.
func Routes(now func() time.Time) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("GET /api/liveness", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, Status{Status: "ok", Timestamp: now().UTC()})
	}))
	return r
}
