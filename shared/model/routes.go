package model

import (
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
)

// Routes returns the handler of the model endpoints (ModelsFunction).
// Every route requires a session; a {userId} path is checked (400
// INVALID_ID, 403 another user's) before the body.
func Routes(reg *Registry, prefs Preferences, authn *auth.Service) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("GET /api/models", authn.Require(handleList(reg)))
	r.Handle("POST /api/users/{userId}/model-preference", authn.Require(auth.SelfPath(handleSetPreference(reg, prefs))))
	return r
}
