// Package signingkeys gives OAuthFunction and McpGatewayFunction the
// access tokens' signing keys: in AWS the key set document in the Secrets
// Manager secret named by OAUTH_SIGNING_SECRET (read with
// secretsmanager:GetSecretValue through shared/awsapi, then again every
// RefreshEvery, so that a rotation reaches running instances); elsewhere
// the loader the host puts in assembly.Deps (the dev server's key file).
package signingkeys

import (
	"context"
	"errors"
	"time"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/oauth/accesstoken"
)

// RefreshEvery is how often a running instance reads the key set again.
const RefreshEvery = 5 * time.Minute

// Source returns the key source of the configuration: d.SigningKeys when
// the host set it, else the Secrets Manager secret OAUTH_SIGNING_SECRET.
// The first load happens here, so that a missing or malformed key set
// fails the function's init, not its first request. It fails when neither
// is configured, or the keys cannot be loaded or parsed.
func Source(ctx context.Context, cfg config.Config, d assembly.Deps) (accesstoken.KeySource, error) {
	load := d.SigningKeys
	if load == nil {
		if cfg.OAuthSigningSecret == "" {
			return nil, errors.New("config: required but not set: OAUTH_SIGNING_SECRET (the Secrets Manager secret of the access tokens' signing keys)")
		}
		client, secret := assembly.AWSAPI(cfg), cfg.OAuthSigningSecret
		load = func(ctx context.Context) ([]byte, error) {
			doc, err := client.SecretString(ctx, secret)
			return []byte(doc), err
		}
	}
	src := &accesstoken.RefreshingKeys{Load: load, Every: RefreshEvery, Now: d.Now}
	if _, err := src.Keys(ctx); err != nil {
		return nil, err
	}
	return src, nil
}
