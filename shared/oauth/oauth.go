// Package oauth is the service's OAuth 2.1 authorization server for its
// own users, the personal access tokens of their scripts, and the
// verification of both kinds of bearer token for the per-user MCP endpoint
// (POST /api/mcp, shared/mcpgateway).
//
// What it serves (docs/openapi.yaml, OAuth tag; decisions in
// docs/decisions.md):
//
//   - metadata: /.well-known/oauth-authorization-server (RFC 8414),
//     /.well-known/oauth-protected-resource and
//     /.well-known/oauth-protected-resource/api/mcp (RFC 9728), plain JSON;
//   - GET and POST /oauth/authorize: the authorization code flow with PKCE
//     S256 only; the sign-in and consent pages are server-rendered HTML
//     with a strict Content-Security-Policy and a CSRF token, and a
//     signed-in browser session skips the password;
//   - POST /oauth/token: authorization_code and refresh_token grants;
//     access tokens are EdDSA-signed JWTs (RFC 9068) bound to the resource
//     (RFC 8707) for an hour; refresh tokens rotate, and presenting a used
//     one more than 30 s after its first use revokes its whole family (the
//     grant);
//   - POST /oauth/revoke (RFC 7009) and POST /oauth/register (RFC 7591);
//     a client id may also be an https URL naming a Client ID Metadata
//     Document, fetched through shared/safehttp and cached;
//   - GET /oauth/jwks: the public signing keys.
//
// Only hashes of codes, refresh tokens, client secrets and personal access
// tokens are stored (SHA-256: every one is 256 random bits).
package oauth

import (
	"context"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
)

// Lifetimes and bounds.
const (
	// AccessTokenTTL is the lifetime of an access token.
	AccessTokenTTL = time.Hour
	// CodeTTL is the lifetime of an authorization code.
	CodeTTL = 2 * time.Minute
	// RefreshTokenTTL is how long a refresh token stays usable.
	RefreshTokenTTL = 30 * 24 * time.Hour
	// GrantTTL bounds a grant (a refresh token family) from its creation,
	// however often it is refreshed; the user authorizes again after it.
	GrantTTL = 90 * 24 * time.Hour
	// ClientTTL is how long a dynamically registered client is kept.
	ClientTTL = 365 * 24 * time.Hour
	// MaxGrantsPerUser bounds the live grants (connected clients and
	// devices) of one user.
	MaxGrantsPerUser = 100
	// Scope is the one scope: the user's workflows as MCP tools.
	Scope = "mcp"
)

// Client is an OAuth client: dynamically registered (RFC 7591), or
// described by a Client ID Metadata Document (Document true; then ID is
// the document's https URL and nothing is stored).
type Client struct {
	ID           string
	Name         string
	URI          string
	RedirectURIs []string
	// AuthMethod is the token endpoint authentication: none (a public
	// client, PKCE alone), client_secret_post or client_secret_basic.
	AuthMethod string
	// SecretHash is the hash of a confidential client's secret.
	SecretHash string
	GrantTypes []string
	Document   bool
	CreatedAt  time.Time
	ExpiresAt  time.Time
}

