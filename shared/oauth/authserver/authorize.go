package authserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"github.com/workflowchat/service/shared/audit"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/oauth"
)

// authzParams are the authorization request's parameters, carried as
// hidden fields through the sign-in and consent forms and validated again
// on every step.
var authzParams = []string{"client_id", "redirect_uri", "response_type", "state", "code_challenge", "code_challenge_method", "scope", "resource"}

// errUnavailablePage is the page error of a storage failure: answered 503.
const errUnavailablePage = "the service is temporarily unavailable; try again shortly"

// errRateLimitedPage is the page error of a client address over the
// document fetch limit: answered 429 with Retry-After.
const errRateLimitedPage = "too many applications' metadata documents were fetched for your address; wait and retry"

// pageStatus is the status of an error page.
func pageStatus(msg string) int {
	switch msg {
	case errUnavailablePage:
		return http.StatusServiceUnavailable
	case errRateLimitedPage:
		return http.StatusTooManyRequests
	}
	return http.StatusBadRequest
}

// writePageError answers the page error msg of req's validation.
func writePageError(w http.ResponseWriter, req authzRequest, msg string) {
	if req.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(req.retryAfter))
	}
	errorPage(w, pageStatus(msg), msg)
}

// csrfCookie holds the token the sign-in form must echo (double submit):
// before the sign-in there is no session to bind a token to. The consent
// form's token is bound to the session instead (consentCSRF).
const csrfCookie = "oauth_csrf"

// challengePattern is a PKCE S256 challenge: 32 bytes, base64url.
var challengePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// authzRequest is a validated authorization request.
type authzRequest struct {
	params      url.Values
	client      oauth.Client
	redirectURI string
	state       string
	challenge   string
	resource    string
	base        string
	// retryAfter, in seconds, comes with a rate-limited page error.
	retryAfter int
}

// validateAuthz checks an authorization request (RFC 6749 section 4.1.1,
// RFC 7636, RFC 8707). A failure that may not be sent to the redirect URI
// (unknown client, redirect URI not registered) is pageErr; one that is
// reported to the client through its redirect URI is redirectErr.
func (s *Server) validateAuthz(r *http.Request, form url.Values) (req authzRequest, pageErr string, redirectErr *oauthError) {
	req.params = url.Values{}
	for _, p := range authzParams {
		if v := form[p]; len(v) > 1 {
			return req, "the parameter " + p + " is repeated", nil
		} else if len(v) == 1 && v[0] != "" {
			req.params.Set(p, v[0])
		}
	}
	base := oauth.BaseURL(s.baseURL, r)
	if base == "" {
		return req, "the request's host is not a valid host name", nil
	}
	req.base = base
	c, err := s.client(r, req.params.Get("client_id"))
	switch {
	case errs.Is(err, errs.RateLimited):
		req.retryAfter = max(retryAfterOf(err), 1)
		return req, errRateLimitedPage, nil
	case errs.Is(err, errs.NotFound):
		return req, "unknown client (client_id)", nil
	case errs.Is(err, errs.Invalid):
		return req, errs.MessageOf(err, "invalid client"), nil
	case err != nil:
		return req, errUnavailablePage, nil
	}
	req.client = c
	req.redirectURI = req.params.Get("redirect_uri")
	if req.redirectURI == "" && len(c.RedirectURIs) == 1 {
		req.redirectURI = c.RedirectURIs[0]
	}
	if req.redirectURI == "" || !redirectAllowed(c.RedirectURIs, req.redirectURI) {
		return req, "the redirect_uri is not registered for this client", nil
	}
	req.state = req.params.Get("state")
	fail := func(e oauthError) (authzRequest, string, *oauthError) { return req, "", &e }
	if rt := req.params.Get("response_type"); rt != "code" {
		return fail(oauthError{Code: "unsupported_response_type", Description: "response_type must be code"})
	}
	if !slices.Contains(c.GrantTypes, "authorization_code") {
		return fail(oauthError{Code: "unauthorized_client", Description: "the client is not registered for the authorization_code grant"})
	}
	req.challenge = req.params.Get("code_challenge")
	switch m := req.params.Get("code_challenge_method"); {
	case req.challenge == "":
		return fail(errInvalidRequest("PKCE is required: send code_challenge with code_challenge_method S256"))
	case m != "S256":
		return fail(errInvalidRequest("code_challenge_method must be S256 (plain is not accepted)"))
	case !challengePattern.MatchString(req.challenge):
		return fail(errInvalidRequest("code_challenge must be the base64url SHA-256 of the code verifier (43 characters)"))
	}
	req.resource = oauth.ResourceURL(base)
	if res := req.params.Get("resource"); res != "" {
		if !slices.Contains(oauth.Audiences(base), res) {
			return fail(errInvalidTarget("resource must be " + oauth.ResourceURL(base)))
		}
		req.resource = res
	}
	return req, "", nil
}

