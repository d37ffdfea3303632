// Package oauthclient is the service as an OAuth client of its users'
// remote MCP servers, per the MCP authorization spec: discovery from the
// server's 401 (RFC 9728 protected resource metadata, then RFC 8414
// authorization server metadata, with the well-known fallbacks), the
// service's Client ID Metadata Document (/oauth/client.json) where the
// authorization server takes one, else one dynamic registration (RFC
// 7591) kept per server, the authorization code flow with PKCE S256 and a
// single-use state bound to the user and the server, the resource
// indicator (RFC 8707) on every authorization, token and refresh request,
// and refreshes one at a time per server.
//
// It implements mcpserver.Authorizer and mcpserver.TokenSource. The
// go-sdk's own client-side handler wants a blocking callback in one
// process; here the redirect comes back in another request (another
// Lambda instance), so the flow's state is kept in the store and only the
// SDK's metadata types and challenge parser (oauthex) are used.
//
// Every request goes through an SSRF-safe client (shared/safehttp), every
// answer read is bounded (MaxMetadataBytes, MaxTokenBytes), and tokens,
// client secrets and PKCE verifiers are sealed by the vault before they
// are stored; none is logged or returned by an error.
package oauthclient

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/safehttp"
)

// Bounds and lifetimes.
const (
	// MaxMetadataBytes bounds a metadata document (protected resource,
	// authorization server) and a registration answer.
	MaxMetadataBytes = 64 << 10
	// MaxTokenBytes bounds a token endpoint answer.
	MaxTokenBytes = 64 << 10
	// StateTTL is how long an authorization may take, from authorize to
	// callback.
	StateTTL = 10 * time.Minute
	// RefreshMargin is how long before its expiry an access token is
	// refreshed.
	RefreshMargin = time.Minute
	// RefreshLease bounds one refresh: another caller waits for it that
	// long at most, then may refresh itself.
	RefreshLease = 30 * time.Second
	// RequestTimeout bounds one request to a server or authorization
	// server.
	RequestTimeout = 10 * time.Second
	// StartTimeout bounds the discovery and registration of Start, within
	// the HTTP API's 30 s.
	StartTimeout = 25 * time.Second
	// refreshAttempts is how often a refresh that failed on the network
	// (or a 5xx) is tried in all.
	refreshAttempts = 3
	// MaxStateLen bounds the state parameter read from a callback.
	MaxStateLen = 256
)

// Paths the service serves for its client side.
const (
	ClientDocumentPath = mcpserver.ClientDocumentPath
	CallbackPath       = mcpserver.CallbackPath
)

// Error codes.
const (
	CodeDiscovery      = mcpserver.CodeOAuthDiscovery
	CodeUnsupported    = mcpserver.CodeOAuthUnsupported
	CodeRegistration   = mcpserver.CodeOAuthRegistration
	CodeState          = "OAUTH_STATE_INVALID"
	CodeDenied         = "AUTHORIZATION_DENIED"
	CodeTokenRefused   = "OAUTH_TOKEN_REFUSED"
	CodeWrongUser      = "OAUTH_WRONG_USER"
	CodeUnreachableAS  = "AUTHORIZATION_SERVER_UNREACHABLE"
	CodeInvalidBaseURL = "INVALID_BASE_URL"
)

// Sealer seals and opens secrets (vault.Vault).
type Sealer = mcpserver.Sealer

// Options configures New.
type Options struct {
	Store mcpserver.OAuthStore
	Vault Sealer
	// AllowPrivate lets the client reach loopback and private addresses
	// and use http URLs (TOOLS_ALLOW_PRIVATE_NETWORKS: local tests only).
	AllowPrivate bool
	// ClientName is the client_name of the metadata document and of
	// registrations.
	ClientName string
	Now        func() time.Time
	// Sleep waits between retries; nil sleeps for real (tests pass one
	// that returns at once).
	Sleep func(ctx context.Context, d time.Duration) error
	// HTTP replaces the SSRF-safe client (nil: safehttp with
	// AllowPrivate, RequestTimeout, no redirects followed).
	HTTP *http.Client
}

// Client is the OAuth client side. It is safe for concurrent use.
type Client struct {
	store        mcpserver.OAuthStore
	vault        Sealer
	http         *http.Client
	allowPrivate bool
	name         string
	now          func() time.Time
	sleep        func(ctx context.Context, d time.Duration) error
}

