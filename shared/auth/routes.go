package auth

import (
	"context"

	"github.com/workflowchat/service/shared/httpapi"
)

// Routes returns the handler of the auth endpoints (AuthFunction). a
// limits sign-in and sign-up attempts before any password is hashed; nil
// limits nothing (tests of other concerns).
func Routes(s *Service, a Attempts) *httpapi.Router {
	if a == nil {
		a = unlimited{}
	}
	r := httpapi.NewRouter()
	r.Handle("POST /api/auth/sign-up/email", handleSignUp(s, a))
	r.Handle("POST /api/auth/sign-in/email", handleSignIn(s, a))
	r.Handle("GET /api/auth/session", s.Require(handleSession()))
	r.Handle("POST /api/auth/sign-out", handleSignOut(s))
	r.Handle("POST /api/auth/sign-out-all", handleSignOutAll(s))
	r.Handle("DELETE /api/users/{userId}", s.Require(SelfPath(handleDeleteAccount(s, a))))
	r.Handle("GET /api/users/{userId}/audit", s.Require(SelfPath(handleAudit(s))))
	return r
}

// unlimited is the Attempts of Routes(s, nil).
type unlimited struct{}

func (unlimited) SignIn(context.Context, string, string) error { return nil }
func (unlimited) SignUp(context.Context, string) error         { return nil }
