// Package authfn builds AuthFunction: sign-up, sign-in, session and
// sign-out, with the credential endpoints' rate limits. Signing out
// everywhere also revokes the user's OAuth grants and personal access
// tokens (the OAuth table). With a blob store (BLOB_BUCKET) it also takes
// the requests of data exports (package export) and presigns their
// downloads.
package authfn

import (
	"context"
	"time"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/export"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/store"
)

// Auth is AuthFunction.
var Auth = assembly.Function{
	LogicalID: "AuthFunction",
	Required:  []string{"USERS_TABLE", "SESSIONS_TABLE", "RATE_LIMITS_TABLE", "OAUTH_TABLE"},
	Build:     build,
}

func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
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
	r := auth.Routes(svc, attempts)
	if cfg.BlobBucket != "" || d.Blobs != nil {
		blobs, err := blobstore.Open(ctx, cfg, d)
		if err != nil {
			return nil, err
		}
		exports := export.NewService(store.NewExports(d.DB, cfg.DataTable), blobs, d.Now).WithAudit(d.Audit(cfg))
		export.Routes(r, exports, svc.Require, d.Limiter(cfg).Limit(cfg.RateLimitExports))
	}
	return r, nil
}
