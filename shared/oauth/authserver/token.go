package authserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/uuid"
	"golang.org/x/oauth2"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/oauth/accesstoken"
)

// verifierPattern is a PKCE code verifier (RFC 7636 section 4.1).
var verifierPattern = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// tokenResponse is a successful token answer (RFC 6749 section 5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
}

// parseOAuthForm reads a form-encoded OAuth request body, refusing other
// bodies and repeated parameters (RFC 6749 section 3.2) with an OAuth
// error, and a body over the request limit with 413 PAYLOAD_TOO_LARGE (the
// answer to a declared length over it). It answers a refusal itself and
// reports whether the handler may go on.
func parseOAuthForm(w http.ResponseWriter, r *http.Request) bool {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		writeOAuthError(w, http.StatusBadRequest, errInvalidRequest("the body must be application/x-www-form-urlencoded"))
		return false
	}
	if err := r.ParseForm(); err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			httpapi.WriteError(w, r, httpapi.BodyTooLarge("authserver.parseOAuthForm", tooLarge.Limit))
			return false
		}
		writeOAuthError(w, http.StatusBadRequest, errInvalidRequest("the form could not be read"))
		return false
	}
	for k, v := range r.PostForm {
		if len(v) > 1 {
			writeOAuthError(w, http.StatusBadRequest, errInvalidRequest("the parameter "+k+" is repeated"))
			return false
		}
	}
	return true
}

