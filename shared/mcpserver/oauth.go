package mcpserver

import (
	"context"
	"errors"
	"net/url"
	"time"
)

// Paths of the OAuth client side's public routes.
const (
	// ClientDocumentPath is the service's Client ID Metadata Document:
	// its URL is the service's client id at authorization servers that
	// take one.
	ClientDocumentPath = "/oauth/client.json"
	// CallbackPath is the redirect URI.
	CallbackPath = "/oauth/callback"
)

// TokenSource gives the bearer token the service sends to an oauth
// server: a live access token, refreshed first when it is about to
// expire. It fails with ErrNeedsAuthorization (wrapped) when the server
// has no grant or the authorization server refused the refresh
// (invalid_grant), and with ErrTokenUnavailable when the authorization
// server could not be reached (a failure that says nothing about the
// grant).
type TokenSource interface {
	Token(ctx context.Context, srv Server) (string, error)
}

// ErrNeedsAuthorization is a TokenSource's answer for a server the user
// has to authorize (again).
var ErrNeedsAuthorization = errors.New("mcpserver: the server needs authorization")

// ErrTokenUnavailable is a TokenSource's answer when a token could not be
// had for now (the authorization server unreachable or failing): the
// grant is kept and the server's status is not changed.
var ErrTokenUnavailable = errors.New("mcpserver: a token could not be had for now")

// Authorizer runs the OAuth authorization code flow for oauth servers
// (the service as an OAuth client).
type Authorizer interface {
	// Start discovers srv's authorization server, makes sure the service
	// is a client of it (a Client ID Metadata Document at base's
	// /oauth/client.json, else a client registered once), stores a
	// single-use state and returns the URL the user's browser goes to.
	Start(ctx context.Context, srv Server, base, returnTo string) (string, error)
	// Finish takes the state of a callback's query (single use) and, when
	// the query carries a code, redeems it and stores the tokens. It
	// returns what the state named even when the authorization failed
	// (then with the error), so that the browser is sent back. userID is
	// the callback request's signed-in user ("" without a session): a
	// state another user started is refused before its code is redeemed.
	Finish(ctx context.Context, q url.Values, userID string) (Callback, error)
	// Forget drops the tokens of the server (its URL or auth changed);
	// the registered client is kept.
	Forget(ctx context.Context, srv Server) error
}

// Callback is what a callback's state named.
type Callback struct {
	UserID, ServerID, ReturnTo string
}

// OAuthGrant is what the service keeps of its OAuth client side for one
// server: the authorization server, the client the service is there (a
// metadata document URL, or registered once), and the sealed tokens.
// Every write is conditioned on Version.
type OAuthGrant struct {
	UserID, ServerID string
	// Issuer and the endpoints of the authorization server, as
	// discovered.
	Issuer, AuthorizationEndpoint, TokenEndpoint string
	// Resource is the resource indicator (RFC 8707) sent on every request.
	Resource string
	// ClientID is the service's client id there; ClientSecret the sealed
	// secret of a confidential registration (empty for a public client),
	// AuthMethod its token endpoint authentication.
	ClientID, ClientSecret, AuthMethod string
	// Registered is true for a client registered dynamically (RFC 7591),
	// false for a metadata document client id.
	Registered bool
	// Tokens is the sealed access and refresh tokens, empty before the
	// first authorization and after Forget or an invalid_grant.
	Tokens    string
	ExpiresAt time.Time
	// RefreshingUntil is the lease of a refresh in progress: no other
	// refresh starts before it.
	RefreshingUntil time.Time
	Version         int
	UpdatedAt       time.Time
}

// OAuthState is one authorization in progress, stored under the hash of
// its state parameter: single use, expiring.
type OAuthState struct {
	Hash             string
	UserID, ServerID string
	// Verifier is the sealed PKCE code verifier.
	Verifier    string
	RedirectURI string
	ReturnTo    string
	// Issuer is the authorization server the flow went to; IssRequired
	// says the callback must carry it as iss (RFC 9207).
	Issuer      string
	IssRequired bool
	ExpiresAt   time.Time
}

// OAuthStore keeps the grants and the states.
type OAuthStore interface {
	// Grant returns the grant of the server: NotFound when there is none.
	Grant(ctx context.Context, userID, serverID string) (OAuthGrant, error)
	// PutGrant stores g, conditioned on the stored version being
	// g.Version-1 (no grant when g.Version is 1): Conflict otherwise.
	PutGrant(ctx context.Context, g OAuthGrant) error
	// PutState stores st until st.ExpiresAt.
	PutState(ctx context.Context, st OAuthState) error
	// State returns the state of hash without taking it: NotFound as
	// TakeState. A callback reads it first to check who may redeem it,
	// so that a visit by someone else leaves it to its user.
	State(ctx context.Context, hash string, now time.Time) (OAuthState, error)
	// TakeState deletes and returns the state of hash: NotFound when
	// there is none (never stored, already taken); an expired one is
	// NotFound too.
	TakeState(ctx context.Context, hash string, now time.Time) (OAuthState, error)
}

// AuthorizeRequest is POST /api/mcp-servers/{serverId}/authorize.
type AuthorizeRequest struct {
	ReturnTo string `json:"returnTo,omitempty"`
}

// AuthorizeResponse is its answer.
type AuthorizeResponse struct {
	AuthorizationURL string `json:"authorizationUrl"`
}
