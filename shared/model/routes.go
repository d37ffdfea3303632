package model

import (
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
)

// Routes returns the handler of the model endpoints (ModelsFunction).
// Every route requires a session.
func Routes(reg *Registry, prefs Preferences, authn *auth.Service) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("GET /api/models", authn.Require(handleList(reg)))
	r.Handle("POST /api/users/{userId}/model-preference", authn.Require(handleSetPreference(reg, prefs)))
	return r
}
