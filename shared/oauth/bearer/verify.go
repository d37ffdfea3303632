// Package bearer checks the bearer tokens of the per-user MCP endpoint:
// OAuth access tokens issued for it, and personal access tokens.
package bearer

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/oauth/accesstoken"
)

// Principal is who a bearer token speaks for.
type Principal struct {
	UserID string
	// ClientID is the OAuth client, "" for a personal access token.
	ClientID string
	// GrantID is the OAuth grant, or the personal access token's id.
	GrantID string
	// Personal is true for a personal access token.
	Personal  bool
	ExpiresAt time.Time
}

// Verifier checks the bearer tokens of the MCP endpoint: OAuth access
// tokens issued for it, and personal access tokens.
type Verifier struct {
	store   oauth.Store
	keys    accesstoken.KeySource
	baseURL string
	now     func() time.Time
}

// NewVerifier returns a Verifier over store and keys. baseURL is
// PUBLIC_BASE_URL ("": from each request, see oauth.BaseURL); now nil means
// time.Now.
func NewVerifier(store oauth.Store, keys accesstoken.KeySource, baseURL string, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	return &Verifier{store: store, keys: keys, baseURL: baseURL, now: now}
}

var errInvalidToken = errs.E("oauth.Verify", errs.Unauthenticated, "INVALID_TOKEN", "the bearer token is invalid, expired or revoked")

// Verify returns the principal of token, presented to r. A personal
// access token must be stored and unexpired. An access token must be
// signed by an accepted key, issued by this service for this resource
// (RFC 8707 audience), unexpired, and its grant live and of the same user
// and client: a revoked grant stops its access tokens at once. Every
// refusal is Unauthenticated INVALID_TOKEN; a storage or key failure is
// Unavailable.
func (v *Verifier) Verify(ctx context.Context, token string, r *http.Request) (Principal, error) {
	const op = "oauth.Verify"
	now := v.now()
	if strings.HasPrefix(token, oauth.PersonalTokenPrefix) {
		t, err := v.store.PersonalToken(ctx, oauth.HashSecret(token))
		if errs.Is(err, errs.NotFound) {
			return Principal{}, errInvalidToken
		}
		if err != nil {
			return Principal{}, errs.Wrap(op, err)
		}
		if !now.Before(t.ExpiresAt) {
			return Principal{}, errInvalidToken
		}
		return Principal{UserID: t.UserID, GrantID: t.ID, Personal: true, ExpiresAt: t.ExpiresAt}, nil
	}
	base := oauth.BaseURL(v.baseURL, r)
	if base == "" {
		return Principal{}, errInvalidToken
	}
	ks, err := v.keys.Keys(ctx)
	if err != nil {
		return Principal{}, errs.E(op, errs.Unavailable, "KEYS_UNAVAILABLE", "token keys are unavailable; retry shortly").WithCause(err)
	}
	c, err := ks.Verify(token, base, oauth.Audiences(base), now)
	if err != nil {
		return Principal{}, errInvalidToken
	}
	g, err := v.store.Grant(ctx, c.GrantID)
	if errs.Is(err, errs.NotFound) {
		return Principal{}, errInvalidToken
	}
	if err != nil {
		return Principal{}, errs.Wrap(op, err)
	}
	if !g.Live(now) || g.UserID != c.Subject || g.ClientID != c.ClientID {
		return Principal{}, errInvalidToken
	}
	return Principal{UserID: c.Subject, ClientID: c.ClientID, GrantID: g.ID, ExpiresAt: c.Expiry.Time()}, nil
}