// handleToken is the token endpoint (RFC 6749 section 3.2), rate limited
// per client address.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	if err := s.limiter.Allow(r.Context(), "oauth-token:"+auth.ClientAddress(r), s.tokenRule); err != nil {
		writeOAuthError(w, 0, fromServiceError(err))
		return
	}
	if !parseOAuthForm(w, r) {
		return
	}
	base, ok := s.base(w, r)
	if !ok {
		return
	}
	client, e := s.authenticateClient(r)
	if e != nil {
		writeOAuthError(w, http.StatusBadRequest, *e)
		return
	}
	var (
		resp tokenResponse
		err  error
	)
	switch gt := r.PostForm.Get("grant_type"); gt {
	case "authorization_code":
		resp, err = s.exchangeCode(r.Context(), base, client, r.PostForm)
	case "refresh_token":
		resp, err = s.refresh(r.Context(), base, client, r.PostForm)
	case "":
		err = errInvalidRequest("grant_type is required")
	default:
		err = oauthError{Code: "unsupported_grant_type", Description: "grant_type must be authorization_code or refresh_token"}
	}
	if err != nil {
		oe, ok := err.(oauthError)
		if !ok {
			logging.FromContext(r.Context()).ErrorContext(r.Context(), "oauth: token", "err", err.Error())
			oe = fromServiceError(err)
		}
		writeOAuthError(w, http.StatusBadRequest, oe)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

var errCodeUnusable = errInvalidGrant("the authorization code is invalid, expired or already used")

// exchangeCode redeems an authorization code (RFC 6749 section 4.1.3 with
// PKCE). The code is deleted as it is read, so it works once; a code
// presented again revokes the grant it produced, and so every token issued
// from it.
func (s *Server) exchangeCode(ctx context.Context, base string, client oauth.Client, form map[string][]string) (tokenResponse, error) {
	get := func(k string) string {
		if v := form[k]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	code, verifier := get("code"), get("code_verifier")
	if code == "" {
		return tokenResponse{}, errInvalidRequest("code is required")
	}
	if verifier == "" {
		return tokenResponse{}, errInvalidRequest("code_verifier is required (PKCE)")
	}
	now := s.now().UTC()
	c, err := s.store.ConsumeCode(ctx, oauth.HashSecret(code))
	if errs.Is(err, errs.NotFound) {
		// Used before (or never issued): whatever was issued for it is
		// revoked (RFC 6749 section 4.1.2).
		if err := s.store.RevokeGrant(ctx, grantIDOf(code), now); err != nil {
			return tokenResponse{}, err
		}
		return tokenResponse{}, errCodeUnusable
	}
	if err != nil {
		return tokenResponse{}, err
	}
	switch {
	case !now.Before(c.ExpiresAt):
		return tokenResponse{}, errCodeUnusable
	case c.ClientID != client.ID:
		return tokenResponse{}, errInvalidGrant("the code was issued to another client")
	case get("redirect_uri") != c.RedirectURI:
		return tokenResponse{}, errInvalidGrant("redirect_uri does not match the authorization request")
	case !verifierPattern.MatchString(verifier) ||
		subtle.ConstantTimeCompare([]byte(oauth2.S256ChallengeFromVerifier(verifier)), []byte(c.Challenge)) != 1:
		return tokenResponse{}, errInvalidGrant("code_verifier does not match the code_challenge")
	}
	if res := get("resource"); res != "" && res != c.Resource {
		return tokenResponse{}, errInvalidTarget("resource must be the one of the authorization request")
	}
	g := oauth.Grant{ID: grantIDOf(code), UserID: c.UserID, ClientID: c.ClientID, ClientName: c.ClientName, Resource: c.Resource,
		Scope: c.Scope, CreatedAt: now, LastUsedAt: now, ExpiresAt: now.Add(oauth.GrantTTL)}
	var first oauth.RefreshToken
	var refresh string
	if slices.Contains(client.GrantTypes, "refresh_token") {
		refresh = newSecret("wcr_")
		first = s.newRefresh(refresh, g, now)
	}
	// The grant is created only while the code's epoch is current: a
	// sign-out-all, disconnect or deny since its issue ended it.
	if err := s.store.CreateGrant(ctx, g, first, c.Epoch); err != nil {
		if errs.Is(err, errs.Conflict) {
			return tokenResponse{}, errCodeUnusable
		}
		return tokenResponse{}, err
	}
	return s.respond(ctx, base, g, refresh, now)
}

func (s *Server) newRefresh(token string, g oauth.Grant, now time.Time) oauth.RefreshToken {
	exp := now.Add(oauth.RefreshTokenTTL)
	if g.ExpiresAt.Before(exp) {
		exp = g.ExpiresAt
	}
	return oauth.RefreshToken{Hash: oauth.HashSecret(token), GrantID: g.ID, ClientID: g.ClientID, UserID: g.UserID, CreatedAt: now, ExpiresAt: exp}
}

var errRefreshUnusable = errInvalidGrant("the refresh token is invalid, expired or revoked")

// refresh exchanges a refresh token for new tokens (RFC 6749 section 6),
// rotating it: the presented token is spent. Its client may present it
// again within oauth.RefreshReuseGrace of its first exchange (concurrent
// refreshes), each time for a fresh pair; presenting it after that
// revokes the grant, every token of its family with it.
func (s *Server) refresh(ctx context.Context, base string, client oauth.Client, form map[string][]string) (tokenResponse, error) {
	get := func(k string) string {
		if v := form[k]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	token := get("refresh_token")
	if token == "" {
		return tokenResponse{}, errInvalidRequest("refresh_token is required")
	}
	now := s.now().UTC()
	old, err := s.store.RefreshToken(ctx, oauth.HashSecret(token))
	if errs.Is(err, errs.NotFound) {
		return tokenResponse{}, errRefreshUnusable
	}
	if err != nil {
		return tokenResponse{}, err
	}
	if old.ClientID != client.ID {
		return tokenResponse{}, errInvalidGrant("the refresh token was issued to another client")
	}
	if old.Used && !old.Reusable(now) {
		return tokenResponse{}, s.reused(ctx, old, now)
	}
	if !now.Before(old.ExpiresAt) {
		return tokenResponse{}, errRefreshUnusable
	}
	g, err := s.store.Grant(ctx, old.GrantID)
	if errs.Is(err, errs.NotFound) {
		return tokenResponse{}, errRefreshUnusable
	}
	if err != nil {
		return tokenResponse{}, err
	}
	if !g.Live(now) {
		return tokenResponse{}, errRefreshUnusable
	}
	if res := get("resource"); res != "" && res != g.Resource {
		return tokenResponse{}, errInvalidTarget("resource must be the one the grant was authorized for")
	}
	if sc := get("scope"); sc != "" && strings.Join(strings.Fields(sc), " ") != g.Scope {
		return tokenResponse{}, oauthError{Code: "invalid_scope", Description: "scope may only repeat the granted scope " + g.Scope}
	}
	next := newSecret("wcr_")
	switch err := s.store.RotateRefreshToken(ctx, old, s.newRefresh(next, g, now), now); {
	case errs.CodeOf(err) == "REFRESH_TOKEN_USED":
		return tokenResponse{}, s.reused(ctx, old, now)
	case errs.Is(err, errs.Conflict):
		return tokenResponse{}, errRefreshUnusable
	case err != nil:
		return tokenResponse{}, err
	}
	return s.respond(ctx, base, g, next, now)
}

// reused revokes the grant of a refresh token presented after it was
// spent: either the client or a thief holds a copy, and the server cannot
// tell which (OAuth 2.1 section 4.3.1).
func (s *Server) reused(ctx context.Context, old oauth.RefreshToken, now time.Time) error {
	if err := s.store.RevokeGrant(ctx, old.GrantID, now); err != nil {
		return err
	}
	logging.FromContext(ctx).WarnContext(ctx, "oauth: refresh token reused; grant revoked", "grantId", old.GrantID, "clientId", old.ClientID)
	return errInvalidGrant("the refresh token was already used; the authorization is revoked")
}

// respond signs an access token for g and builds the token answer.
func (s *Server) respond(ctx context.Context, base string, g oauth.Grant, refresh string, now time.Time) (tokenResponse, error) {
	ks, err := s.keys.Keys(ctx)
	if err != nil {
		return tokenResponse{}, errs.E("oauth.respond", errs.Unavailable, "KEYS_UNAVAILABLE", "signing keys are unavailable").WithCause(err)
	}
	at, err := ks.Sign(accesstoken.AccessClaims{
		Claims: jwt.Claims{Issuer: base, Subject: g.UserID, Audience: jwt.Audience{g.Resource}, ID: uuid.NewString(),
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(oauth.AccessTokenTTL))},
		ClientID: g.ClientID, Scope: g.Scope, GrantID: g.ID,
	})
	if err != nil {
		return tokenResponse{}, err
	}
	return tokenResponse{AccessToken: at, TokenType: "Bearer", ExpiresIn: int(oauth.AccessTokenTTL / time.Second), RefreshToken: refresh, Scope: g.Scope}, nil
}

// handleRevoke is the revocation endpoint (RFC 7009). A refresh token or an
// access token of the authenticated client revokes its grant, and so every
// token of the family. Unknown tokens, tokens of other clients and
// personal access tokens are answered 200 and left alone, as the RFC asks
// for invalid tokens.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	if err := s.limiter.Allow(r.Context(), "oauth-token:"+auth.ClientAddress(r), s.tokenRule); err != nil {
		writeOAuthError(w, 0, fromServiceError(err))
		return
	}
	if !parseOAuthForm(w, r) {
		return
	}
	client, e := s.authenticateClient(r)
	if e != nil {
		writeOAuthError(w, http.StatusBadRequest, *e)
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		writeOAuthError(w, http.StatusBadRequest, errInvalidRequest("token is required"))
		return
	}
	ctx, now := r.Context(), s.now().UTC()
	grantID := ""
	if rt, err := s.store.RefreshToken(ctx, oauth.HashSecret(token)); err == nil {
		if rt.ClientID == client.ID {
			grantID = rt.GrantID
		}
	} else if !errs.Is(err, errs.NotFound) {
		writeOAuthError(w, 0, fromServiceError(err))
		return
	} else if ks, err := s.keys.Keys(ctx); err == nil {
		if c, err := ks.Decode(token); err == nil && c.ClientID == client.ID {
			grantID = c.GrantID
		}
	}
	if grantID != "" {
		if err := s.store.RevokeGrant(ctx, grantID, now); err != nil {
			writeOAuthError(w, 0, fromServiceError(err))
			return
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}
