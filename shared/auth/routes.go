package auth

import (
	"github.com/workflowchat/service/shared/httpapi"
)

// Routes returns the handler of the auth endpoints (AuthFunction).
func Routes(s *Service) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("POST /api/auth/sign-up/email", handleSignUp(s))
	r.Handle("POST /api/auth/sign-in/email", handleSignIn(s))
	r.Handle("GET /api/auth/session", s.Require(handleSession()))
	r.Handle("POST /api/auth/sign-out", handleSignOut(s))
	return r
}