// redirectWithError sends an authorization error to the client (RFC 6749
// section 4.1.2.1, with iss per RFC 9207).
func redirectWithError(w http.ResponseWriter, r *http.Request, req authzRequest, e oauthError) {
	q := url.Values{"error": {e.Code}, "iss": {req.base}}
	if e.Description != "" {
		q.Set("error_description", e.Description)
	}
	if req.state != "" {
		q.Set("state", req.state)
	}
	http.Redirect(w, r, withQuery(req.redirectURI, q), http.StatusSeeOther)
}

// withQuery appends q to uri's query.
func withQuery(uri string, q url.Values) string {
	u, _ := url.Parse(uri) // validated before
	old := u.Query()
	for k, v := range q {
		old[k] = v
	}
	u.RawQuery = old.Encode()
	return u.String()
}

// handleAuthorize is GET /oauth/authorize: it validates the request and
// shows the consent page to a signed-in browser, else the sign-in page.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	req, pageErr, rerr := s.validateAuthz(r, r.URL.Query())
	if pageErr != "" {
		writePageError(w, req, pageErr)
		return
	}
	if rerr != nil {
		redirectWithError(w, r, req, *rerr)
		return
	}
	csrf := s.csrfToken(w, r)
	if sess, token, ok := s.sessionOf(r); ok {
		s.consentPage(w, req, consentCSRF(token), sess.User.Email)
		return
	}
	s.signInPage(w, req, csrf, "", "", http.StatusOK)
}

// handleAuthorizeForm is POST /oauth/authorize: the sign-in and consent
// forms. It refuses a cross-origin post and one without the CSRF token the
// page was served with (for a signed-in browser, the one its session
// gives: consentCSRF), validates the authorization request again, then:
// sign-in checks the password (with the sign-in limits) and shows the
// consent page; approve issues a code to a signed-in user; deny sends
// access_denied.
func (s *Server) handleAuthorizeForm(w http.ResponseWriter, r *http.Request) {
	if err := http.NewCrossOriginProtection().Check(r); err != nil {
		errorPage(w, http.StatusForbidden, "cross-site form submission refused")
		return
	}
	if err := r.ParseForm(); err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			httpapi.WriteError(w, r, httpapi.BodyTooLarge("authserver.handleAuthorizeForm", tooLarge.Limit))
			return
		}
		errorPage(w, http.StatusBadRequest, "the form could not be read")
		return
	}
	form := r.PostForm
	anon := ""
	if c, err := r.Cookie(csrfCookie); err == nil {
		anon = c.Value
	}
	want := anon
	sess, token, signedIn := s.sessionOf(r)
	if signedIn && form.Get("action") != "sign-in" {
		// Consent is given by a session: a token an attacker planted with
		// the cookie (a sibling domain can set it) does not pass.
		want = consentCSRF(token)
	}
	if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(form.Get("csrf"))) != 1 {
		errorPage(w, http.StatusForbidden, "the form expired or did not come from this page (CSRF check failed); start again from the application")
		return
	}
	req, pageErr, rerr := s.validateAuthz(r, form)
	if pageErr != "" {
		writePageError(w, req, pageErr)
		return
	}
	if rerr != nil {
		redirectWithError(w, r, req, *rerr)
		return
	}
	ctx := r.Context()
	switch form.Get("action") {
	case "sign-in":
		creds := auth.Credentials{Email: form.Get("email"), Password: form.Get("password")}
		if s.attempts != nil {
			if err := s.attempts.SignIn(ctx, auth.NormalizeEmail(creds.Email), auth.ClientAddress(r)); err != nil {
				s.signInPage(w, req, s.csrfToken(w, r), creds.Email, errs.MessageOf(err, "too many attempts; wait and retry"), http.StatusTooManyRequests)
				return
			}
		}
		in, err := s.auth.SignIn(ctx, creds)
		if err != nil {
			status := http.StatusUnauthorized
			if !errs.Is(err, errs.Unauthenticated) && !errs.Is(err, errs.Invalid) {
				status = http.StatusServiceUnavailable
			}
			s.signInPage(w, req, s.csrfToken(w, r), creds.Email, errs.MessageOf(err, "sign-in failed; try again"), status)
			return
		}
		auth.SetCookie(w, r, in.Token, in.Session.ExpiresAt, in.Session.RenewedAt)
		s.consentPage(w, req, consentCSRF(in.Token), in.User.Email)
	case "approve":
		if !signedIn {
			s.signInPage(w, req, s.csrfToken(w, r), "", "your session ended; sign in again", http.StatusUnauthorized)
			return
		}
		code, err := s.issueCode(r, req, sess.User.ID)
		if err != nil {
			if oe, ok := err.(oauthError); ok {
				redirectWithError(w, r, req, oe)
				return
			}
			logging.FromContext(ctx).ErrorContext(ctx, "oauth: issue code", "err", err.Error())
			redirectWithError(w, r, req, oauthError{Code: "temporarily_unavailable", Description: "the authorization could not be saved; try again"})
			return
		}
		// The session again: a sign-out-all that deleted it meanwhile ends
		// codes only after deleting the sessions, and this code may have
		// been issued in between; unsent, it is never redeemed.
		if _, ok := s.session(r); !ok {
			s.signInPage(w, req, s.csrfToken(w, r), "", "your session ended; sign in again", http.StatusUnauthorized)
			return
		}
		s.auth.Audit().Record(ctx, sess.User.ID, audit.OAuthConsent, map[string]any{"clientId": req.client.ID, "clientName": req.client.Name})
		q := url.Values{"code": {code}, "iss": {req.base}}
		if req.state != "" {
			q.Set("state", req.state)
		}
		http.Redirect(w, r, withQuery(req.redirectURI, q), http.StatusSeeOther)
	case "deny":
		// A deny also ends the codes the user approved for this client
		// and the client has not redeemed yet (another tab's approval).
		if signedIn {
			if err := s.store.EndCodes(ctx, sess.User.ID, req.client.ID); err != nil {
				logging.FromContext(ctx).ErrorContext(ctx, "oauth: end codes on deny", "err", err.Error())
				errorPage(w, http.StatusServiceUnavailable, errUnavailablePage)
				return
			}
		}
		redirectWithError(w, r, req, oauthError{Code: "access_denied", Description: "the user denied the request"})
	default:
		errorPage(w, http.StatusBadRequest, "unknown action")
	}
}

