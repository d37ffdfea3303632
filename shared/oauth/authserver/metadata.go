package authserver

import (
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/workflowchat/service/shared/oauth"
)

// writeJSON writes v as an OAuth JSON answer: unwrapped, not cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"server_error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// base returns the request's public origin, answering 400 when it cannot
// be told.
func (s *Server) base(w http.ResponseWriter, r *http.Request) (string, bool) {
	b := oauth.BaseURL(s.baseURL, r)
	if b == "" {
		writeOAuthError(w, http.StatusBadRequest, errInvalidRequest("the request's host is not a valid host name"))
		return "", false
	}
	return b, true
}

// handleServerMetadata serves the authorization server metadata (RFC
// 8414).
func (s *Server) handleServerMetadata(w http.ResponseWriter, r *http.Request) {
	base, ok := s.base(w, r)
	if !ok {
		return
	}
	methods := []string{"none", "client_secret_post", "client_secret_basic"}
	writeJSON(w, http.StatusOK, &oauthex.AuthServerMeta{
		Issuer:                                     base,
		AuthorizationEndpoint:                      base + oauth.AuthorizePath,
		TokenEndpoint:                              base + oauth.TokenPath,
		JWKSURI:                                    base + oauth.JWKSPath,
		RegistrationEndpoint:                       base + oauth.RegisterPath,
		RevocationEndpoint:                         base + oauth.RevokePath,
		ScopesSupported:                            []string{oauth.Scope},
		ResponseTypesSupported:                     []string{"code"},
		ResponseModesSupported:                     []string{"query"},
		GrantTypesSupported:                        []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethodsSupported:          methods,
		RevocationEndpointAuthMethodsSupported:     methods,
		CodeChallengeMethodsSupported:              []string{"S256"},
		ClientIDMetadataDocumentSupported:          true,
		AuthorizationResponseIssParameterSupported: true,
	})
}

// handleResourceMetadata serves the protected resource metadata (RFC
// 9728) of the MCP endpoint (forMCP) or of the service's origin.
func (s *Server) handleResourceMetadata(forMCP bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		base, ok := s.base(w, r)
		if !ok {
			return
		}
		resource := base
		if forMCP {
			resource = oauth.ResourceURL(base)
		}
		writeJSON(w, http.StatusOK, &oauthex.ProtectedResourceMetadata{
			Resource:               resource,
			AuthorizationServers:   []string{base},
			ScopesSupported:        []string{oauth.Scope},
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "Workflow Chat: your workflows as MCP tools",
		})
	}
}

// handleJWKS serves the public signing keys.
func (s *Server) handleJWKS(w http.ResponseWriter, r *http.Request) {
	ks, err := s.keys.Keys(r.Context())
	if err != nil {
		writeOAuthError(w, http.StatusServiceUnavailable, oauthError{Code: "temporarily_unavailable", Description: "signing keys are unavailable"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_ = json.NewEncoder(w).Encode(ks.JWKS())
}
