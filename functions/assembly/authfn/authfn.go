// Package authfn builds AuthFunction: sign-up, sign-in, session and
// sign-out, with the credential endpoints' rate limits. Signing out
// everywhere also revokes the user's OAuth grants and personal access
// tokens (the OAuth table).
package authfn

import (
	"context"
	"time"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/ratelimit"
)

// Auth is AuthFunction.
var Auth = assembly.Function{
	LogicalID: "AuthFunction",
	Required:  []string{"USERS_TABLE", "SESSIONS_TABLE", "RATE_LIMITS_TABLE", "OAUTH_TABLE"},
	Build:     build,
}

func build(_ context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	attempts := ratelimit.Attempts{Limiter: d.Limiter(cfg), SignInPerEmail: cfg.RateLimitSignInEmail,
		SignInPerAddress: cfg.RateLimitSignInAddress, SignUpPerAddress: cfg.RateLimitSignUpAddress}
	svc, tokens, now := d.Auth(cfg), d.OAuthStore(cfg), d.Now
	if now == nil {
		now = time.Now
	}
	svc.OnSignOutAll(func(ctx context.Context, userID string) error {
		_, err := oauth.RevokeUser(ctx, tokens, userID, now().UTC())
		return err
	})
	return auth.Routes(svc, attempts), nil
}
