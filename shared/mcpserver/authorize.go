package mcpserver

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/audit"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
)

// CallbackTimeout bounds a callback: the code's redemption and the
// listing of the tools, within the HTTP API's 30 s (a listing cut short
// leaves the server in status error with its grant stored: a refresh
// lists again).
const CallbackTimeout = 27 * time.Second

// MaxReturnToLen bounds an authorize request's returnTo.
const MaxReturnToLen = 2048

// CodeNotOAuth is an authorize request for a server whose auth is not
// oauth.
const CodeNotOAuth = "NOT_OAUTH_SERVER"

// checkReturnTo accepts "" or an absolute http(s) URL whose origin is
// one of allowed (ALLOWED_ORIGINS), without credentials or fragment.
func checkReturnTo(op, raw string, allowed []string) error {
	if raw == "" {
		return nil
	}
	bad := func(msg string) error {
		e := errs.E(op, errs.Invalid, "INVALID_RETURN_TO", "returnTo "+msg)
		e.Details = []errs.FieldError{{Field: "returnTo", Message: msg}}
		return e
	}
	if len(raw) > MaxReturnToLen {
		return bad("must be at most 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.User != nil || u.Fragment != "" || strings.Contains(raw, "#") ||
		(u.Scheme != "https" && u.Scheme != "http") {
		return bad("must be an absolute http(s) URL without credentials or fragment")
	}
	origin := strings.ToLower(u.Scheme + "://" + u.Host)
	for _, a := range allowed {
		if strings.EqualFold(strings.TrimSuffix(a, "/"), origin) {
			return nil
		}
	}
	return bad("must be on one of the service's allowed origins (ALLOWED_ORIGINS)")
}

// Authorize starts the OAuth authorization of the signed-in user's server
// id and returns the URL their browser goes to; base is the service's
// public origin (the redirect URI and the metadata document are under
// it), returnTo where the callback sends the browser back. NotFound,
// Forbidden, Invalid (INVALID_RETURN_TO, NOT_OAUTH_SERVER, the discovery
// and registration failures of the Authorizer).
func (s *Service) Authorize(ctx context.Context, id, base, returnTo string) (string, error) {
	const op = "mcpserver.Authorize"
	if err := checkReturnTo(op, returnTo, s.o.AllowedOrigins); err != nil {
		return "", err
	}
	srv, err := s.Get(ctx, id)
	if err != nil {
		return "", errs.Wrap(op, err)
	}
	if srv.Auth.Type != AuthOAuth || s.o.OAuth == nil {
		return "", errs.E(op, errs.Invalid, CodeNotOAuth, "the server's auth is not oauth; PATCH its auth to {\"type\":\"oauth\"} first")
	}
	u, err := s.o.OAuth.Start(ctx, srv, base, returnTo)
	if err != nil {
		return "", errs.Wrap(op, err)
	}
	if srv.Status != StatusConnected {
		// Shown with the server while it waits; best effort (a server
		// changed meanwhile keeps its own). A server whose authorization
		// could not start before (StartAuthorization) now waits for it.
		srv.AuthorizationURL = u
		if srv.Status == StatusError && srv.Error != nil && startFailure(srv.Error.Code) {
			srv.Status, srv.Error = StatusNeedsAuthorization, nil
		}
		_, _ = s.save(ctx, op, srv, srv.Name)
	}
	return u, nil
}

// startFailure reports whether code is an Authorizer's failure to start
// an authorization.
func startFailure(code string) bool {
	switch code {
	case CodeOAuthDiscovery, CodeOAuthUnsupported, CodeOAuthRegistration:
		return true
	}
	return false
}

// StartAuthorization starts the authorization of srv, an oauth server
// just created in status needs_authorization, and returns it as stored
// after: with its authorizationUrl, or, when the flow cannot start (its
// authorization server cannot be discovered or used, the registration is
// refused: OAUTH_DISCOVERY_FAILED, OAUTH_UNSUPPORTED,
// OAUTH_REGISTRATION_FAILED), in status error with the failure's code and
// message, as POST .../authorize would answer them, so that no server
// waits for an authorization nobody can give. Any other failure (of the
// service itself, or of the request's host: INVALID_BASE_URL) leaves srv
// as it was, and POST .../authorize says why.
func (s *Service) StartAuthorization(ctx context.Context, srv Server, base string) Server {
	const op = "mcpserver.StartAuthorization"
	if srv.Status != StatusNeedsAuthorization || srv.Auth.Type != AuthOAuth || s.o.OAuth == nil {
		return srv
	}
	_, err := s.Authorize(ctx, srv.ID, base, "")
	if err == nil {
		if got, gerr := s.Get(ctx, srv.ID); gerr == nil {
			return got
		}
		return srv
	}
	code := errs.CodeOf(err)
	if errs.KindOf(err) != errs.Invalid || !startFailure(code) {
		logging.FromContext(ctx).WarnContext(ctx, "start a new server's authorization", "serverId", srv.ID, "err", err.Error())
		return srv
	}
	failed := srv
	failed.Status, failed.AuthorizationURL = StatusError, ""
	failed.Error = &Problem{Code: code, Message: errs.MessageOf(err, "the authorization could not be started")}
	saved, serr := s.save(ctx, op, failed, failed.Name)
	if serr != nil {
		// Changed meanwhile: what is stored is the newer state.
		if got, gerr := s.Get(ctx, srv.ID); gerr == nil {
			return got
		}
		return srv
	}
	return saved
}

// Callback finishes an authorization from the callback's query: the code
// redeemed and the tokens stored (Authorizer.Finish, checked against
// userID, the callback's signed-in user), then the server's tools listed
// with them (Refresh) and mcp_server_authorized recorded. It returns what
// the state named (empty when the state is unknown) and the server; err
// is why the authorization failed.
func (s *Service) Callback(ctx context.Context, q url.Values, userID string) (Callback, Server, error) {
	const op = "mcpserver.Callback"
	if s.o.OAuth == nil {
		return Callback{}, Server{}, errs.E(op, errs.NotFound, "NOT_FOUND", "OAuth servers are not configured")
	}
	ctx, cancel := context.WithTimeout(ctx, CallbackTimeout)
	defer cancel()
	cb, err := s.o.OAuth.Finish(ctx, q, userID)
	if err != nil {
		return cb, Server{}, errs.Wrap(op, err)
	}
	ctx = auth.ActingFor(ctx, cb.UserID)
	srv, err := s.Refresh(ctx, cb.ServerID)
	if err != nil {
		return cb, srv, errs.Wrap(op, err)
	}
	s.o.Audit.Record(ctx, cb.UserID, audit.MCPServerAuthorized, map[string]any{"serverId": srv.ID, "name": srv.Name, "status": srv.Status})
	return cb, srv, nil
}

// keptTools are the tools an oauth server that needs authorization keeps:
// the ones it last listed, so that the workflows naming them stay valid
// and their runs wait for the authorization.
func keptTools(before Server) []Tool {
	if before.Tools == nil {
		return []Tool{}
	}
	return before.Tools
}

// oauthEndpoint returns how to reach an oauth server: its bearer token
// from the TokenSource. ok is false when there is none for now; then srv
// has been set to what it is (needs_authorization), or left as it was
// (the authorization server unreachable), and err says a failure of the
// service itself.
func (s *Service) oauthEndpoint(ctx context.Context, srv *Server, before Server) (Endpoint, bool, error) {
	if s.o.Tokens == nil {
		srv.Status, srv.Tools = StatusNeedsAuthorization, keptTools(before)
		return Endpoint{}, false, nil
	}
	tok, err := s.o.Tokens.Token(ctx, *srv)
	switch {
	case errors.Is(err, ErrNeedsAuthorization):
		srv.Status, srv.Tools = StatusNeedsAuthorization, keptTools(before)
		return Endpoint{}, false, nil
	case errors.Is(err, ErrTokenUnavailable):
		// Not the grant's fault: keep what the server was.
		srv.Status, srv.Error, srv.Tools, srv.ToolsAt = before.Status, before.Error, before.Tools, before.ToolsAt
		return Endpoint{}, false, nil
	case err != nil:
		return Endpoint{}, false, err
	}
	return Endpoint{URL: srv.URL, Header: "Authorization", Value: "Bearer " + tok}, true, nil
}