// New returns the Client of o.
func New(o Options) *Client {
	c := &Client{store: o.Store, vault: o.Vault, http: o.HTTP, allowPrivate: o.AllowPrivate, name: o.ClientName, now: o.Now, sleep: o.Sleep}
	if c.http == nil {
		c.http = safehttp.NewClient(safehttp.Options{AllowPrivate: o.AllowPrivate, Timeout: RequestTimeout, MaxRedirects: -1})
	}
	if c.name == "" {
		c.name = "Workflow Chat"
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.sleep == nil {
		c.sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		}
	}
	return c
}

func invalid(msg string) error { return errs.E("oauthclient", errs.Invalid, CodeDiscovery, msg) }

func discoveryFailed(msg string, cause error) error {
	e := errs.E("oauthclient", errs.Invalid, CodeDiscovery, msg)
	if cause != nil {
		e = e.WithCause(cause)
	}
	return e
}

func unreachable(msg string, cause error) error {
	return errs.E("oauthclient", errs.Invalid, CodeDiscovery, msg).WithCause(cause)
}

// ClientDocument is the service's Client ID Metadata Document under base
// (an origin): its client id is its own URL.
type ClientDocument struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
}

// Document returns the Client ID Metadata Document served at base's
// ClientDocumentPath.
func (c *Client) Document(base string) ClientDocument {
	d := ClientDocument{ClientID: base + ClientDocumentPath, ClientName: c.name, RedirectURIs: []string{base + CallbackPath},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none"}
	if strings.HasPrefix(base, "https://") {
		d.ClientURI = base
	}
	return d
}

// tokens is the sealed content of a grant's Tokens.
type tokens struct {
	Access  string `json:"a"`
	Refresh string `json:"r,omitempty"`
}

func tokensContext(serverID string) string { return "mcpserver:" + serverID + ":oauth-tokens" }
func clientContext(serverID string) string { return "mcpserver:" + serverID + ":oauth-client" }
func stateContext(hash string) string      { return "mcpserver-oauth-state:" + hash }

// NewVerifier returns a PKCE code verifier: 32 random bytes, base64url
// (43 characters, RFC 7636 section 4.1).
func NewVerifier() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Challenge returns the S256 code challenge of verifier.
func Challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// HashState returns the key a state is stored under.
func HashState(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// Start implements mcpserver.Authorizer.
func (c *Client) Start(ctx context.Context, srv mcpserver.Server, base, returnTo string) (string, error) {
	const op = "oauthclient.Start"
	if base == "" {
		return "", errs.E(op, errs.Invalid, CodeInvalidBaseURL, "the request's host is not a valid host name")
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	d, err := c.discover(ctx, srv.URL)
	if err != nil {
		return "", errs.Wrap(op, err)
	}
	g, err := c.client(ctx, srv, base, d)
	if err != nil {
		return "", errs.Wrap(op, err)
	}
	verifier := NewVerifier()
	state := NewVerifier()
	hash := HashState(state)
	sealed, err := c.vault.Seal(ctx, stateContext(hash), []byte(verifier))
	if err != nil {
		return "", errs.Wrap(op, err)
	}
	redirect := base + CallbackPath
	st := mcpserver.OAuthState{Hash: hash, UserID: srv.UserID, ServerID: srv.ID, Verifier: sealed, RedirectURI: redirect, ReturnTo: returnTo,
		Issuer: d.issuer, IssRequired: d.meta.AuthorizationResponseIssParameterSupported, ExpiresAt: c.now().Add(StateTTL)}
	if err := c.store.PutState(ctx, st); err != nil {
		return "", errs.Wrap(op, err)
	}
	u, _ := url.Parse(g.AuthorizationEndpoint)
	q := u.Query()
	q.Set("response_type", "code")
	q.Set("client_id", g.ClientID)
	q.Set("redirect_uri", redirect)
	q.Set("code_challenge", Challenge(verifier))
	q.Set("code_challenge_method", "S256")
	q.Set("state", state)
	q.Set("resource", g.Resource)
	if d.scope != "" {
		q.Set("scope", d.scope)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// client returns the server's grant with the service a client of d's
// authorization server: the stored one when it is for that server (a
// registration is made once and kept), else the metadata document's
// client id when the server takes it, else a new registration.
func (c *Client) client(ctx context.Context, srv mcpserver.Server, base string, d discovered) (mcpserver.OAuthGrant, error) {
	g, err := c.store.Grant(ctx, srv.UserID, srv.ID)
	switch {
	case errs.KindOf(err) == errs.NotFound:
		g = mcpserver.OAuthGrant{UserID: srv.UserID, ServerID: srv.ID}
	case err != nil:
		return g, err
	}
	doc := c.Document(base)
	useDocument := d.meta.ClientIDMetadataDocumentSupported && (strings.HasPrefix(base, "https://") || c.allowPrivate)
	same := g.ClientID != "" && g.Issuer == d.issuer && g.TokenEndpoint == d.meta.TokenEndpoint
	keep := same && (g.Registered || (useDocument && g.ClientID == doc.ClientID))
	if !keep {
		if g.Issuer != d.issuer {
			g.Tokens, g.ExpiresAt = "", time.Time{}
		}
		switch {
		case useDocument:
			g.ClientID, g.ClientSecret, g.AuthMethod, g.Registered = doc.ClientID, "", "none", false
		case d.meta.RegistrationEndpoint != "":
			if err := c.register(ctx, &g, d.meta.RegistrationEndpoint, doc); err != nil {
				return g, err
			}
		default:
			return g, errs.E("oauthclient", errs.Invalid, CodeUnsupported,
				"the authorization server takes neither client metadata documents nor dynamic client registration")
		}
	} else if g.Issuer == d.issuer && g.AuthorizationEndpoint == d.meta.AuthorizationEndpoint && g.Resource == d.resource {
		return g, nil
	}
	g.Issuer, g.AuthorizationEndpoint, g.TokenEndpoint, g.Resource = d.issuer, d.meta.AuthorizationEndpoint, d.meta.TokenEndpoint, d.resource
	g.Version++
	g.UpdatedAt = c.now().UTC()
	if err := c.store.PutGrant(ctx, g); err != nil {
		return g, err
	}
	return g, nil
}

// registration is an RFC 7591 answer.
type registration struct {
	ClientID                string `json:"client_id"`
	ClientSecret            string `json:"client_secret"`
	TokenEndpointAuthMethod string `json:"token_endpoint_auth_method"`
	Error                   string `json:"error"`
	ErrorDescription        string `json:"error_description"`
}

// register registers the service as a public client (PKCE, no secret;
// a secret the server issues anyway is sealed and used) into g.
func (c *Client) register(ctx context.Context, g *mcpserver.OAuthGrant, endpoint string, doc ClientDocument) error {
	fail := func(msg string) error {
		return errs.E("oauthclient", errs.Invalid, CodeRegistration, "the authorization server refused the registration: "+msg)
	}
	body, _ := json.Marshal(map[string]any{"client_name": doc.ClientName, "client_uri": doc.ClientURI, "redirect_uris": doc.RedirectURIs,
		"grant_types": doc.GrantTypes, "response_types": doc.ResponseTypes, "token_endpoint_auth_method": "none"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(string(body)))
	if err != nil {
		return fail("its registration endpoint is not a URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return errs.E("oauthclient", errs.Invalid, CodeRegistration, "the authorization server could not be reached").WithCause(err)
	}
	defer res.Body.Close()
	b, err := readBounded(res.Body, MaxMetadataBytes)
	if err != nil {
		return fail("its answer could not be read").(*errs.Error).WithCause(err)
	}
	var r registration
	if err := ParseJSONObject(b, &r); err != nil {
		return fail(fmt.Sprintf("HTTP %d, not JSON", res.StatusCode))
	}
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK || r.ClientID == "" {
		return fail(fmt.Sprintf("HTTP %d %s", res.StatusCode, safeCode(r.Error)))
	}
	g.ClientID, g.Registered, g.ClientSecret, g.AuthMethod = r.ClientID, true, "", "none"
	if r.ClientSecret != "" {
		sealed, err := c.vault.Seal(ctx, clientContext(g.ServerID), []byte(r.ClientSecret))
		if err != nil {
			return err
		}
		g.ClientSecret, g.AuthMethod = sealed, "client_secret_basic"
		if r.TokenEndpointAuthMethod == "client_secret_post" {
			g.AuthMethod = "client_secret_post"
		}
	}
	return nil
}

var codePattern = regexp.MustCompile(`^[a-z_]{1,64}$`)

// safeCode returns an OAuth error code safe to show (its form checked),
// else "error".
func safeCode(code string) string {
	if codePattern.MatchString(code) {
		return code
	}
	return "error"
}

// Finish implements mcpserver.Authorizer. userID is the signed-in user of
// the callback's request ("" without a session): a state started by
// another user is refused before its code is redeemed (a user must not
// complete someone else's authorization), and left unused, so that such a
// visit does not spoil the flow of the user who started it. The state is
// taken (once, of any number of callbacks) only after the user matches.
func (c *Client) Finish(ctx context.Context, q url.Values, userID string) (mcpserver.Callback, error) {
	const op = "oauthclient.Finish"
	state := q.Get("state")
	if state == "" || len(state) > MaxStateLen {
		return mcpserver.Callback{}, errs.E(op, errs.Invalid, CodeState, "the callback carries no valid state")
	}
	hash := HashState(state)
	unknown := func(err error) (mcpserver.Callback, error) {
		if errs.KindOf(err) == errs.NotFound {
			return mcpserver.Callback{}, errs.E(op, errs.Invalid, CodeState, "the authorization is unknown, expired or already used; start it again")
		}
		return mcpserver.Callback{}, errs.Wrap(op, err)
	}
	st, err := c.store.State(ctx, hash, c.now())
	if err != nil {
		return unknown(err)
	}
	cb := mcpserver.Callback{UserID: st.UserID, ServerID: st.ServerID, ReturnTo: st.ReturnTo}
	if userID != st.UserID {
		return cb, errs.E(op, errs.Forbidden, CodeWrongUser, "sign in to the service as the user who started the authorization")
	}
	if st, err = c.store.TakeState(ctx, hash, c.now()); err != nil {
		return unknown(err)
	}
	if e := q.Get("error"); e != "" {
		return cb, errs.E(op, errs.Invalid, CodeDenied, "the authorization server answered "+safeCode(e))
	}
	if iss := q.Get("iss"); (iss != "" || st.IssRequired) && strings.TrimSuffix(iss, "/") != strings.TrimSuffix(st.Issuer, "/") {
		return cb, errs.E(op, errs.Invalid, CodeState, "the callback names another authorization server (iss)")
	}
	code := q.Get("code")
	if code == "" || len(code) > 4096 {
		return cb, errs.E(op, errs.Invalid, CodeState, "the callback carries no code")
	}
	verifier, err := c.vault.Open(ctx, stateContext(hash), st.Verifier)
	if err != nil {
		return cb, errs.Wrap(op, err)
	}
	g, err := c.store.Grant(ctx, st.UserID, st.ServerID)
	if err != nil {
		return cb, errs.Wrap(op, err)
	}
	if g.Issuer != st.Issuer {
		return cb, errs.E(op, errs.Conflict, CodeState, "the server's authorization server changed meanwhile; start again")
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {st.RedirectURI},
		"code_verifier": {string(verifier)}, "resource": {g.Resource}}
	res, err := c.tokenRequest(ctx, g, form, 1)
	if err != nil {
		return cb, errs.Wrap(op, tokenError(err))
	}
	for range 3 {
		if err = c.storeTokens(ctx, &g, res, ""); errs.KindOf(err) != errs.Conflict {
			break
		}
		if g, err = c.store.Grant(ctx, st.UserID, st.ServerID); err != nil {
			break
		}
	}
	return cb, errs.Wrap(op, err)
}

// storeTokens seals res into g (keeping oldRefresh when the answer has no
// new refresh token) and writes g at the next version.
func (c *Client) storeTokens(ctx context.Context, g *mcpserver.OAuthGrant, res tokenResponse, oldRefresh string) error {
	tk := tokens{Access: res.AccessToken, Refresh: res.RefreshToken}
	if tk.Refresh == "" {
		tk.Refresh = oldRefresh
	}
	b, _ := json.Marshal(tk)
	sealed, err := c.vault.Seal(ctx, tokensContext(g.ServerID), b)
	if err != nil {
		return err
	}
	now := c.now().UTC()
	g.Tokens, g.ExpiresAt, g.RefreshingUntil = sealed, time.Time{}, time.Time{}
	if res.ExpiresIn > 0 {
		g.ExpiresAt = now.Add(time.Duration(res.ExpiresIn) * time.Second)
	}
	g.Version++
	g.UpdatedAt = now
	return c.store.PutGrant(ctx, *g)
}

// Forget implements mcpserver.Authorizer.
func (c *Client) Forget(ctx context.Context, srv mcpserver.Server) error {
	for range 3 {
		g, err := c.store.Grant(ctx, srv.UserID, srv.ID)
		if errs.KindOf(err) == errs.NotFound {
			return nil
		}
		if err != nil {
			return errs.Wrap("oauthclient.Forget", err)
		}
		if g.Tokens == "" {
			return nil
		}
		g.Tokens, g.ExpiresAt, g.RefreshingUntil = "", time.Time{}, time.Time{}
		g.Version++
		g.UpdatedAt = c.now().UTC()
		if err = c.store.PutGrant(ctx, g); errs.KindOf(err) != errs.Conflict {
			return errs.Wrap("oauthclient.Forget", err)
		}
	}
	return errs.E("oauthclient.Forget", errs.Conflict, "CONFLICT", "the server's grant keeps changing; retry")
}
