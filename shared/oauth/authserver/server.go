package authserver

import (
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"net/http"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/oauth/accesstoken"
	"github.com/workflowchat/service/shared/ratelimit"
)

// Options configure New.
type Options struct {
	Store oauth.Store
	Keys  accesstoken.KeySource
	// Auth checks passwords and sessions for the sign-in and consent pages.
	Auth *auth.Service
	// Attempts limits the sign-ins of the sign-in page as those of
	// POST /api/auth/sign-in/email; nil limits nothing.
	Attempts auth.Attempts
	// Limiter counts the token and registration requests per client
	// address under TokenRule and RegisterRule, and the Client ID Metadata
	// Documents fetched for one (client ids not cached) under
	// DocumentRule; nil limits nothing.
	Limiter      *ratelimit.Limiter
	TokenRule    ratelimit.Rule
	RegisterRule ratelimit.Rule
	DocumentRule ratelimit.Rule
	// oauth.BaseURL is the service's public origin (PUBLIC_BASE_URL); empty:
	// from each request (see oauth.BaseURL).
	BaseURL string
	// Documents fetches oauth.Client ID Metadata Documents; nil means a
	// safehttp client with the production bounds.
	Documents *http.Client
	// AllowHTTPDocuments accepts http:// client id URLs (local tests,
	// whose document servers are plain HTTP on loopback).
	AllowHTTPDocuments bool
	Now                func() time.Time
	Logger             *slog.Logger
}

// Server is the authorization server and the personal access tokens.
type Server struct {
	store     oauth.Store
	keys      accesstoken.KeySource
	auth      *auth.Service
	attempts  auth.Attempts
	limiter   *ratelimit.Limiter
	tokenRule ratelimit.Rule
	regRule   ratelimit.Rule
	baseURL   string
	docs      *documentCache
	now       func() time.Time
}

// New returns a Server.
func New(o Options) *Server {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Server{
		store: o.Store, keys: o.Keys, auth: o.Auth, attempts: o.Attempts,
		limiter: o.Limiter, tokenRule: o.TokenRule, regRule: o.RegisterRule,
		baseURL: o.BaseURL, now: o.Now,
		docs: newDocumentCache(o.Documents, o.AllowHTTPDocuments, o.Now, o.Limiter, o.DocumentRule),
	}
}

// newSecret returns auth.NewToken (256 random bits, base64url-encoded)
// after prefix.
func newSecret(prefix string) string { return prefix + auth.NewToken() }

// grantIDOf derives a grant's id from the code it was issued for, so that
// a code presented again after its redemption (its item is gone) still
// names the grant to revoke (RFC 6749 section 4.1.2). The id reveals
// nothing of the code.
func grantIDOf(code string) string {
	sum := sha256.Sum256([]byte("grant\x00" + code))
	return base64.RawURLEncoding.EncodeToString(sum[:18])
}
