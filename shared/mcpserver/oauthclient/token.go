package oauthclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcpserver"
)

// tokenResponse is a token endpoint's answer (RFC 6749 section 5).
type tokenResponse struct {
	AccessToken      string `json:"access_token"`
	TokenType        string `json:"token_type"`
	ExpiresIn        int64  `json:"expires_in"`
	RefreshToken     string `json:"refresh_token"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// oauthError is a token endpoint's refusal (RFC 6749 section 5.2).
type oauthError struct {
	status int
	code   string
}

func (e *oauthError) Error() string {
	return fmt.Sprintf("the token endpoint answered HTTP %d %s", e.status, safeCode(e.code))
}

// transientError is a failure a later try may fix: the network, a 5xx, a
// 429.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// ParseTokenResponse reads a token endpoint's answer of status from b:
// the tokens of a 200 (a Bearer access token), an *oauthError for a
// refusal. A lifetime over a year is cut to a year.
func ParseTokenResponse(status int, b []byte) (tokenResponse, error) {
	var r tokenResponse
	if err := ParseJSONObject(b, &r); err != nil {
		if status >= 500 {
			return r, &transientError{fmt.Errorf("the token endpoint answered HTTP %d", status)}
		}
		return r, fmt.Errorf("the token endpoint answered HTTP %d, not JSON", status)
	}
	if status != http.StatusOK {
		if status >= 500 || status == http.StatusTooManyRequests {
			return r, &transientError{&oauthError{status: status, code: r.Error}}
		}
		return r, &oauthError{status: status, code: r.Error}
	}
	if r.AccessToken == "" || !strings.EqualFold(r.TokenType, "bearer") {
		return r, errors.New("the token endpoint answered no Bearer access token")
	}
	if len(r.AccessToken) > 8192 || len(r.RefreshToken) > 8192 {
		return r, errors.New("the token endpoint answered a token over 8 KiB")
	}
	const year = 365 * 24 * 3600
	if r.ExpiresIn < 0 || r.ExpiresIn > year {
		r.ExpiresIn = year
	}
	return r, nil
}

// tokenRequest posts form to g's token endpoint with the client's
// authentication, tried up to attempts times while it fails transiently.
func (c *Client) tokenRequest(ctx context.Context, g mcpserver.OAuthGrant, form url.Values, attempts int) (tokenResponse, error) {
	var secret string
	if g.ClientSecret != "" {
		b, err := c.vault.Open(ctx, clientContext(g.ServerID), g.ClientSecret)
		if err != nil {
			return tokenResponse{}, err
		}
		secret = string(b)
	}
	var last error
	for i := range attempts {
		if i > 0 {
			if err := c.sleep(ctx, time.Duration(1<<(i-1))*250*time.Millisecond); err != nil {
				return tokenResponse{}, &transientError{err}
			}
		}
		res, err := c.postToken(ctx, g, form, secret)
		var te *transientError
		if err == nil || !errors.As(err, &te) {
			return res, err
		}
		last = err
	}
	return tokenResponse{}, last
}

func (c *Client) postToken(ctx context.Context, g mcpserver.OAuthGrant, form url.Values, secret string) (tokenResponse, error) {
	f := url.Values{}
	for k, v := range form {
		f[k] = v
	}
	switch g.AuthMethod {
	case "client_secret_post":
		f.Set("client_id", g.ClientID)
		f.Set("client_secret", secret)
	case "client_secret_basic":
	default:
		f.Set("client_id", g.ClientID)
	}
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.TokenEndpoint, strings.NewReader(f.Encode()))
	if err != nil {
		return tokenResponse{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if g.AuthMethod == "client_secret_basic" {
		req.SetBasicAuth(url.QueryEscape(g.ClientID), url.QueryEscape(secret))
	}
	res, err := c.http.Do(req)
	if err != nil {
		return tokenResponse{}, &transientError{err}
	}
	defer res.Body.Close()
	b, err := readBounded(res.Body, MaxTokenBytes)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return tokenResponse{}, err
		}
		return tokenResponse{}, &transientError{err}
	}
	return ParseTokenResponse(res.StatusCode, b)
}

// tokenError is what a failed token request is for the user: a refusal
// (invalid_grant and the like) or an authorization server that could not
// be reached.
func tokenError(err error) error {
	var te *transientError
	if errors.As(err, &te) {
		return errs.E("oauthclient", errs.Invalid, CodeUnreachableAS, "the authorization server could not be reached; try again").WithCause(err)
	}
	var oe *oauthError
	if errors.As(err, &oe) {
		return errs.E("oauthclient", errs.Invalid, CodeTokenRefused, oe.Error())
	}
	return errs.E("oauthclient", errs.Invalid, CodeTokenRefused, "the token endpoint's answer is not valid").WithCause(err)
}

// Token implements mcpserver.TokenSource: the stored access token while
// it has more than RefreshMargin to live, else a refresh (one at a time
// per server: the caller that wins the grant's version takes a lease,
// the others wait for its result). invalid_grant (or any other refusal
// of the refresh) forgets the tokens: ErrNeedsAuthorization. A network
// failure is retried and leaves the grant as it was:
// ErrTokenUnavailable, unless the current token is still valid.
func (c *Client) Token(ctx context.Context, srv mcpserver.Server) (string, error) {
	const op = "oauthclient.Token"
	const polls = 40
	for i := 0; i < polls; i++ {
		g, err := c.store.Grant(ctx, srv.UserID, srv.ID)
		if errs.KindOf(err) == errs.NotFound {
			return "", fmt.Errorf("%s: %w", op, mcpserver.ErrNeedsAuthorization)
		}
		if err != nil {
			return "", errs.Wrap(op, err)
		}
		if g.Tokens == "" {
			return "", fmt.Errorf("%s: %w", op, mcpserver.ErrNeedsAuthorization)
		}
		plain, err := c.vault.Open(ctx, tokensContext(g.ServerID), g.Tokens)
		if err != nil {
			return "", errs.Wrap(op, err)
		}
		var tk tokens
		if err := json.Unmarshal(plain, &tk); err != nil {
			return "", errs.Wrap(op, err)
		}
		now := c.now()
		live := g.ExpiresAt.IsZero() || now.Before(g.ExpiresAt)
		if g.ExpiresAt.IsZero() || now.Add(RefreshMargin).Before(g.ExpiresAt) {
			return tk.Access, nil
		}
		if tk.Refresh == "" {
			if live {
				return tk.Access, nil
			}
			return "", fmt.Errorf("%s: %w", op, mcpserver.ErrNeedsAuthorization)
		}
		if now.Before(g.RefreshingUntil) {
			// Another caller refreshes: use the token while it lives,
			// else wait for the refresh.
			if live {
				return tk.Access, nil
			}
			if err := c.sleep(ctx, 250*time.Millisecond); err != nil {
				return "", fmt.Errorf("%s: %w", op, mcpserver.ErrTokenUnavailable)
			}
			continue
		}
		g.RefreshingUntil = now.Add(RefreshLease).UTC()
		g.Version++
		if err := c.store.PutGrant(ctx, g); errs.KindOf(err) == errs.Conflict {
			continue // another caller took the lease first
		} else if err != nil {
			return "", errs.Wrap(op, err)
		}
		return c.refresh(ctx, g, tk, live)
	}
	return "", fmt.Errorf("%s: %w", op, mcpserver.ErrTokenUnavailable)
}

// refresh runs the refresh of g, whose lease the caller holds.
func (c *Client) refresh(ctx context.Context, g mcpserver.OAuthGrant, tk tokens, live bool) (string, error) {
	const op = "oauthclient.refresh"
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.Refresh}, "resource": {g.Resource}}
	res, err := c.tokenRequest(ctx, g, form, refreshAttempts)
	var te *transientError
	switch {
	case err == nil:
		if err := c.storeTokens(ctx, &g, res, tk.Refresh); err != nil {
			return "", errs.Wrap(op, err)
		}
		return res.AccessToken, nil
	case errors.As(err, &te):
		// Keep the grant: release the lease only.
		g.RefreshingUntil = time.Time{}
		g.Version++
		_ = c.store.PutGrant(ctx, g)
		if live {
			return tk.Access, nil
		}
		return "", fmt.Errorf("%s: %w", op, mcpserver.ErrTokenUnavailable)
	default:
		// Refused (invalid_grant: revoked or expired): the user authorizes
		// again.
		g.Tokens, g.ExpiresAt, g.RefreshingUntil = "", time.Time{}, time.Time{}
		g.Version++
		g.UpdatedAt = c.now().UTC()
		if perr := c.store.PutGrant(ctx, g); perr != nil {
			return "", errs.Wrap(op, perr)
		}
		return "", fmt.Errorf("%s: %w", op, mcpserver.ErrNeedsAuthorization)
	}
}
