package auth

import (
	"net/http"
	"time"

	"github.com/workflowchat/service/shared/httpapi"
)

// SessionInfo is the public part of a session.
type SessionInfo struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// SessionResponse is the body of sign-up, sign-in and session.
type SessionResponse struct {
	User    User        `json:"user"`
	Session SessionInfo `json:"session"`
}

func signedInResponse(w http.ResponseWriter, r *http.Request, s *Service, in SignedIn) SessionResponse {
	SetCookie(w, r, in.Token, in.Session.ExpiresAt, in.Session.RenewedAt)
	return SessionResponse{User: in.User, Session: SessionInfo{ExpiresAt: in.Session.ExpiresAt}}
}

func handleSignUp(s *Service, a Attempts) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, c Credentials) (SessionResponse, error) {
		if err := a.SignUp(r.Context(), ClientAddress(r)); err != nil {
			return SessionResponse{}, err
		}
		in, err := s.SignUp(r.Context(), c)
		if err != nil {
			return SessionResponse{}, err
		}
		return signedInResponse(w, r, s, in), nil
	})
}

func handleSignIn(s *Service, a Attempts) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, c Credentials) (SessionResponse, error) {
		if err := a.SignIn(r.Context(), NormalizeEmail(c.Email), ClientAddress(r)); err != nil {
			return SessionResponse{}, err
		}
		in, err := s.SignIn(r.Context(), c)
		if err != nil {
			return SessionResponse{}, err
		}
		return signedInResponse(w, r, s, in), nil
	})
}

func handleSession() http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (SessionResponse, error) {
		sess, _ := FromContext(r.Context())
		return SessionResponse{User: sess.User, Session: SessionInfo{ExpiresAt: sess.ExpiresAt}}, nil
	})
}

type signOutResponse struct {
	Success bool `json:"success"`
}

func handleSignOut(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (signOutResponse, error) {
		var token string
		if c, err := r.Cookie(CookieName); err == nil {
			token = c.Value
		}
		if err := s.SignOut(r.Context(), token); err != nil {
			return signOutResponse{}, err
		}
		ClearCookie(w, r)
		return signOutResponse{Success: true}, nil
	})
}

type signOutAllResponse struct {
	Success bool `json:"success"`
	// Sessions is how many sessions were ended, this one included.
	Sessions int `json:"sessions"`
}

func handleSignOutAll(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (signOutAllResponse, error) {
		var token string
		if c, err := r.Cookie(CookieName); err == nil {
			token = c.Value
		}
		n, err := s.SignOutAll(r.Context(), token)
		if err != nil {
			return signOutAllResponse{}, err
		}
		ClearCookie(w, r)
		return signOutAllResponse{Success: true, Sessions: n}, nil
	})
}