// session returns the live browser session of r's session cookie.
func (s *Server) session(r *http.Request) (auth.Session, bool) {
	sess, _, ok := s.sessionOf(r)
	return sess, ok
}

// sessionOf returns the live browser session of r's session cookie and
// the cookie's token.
func (s *Server) sessionOf(r *http.Request) (auth.Session, string, bool) {
	c, err := r.Cookie(auth.CookieName)
	if err != nil {
		return auth.Session{}, "", false
	}
	sess, _, err := s.auth.Authenticate(r.Context(), c.Value)
	return sess, c.Value, err == nil
}

// consentCSRF is the consent form's CSRF token for the session whose
// token is sessionToken: an HMAC-SHA256 keyed with that token. Only the
// session's browser (its cookie is HttpOnly) and the server see the
// token, and the stored session key (its SHA-256) does not give it, so no
// one else can forge the field; it needs no server key and nothing stored.
func consentCSRF(sessionToken string) string {
	m := hmac.New(sha256.New, []byte(sessionToken))
	m.Write([]byte("oauth-consent-csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrfToken returns the CSRF token of r's cookie, or sets a new one.
func (s *Server) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 43 {
		return c.Value
	}
	v := newSecret("")
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: oauth.AuthorizePath, HttpOnly: true,
		Secure: secureRequest(r), SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	return v
}

// secureRequest reports whether r came over HTTPS (directly or through the
// distribution).
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

func (s *Server) formParams(req authzRequest) []pageParam {
	var ps []pageParam
	for _, p := range authzParams {
		if v := req.params.Get(p); v != "" {
			ps = append(ps, pageParam{p, v})
		}
	}
	return ps
}

func (s *Server) signInPage(w http.ResponseWriter, req authzRequest, csrf, email, msg string, status int) {
	renderPage(w, status, "signin", pageData{Title: "Sign in", Action: oauth.AuthorizePath, CSRF: csrf, Params: s.formParams(req),
		ClientName: req.client.Name, ClientID: req.client.ID, Email: email, Error: msg}, "")
}

func (s *Server) consentPage(w http.ResponseWriter, req authzRequest, csrf, email string) {
	renderPage(w, http.StatusOK, "consent", pageData{Title: "Allow access", Action: oauth.AuthorizePath, CSRF: csrf, Params: s.formParams(req),
		ClientName: req.client.Name, ClientID: req.client.ID, Verified: req.client.Document, RedirectURI: req.redirectURI, Email: email},
		formTargetOf(req.redirectURI))
}

// issueCode stores a new authorization code for userID and returns it.
// It fails with access_denied when the user already has oauth.MaxGrantsPerUser
// live grants.
func (s *Server) issueCode(r *http.Request, req authzRequest, userID string) (string, error) {
	ctx := r.Context()
	now := s.now().UTC()
	// The epoch before anything else: an ending after this read ends
	// this code too.
	epoch, err := s.store.CodeEpoch(ctx, userID, req.client.ID)
	if err != nil {
		return "", err
	}
	grants, err := s.store.UserGrants(ctx, userID)
	if err != nil {
		return "", err
	}
	live := 0
	for _, g := range grants {
		if g.Live(now) {
			live++
		}
	}
	if live >= oauth.MaxGrantsPerUser {
		return "", oauthError{Code: "access_denied", Description: "too many connected applications; disconnect some first"}
	}
	code := newSecret("wcc_")
	err = s.store.CreateCode(ctx, oauth.Code{
		// The redirect_uri as the request gave it (empty when it named
		// none): the token request must repeat it (RFC 6749 section 4.1.3).
		Hash: oauth.HashSecret(code), ClientID: req.client.ID, UserID: userID, RedirectURI: req.params.Get("redirect_uri"),
		Challenge: req.challenge, Resource: req.resource, Scope: oauth.Scope, ClientName: req.client.Name, Epoch: epoch,
		CreatedAt: now, ExpiresAt: now.Add(oauth.CodeTTL),
	})
	return code, err
}
