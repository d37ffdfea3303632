package authserver

import (
	"net/http"

	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/oauth"
)

// Routes returns the handler of the authorization server, the personal
// access tokens and the connections (OAuthFunction). The metadata
// documents and the token, revocation, registration and key endpoints are
// Open routes (any origin, no cookie); the authorization pages defend
// their forms themselves (OwnForms); the token and connection routes of
// /api/users require the user's session.
func Routes(s *Server) *httpapi.Router {
	r := httpapi.NewRouter()
	open := func(pattern string, h http.HandlerFunc) { r.HandleAccess(pattern, h, httpapi.Open) }
	open("GET "+oauth.AuthorizationServerMetadataPath, s.handleServerMetadata)
	open("GET "+oauth.ProtectedResourceMetadataPath, s.handleResourceMetadata(false))
	open("GET "+oauth.ProtectedResourceMetadataPath+oauth.ResourcePath, s.handleResourceMetadata(true))
	open("GET "+oauth.JWKSPath, s.handleJWKS)
	open("POST "+oauth.TokenPath, s.handleToken)
	open("POST "+oauth.RevokePath, s.handleRevoke)
	open("POST "+oauth.RegisterPath, s.handleRegister)
	r.HandleAccess("GET "+oauth.AuthorizePath, http.HandlerFunc(s.handleAuthorize), httpapi.OwnForms)
	r.HandleAccess("POST "+oauth.AuthorizePath, http.HandlerFunc(s.handleAuthorizeForm), httpapi.OwnForms)

	r.Handle("POST /api/users/{userId}/tokens", s.auth.Require(s.handleCreateToken()))
	r.Handle("GET /api/users/{userId}/tokens", s.auth.Require(s.handleListTokens()))
	r.Handle("DELETE /api/users/{userId}/tokens/{tokenId}", s.auth.Require(s.handleDeleteToken()))
	r.Handle("GET /api/users/{userId}/connections", s.auth.Require(s.handleListConnections()))
	r.Handle("DELETE /api/users/{userId}/connections/{clientId}", s.auth.Require(s.handleDeleteConnection()))
	return r
}