// Code is an issued authorization code, stored under the hash of the code.
type Code struct {
	Hash        string
	ClientID    string
	UserID      string
	RedirectURI string
	// Challenge is the PKCE S256 code challenge.
	Challenge string
	Resource  string
	Scope     string
	// ClientName is kept for the grant the code becomes.
	ClientName string
	// Epoch is the user's code epoch (Store.CodeEpoch) when the code was
	// issued: the code redeems only while it is still the current one.
	Epoch     Epoch
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Epoch counts how often a user's unredeemed authorization codes were
// ended (Store.EndCodes): for every client (sign-out-all) and for one
// client (a disconnect, a deny). A code records the epoch it was issued
// in, and its redemption is conditioned on both counts being unchanged, in
// the transaction that creates its grant: a code issued before an ending
// never redeems, however the two race.
type Epoch struct {
	User   int64
	Client int64
}

// Grant is one authorization of a client by a user: a refresh token
// family. Every access and refresh token names its grant; revoking the
// grant revokes them all.
type Grant struct {
	ID         string
	UserID     string
	ClientID   string
	ClientName string
	Resource   string
	Scope      string
	CreatedAt  time.Time
	LastUsedAt time.Time
	ExpiresAt  time.Time
	// RevokedAt is zero while the grant is live.
	RevokedAt time.Time
}

// Live reports whether g is neither revoked nor expired at now.
func (g Grant) Live(now time.Time) bool { return g.RevokedAt.IsZero() && now.Before(g.ExpiresAt) }

// RefreshToken is an issued refresh token, stored under its hash.
type RefreshToken struct {
	Hash      string
	GrantID   string
	ClientID  string
	UserID    string
	CreatedAt time.Time
	ExpiresAt time.Time
	// Used is set when the token was exchanged, at UsedAt (its first
	// exchange); a used token presented again after RefreshReuseGrace
	// revokes its grant.
	Used   bool
	UsedAt time.Time
}

// RefreshReuseGrace is how long after its first exchange a refresh token
// may be exchanged again by its client, each time for a fresh pair, without
// revoking anything: clients refresh from several requests at once, and
// each presents the token it holds. After it, a reuse is taken as a copy
// in other hands and revokes the grant.
const RefreshReuseGrace = 30 * time.Second

// Reusable reports whether t, already used, may still be exchanged at now
// (within RefreshReuseGrace of its first exchange).
func (t RefreshToken) Reusable(now time.Time) bool {
	return t.Used && !t.UsedAt.IsZero() && now.Before(t.UsedAt.Add(RefreshReuseGrace))
}

// PersonalToken is a personal access token, stored under its hash.
type PersonalToken struct {
	ID        string    `json:"id"`
	UserID    string    `json:"-"`
	Name      string    `json:"name"`
	Hash      string    `json:"-"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Store persists clients, codes, grants, refresh tokens and personal access
// tokens. store.OAuth implements it over DynamoDB.
type Store interface {
	// CreateClient stores a registered client.
	CreateClient(ctx context.Context, c Client) error
	// Client returns the registered client id. NotFound CLIENT_NOT_FOUND
	// when there is none (expired included).
	Client(ctx context.Context, id string) (Client, error)
	// CreateCode stores c.
	CreateCode(ctx context.Context, c Code) error
	// ConsumeCode deletes and returns the code stored under hash, in one
	// conditional delete, so that a code is redeemed at most once. NotFound
	// CODE_NOT_FOUND when there is none (never issued or already used).
	ConsumeCode(ctx context.Context, hash string) (Code, error)
	// CodeEpoch returns the current code epoch of userID for clientID,
	// read consistently (zero counts when codes were never ended).
	CodeEpoch(ctx context.Context, userID, clientID string) (Epoch, error)
	// EndCodes ends every unredeemed code of userID for clientID, or for
	// every client when clientID is "": it advances the epoch, so that no
	// code issued before redeems.
	EndCodes(ctx context.Context, userID, clientID string) error
	// CreateGrant stores g and its first refresh token in one transaction
	// conditioned on g.UserID's code epoch for g.ClientID still being
	// epoch. Conflict GRANT_EXISTS when a grant with g.ID exists; Conflict
	// CODE_REVOKED when the epoch moved on (the code was ended).
	CreateGrant(ctx context.Context, g Grant, first RefreshToken, epoch Epoch) error
	// Grant returns the grant id. NotFound GRANT_NOT_FOUND.
	Grant(ctx context.Context, id string) (Grant, error)
	// RefreshToken returns the refresh token stored under hash. NotFound
	// REFRESH_TOKEN_NOT_FOUND.
	RefreshToken(ctx context.Context, hash string) (RefreshToken, error)
	// RotateRefreshToken marks old used at now (the first use's time is
	// kept), records the use on its grant and stores next, in one
	// transaction conditioned on old being unused or first used less than
	// RefreshReuseGrace before now, and on the grant being live at now.
	// Conflict REFRESH_TOKEN_USED when old was used before the grace;
	// Conflict GRANT_REVOKED when the grant is revoked or expired.
	RotateRefreshToken(ctx context.Context, old, next RefreshToken, now time.Time) error
	// RevokeGrant marks the grant revoked at at; a missing or already
	// revoked grant is not an error.
	RevokeGrant(ctx context.Context, id string, at time.Time) error
	// UserGrants returns the user's grants, revoked and expired ones
	// included while they are stored.
	UserGrants(ctx context.Context, userID string) ([]Grant, error)
	// CreatePersonalToken stores t, conditioned in the same transaction
	// on the user having fewer than max tokens unexpired at t.CreatedAt.
	// Conflict CodeTooManyTokens when the user has max.
	CreatePersonalToken(ctx context.Context, t PersonalToken, max int) error
	// PersonalToken returns the token stored under hash. NotFound
	// TOKEN_NOT_FOUND.
	PersonalToken(ctx context.Context, hash string) (PersonalToken, error)
	// UserPersonalTokens returns the user's tokens, oldest first, expired
	// ones included while they are stored.
	UserPersonalTokens(ctx context.Context, userID string) ([]PersonalToken, error)
	// DeletePersonalToken deletes the user's token id. NotFound
	// TOKEN_NOT_FOUND when the user has no such token.
	DeletePersonalToken(ctx context.Context, userID, id string) error
}

// HashSecret returns the storage key of a code or token: auth.HashToken
// (hex SHA-256), the one hash of the service's secrets. Every secret the
// service issues has 256 random bits, so a fast hash is enough.
func HashSecret(s string) string { return auth.HashToken(s) }

// CodeTooManyTokens is the error code of a personal token creation over
// the cap.
const CodeTooManyTokens = "TOO_MANY_TOKENS"

// PersonalTokenPrefix starts every personal access token, telling it from
// an OAuth access token (a JWT) at a glance, in logs and in secret
// scanners.
const PersonalTokenPrefix = "wcp_"

// RevokeUser ends every unredeemed authorization code of userID, revokes
// every live grant and deletes every personal access token (sign out
// everywhere). It returns how many grants and tokens it ended.
func RevokeUser(ctx context.Context, st Store, userID string, now time.Time) (int, error) {
	const op = "oauth.RevokeUser"
	n := 0
	// Codes first: a code redeemed meanwhile makes a grant the listing
	// below still finds, and none redeems after this.
	if err := st.EndCodes(ctx, userID, ""); err != nil {
		return 0, errs.Wrap(op, err)
	}
	gs, err := st.UserGrants(ctx, userID)
	if err != nil {
		return 0, errs.Wrap(op, err)
	}
	for _, g := range gs {
		if g.Live(now) {
			if err := st.RevokeGrant(ctx, g.ID, now); err != nil {
				return n, errs.Wrap(op, err)
			}
			n++
		}
	}
	ts, err := st.UserPersonalTokens(ctx, userID)
	if err != nil {
		return n, errs.Wrap(op, err)
	}
	for _, t := range ts {
		if err := st.DeletePersonalToken(ctx, userID, t.ID); err != nil && !errs.Is(err, errs.NotFound) {
			return n, errs.Wrap(op, err)
		}
		n++
	}
	return n, nil
}
