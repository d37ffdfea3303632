package mcpserver

import (
	"context"
	"errors"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/paging"
)

// Caller calls one tool of a remote server (remote.Remote).
type Caller interface {
	CallTool(ctx context.Context, e Endpoint, name string, args map[string]any) (map[string]any, *Problem)
}

// CodeAuthorizationRequired is a call of an oauth server's tool while the
// server has no usable grant: the user authorizes it first.
const CodeAuthorizationRequired = "AUTHORIZATION_REQUIRED"

// CodeServerDisabled is a call of a disabled server's tool.
const CodeServerDisabled = "MCP_SERVER_DISABLED"

// Servers returns every server of userID (at most MaxServers, in the
// order they were created), with their stored tool lists: no remote
// call. Its errors are the store's.
func (s *Service) Servers(ctx context.Context, userID string) ([]Server, error) {
	list, _, err := s.o.Store.ListServers(ctx, userID, paging.Cursor{Limit: MaxServers})
	return list, errs.Wrap("mcpserver.Servers", err)
}

// AuthorizationError is the error of a call of srv that needs the user's
// authorization: Forbidden AUTHORIZATION_REQUIRED, wrapping
// ErrNeedsAuthorization.
func AuthorizationError(srv Server) error {
	return errs.E("mcpserver.CallTool", errs.Forbidden, CodeAuthorizationRequired,
		"the MCP server "+srv.Name+" needs your authorization: POST "+AuthorizePath(srv.ID)).WithCause(NeedsAuthorization{ServerID: srv.ID})
}

// AuthorizePath is the route that starts the authorization of server id
// (POST, answering the URL the user's browser opens).
func AuthorizePath(id string) string { return "/api/mcp-servers/" + id + "/authorize" }

// NeedsAuthorization is the cause of AuthorizationError: it names the
// server (a run's step waits for its authorization) and is
// ErrNeedsAuthorization (errors.Is).
type NeedsAuthorization struct{ ServerID string }

func (n NeedsAuthorization) Error() string { return ErrNeedsAuthorization.Error() }

// Is makes n ErrNeedsAuthorization.
func (n NeedsAuthorization) Is(target error) bool { return target == ErrNeedsAuthorization }

// AuthorizationServerID names the server to authorize.
func (n NeedsAuthorization) AuthorizationServerID() string { return n.ServerID }

// CallTool calls the tool tool of srv with args: with srv's API key, or
// its OAuth bearer token (refreshed when it is about to expire), bounded
// by CallTimeout. Errors: Forbidden MCP_SERVER_DISABLED; Forbidden
// AUTHORIZATION_REQUIRED (errors.Is ErrNeedsAuthorization) for an oauth
// server without a grant or whose token the server refused; Unavailable
// when no token can be had for now or the server cannot be reached;
// Timeout; TooLarge RESPONSE_TOO_LARGE or TOOL_VALUE_TOO_LARGE; Invalid
// INVALID_RESPONSE, INVALID_URL, REMOTE_TOOL_ERROR (the tool's own
// failure, its message as the server gave it).
func (s *Service) CallTool(ctx context.Context, srv Server, tool string, args map[string]any) (map[string]any, error) {
	const op = "mcpserver.CallTool"
	if !srv.Enabled {
		return nil, errs.E(op, errs.Forbidden, CodeServerDisabled, "the MCP server "+srv.Name+" is disabled")
	}
	if s.o.Caller == nil {
		return nil, errs.E(op, errs.Unavailable, CodeUnreachable, "remote tools cannot be called here")
	}
	e := Endpoint{URL: srv.URL}
	switch srv.Auth.Type {
	case AuthHeader:
		plain, err := s.o.Vault.Open(ctx, secretContext(srv.ID), srv.Secret)
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
		e.Header, e.Value = srv.Auth.Name, string(plain)
	case AuthOAuth:
		if s.o.Tokens == nil {
			return nil, AuthorizationError(srv)
		}
		tok, err := s.o.Tokens.Token(ctx, srv)
		switch {
		case errors.Is(err, ErrNeedsAuthorization):
			return nil, AuthorizationError(srv)
		case errors.Is(err, ErrTokenUnavailable):
			return nil, errs.E(op, errs.Unavailable, CodeUnreachable, "the authorization server of "+srv.Name+" cannot be reached; try again later").WithCause(err)
		case err != nil:
			return nil, errs.Wrap(op, err)
		}
		e.Header, e.Value = "Authorization", "Bearer "+tok
	}
	out, p := s.o.Caller.CallTool(ctx, e, tool, args)
	if p == nil {
		return out, nil
	}
	switch p.Code {
	case CodeUnauthorizedByRmt:
		if srv.Auth.Type == AuthOAuth {
			return nil, AuthorizationError(srv)
		}
		return nil, errs.E(op, errs.Forbidden, p.Code, p.Message)
	case CodeRemoteTimeout:
		return nil, errs.E(op, errs.Timeout, p.Code, p.Message)
	case CodeUnreachable:
		return nil, errs.E(op, errs.Unavailable, p.Code, p.Message)
	case CodeResponseTooLarge, CodeResultTooLarge:
		return nil, errs.E(op, errs.TooLarge, p.Code, p.Message)
	}
	return nil, errs.E(op, errs.Invalid, p.Code, p.Message)
}
