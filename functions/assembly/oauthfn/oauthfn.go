// Package oauthfn builds OAuthFunction: the OAuth authorization server
// (metadata, authorization pages, token, revocation, registration, keys),
// the personal access tokens and the connections of /api/users.
package oauthfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/signingkeys"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/oauth/authserver"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/safehttp"
)

// OAuth is OAuthFunction.
var OAuth = assembly.Function{
	LogicalID: "OAuthFunction",
	Required:  []string{"USERS_TABLE", "SESSIONS_TABLE", "RATE_LIMITS_TABLE", "OAUTH_TABLE"},
	Build:     build,
}

func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	keys, err := signingkeys.Source(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	limiter := d.Limiter(cfg)
	o := authserver.Options{
		Store: d.OAuthStore(cfg), Keys: keys, Auth: d.Auth(cfg),
		Attempts: ratelimit.Attempts{Limiter: limiter, SignInPerEmail: cfg.RateLimitSignInEmail,
			SignInPerAddress: cfg.RateLimitSignInAddress, SignUpPerAddress: cfg.RateLimitSignUpAddress},
		Limiter: limiter, TokenRule: cfg.RateLimitOAuthToken, RegisterRule: cfg.RateLimitOAuthRegister,
		DocumentRule: cfg.RateLimitOAuthDocument,
		BaseURL:      cfg.PublicBaseURL, Now: d.Now, Logger: d.Logger,
		AllowHTTPDocuments: cfg.OAuthAllowHTTPClients,
	}
	if cfg.OAuthAllowHTTPClients {
		o.Documents = safehttp.NewClient(safehttp.Options{AllowPrivate: true, Timeout: authserver.DocumentTimeout, MaxRedirects: -1})
	}
	return authserver.Routes(authserver.New(o)), nil
}
