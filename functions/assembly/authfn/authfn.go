// Package authfn builds AuthFunction: sign-up, sign-in, session and
// sign-out, with the credential endpoints' rate limits.
package authfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/ratelimit"
)

// Auth is AuthFunction.
var Auth = assembly.Function{
	LogicalID: "AuthFunction",
	Required:  []string{"USERS_TABLE", "SESSIONS_TABLE", "RATE_LIMITS_TABLE"},
	Build:     build,
}

func build(_ context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	attempts := ratelimit.Attempts{Limiter: d.Limiter(cfg), SignInPerEmail: cfg.RateLimitSignInEmail,
		SignInPerAddress: cfg.RateLimitSignInAddress, SignUpPerAddress: cfg.RateLimitSignUpAddress}
	return auth.Routes(d.Auth(cfg), attempts), nil
}
