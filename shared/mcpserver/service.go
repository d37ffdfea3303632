package mcpserver

import (
	"context"
	"github.com/workflowchat/service/shared/audit"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/paging"
)

// Store keeps the servers.
type Store interface {
	// CreateServer stores s, unless its owner already has a server named
	// s.Name (Conflict NAME_TAKEN) or max servers (Conflict SERVER_LIMIT).
	CreateServer(ctx context.Context, s Server, max int) error
	// Server returns the server id of userID: NotFound
	// MCP_SERVER_NOT_FOUND, Forbidden when it is another user's.
	Server(ctx context.Context, userID, id string) (Server, error)
	// ListServers returns a page of userID's servers in the order they
	// were created, and the next page's cursor (empty after the last).
	ListServers(ctx context.Context, userID string, page paging.Cursor) ([]Server, string, error)
	// UpdateServer replaces s, conditioned on the stored version being
	// s.Version-1 (Conflict otherwise) and, when its name changed from
	// oldName, on the new name being free (Conflict NAME_TAKEN).
	UpdateServer(ctx context.Context, s Server, oldName string) error
	// DeleteServer removes the server id of userID: NotFound, Forbidden.
	DeleteServer(ctx context.Context, userID, id string) error
}

// Sealer seals and opens secrets (vault.Vault).
type Sealer interface {
	Seal(ctx context.Context, context string, plaintext []byte) (string, error)
	Open(ctx context.Context, context, sealed string) ([]byte, error)
}

// Lister lists a remote server's tools (Remote).
type Lister interface {
	ListTools(ctx context.Context, e Endpoint) ([]Tool, *Problem)
}

// Options configures NewService.
type Options struct {
	Store  Store
	Vault  Sealer
	Remote Lister
	// AllowPrivate allows http URLs and non-public hosts
	// (TOOLS_ALLOW_PRIVATE_NETWORKS).
	AllowPrivate bool
	Now          func() time.Time
	// Audit records servers added, removed and authorized; nil records
	// none.
	Audit *audit.Log
	// Tokens gives the bearer tokens of oauth servers, used to list their
	// tools; nil leaves every oauth server needs_authorization.
	Tokens TokenSource
	// OAuth runs the authorization flow of oauth servers; nil refuses
	// authorize (NOT_OAUTH_SERVER).
	OAuth Authorizer
	// Document returns the Client ID Metadata Document under a base
	// URL (GET /oauth/client.json); nil serves none.
	Document func(base string) any
	// AllowedOrigins are the origins an authorization's returnTo may
	// name (ALLOWED_ORIGINS).
	AllowedOrigins []string
	// Caller calls the remote tools (remote.Remote); nil refuses every
	// call (CallTool).
	Caller Caller
	// OnConnected, when set, is told of an oauth server a refresh (the
	// authorization's callback's included) left connected: the runs of
	// its user waiting for its authorization go on (runs.Service.Authorized).
	// Its error is logged; the sweeper resumes what it missed.
	OnConnected func(ctx context.Context, userID, serverID string) error
}

// Service is the users' remote MCP servers.
type Service struct {
	o Options
}

// NewService returns the Service of o.
func NewService(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{o: o}
}

// secretContext binds a server's sealed header value to the server.
func secretContext(id string) string { return "mcpserver:" + id + ":header" }

// Create registers a server for the signed-in user and lists its tools:
// Invalid (VALIDATION_FAILED, INVALID_URL, also for a server whose
// address is refused when dialed), Conflict NAME_TAKEN or SERVER_LIMIT.
// A server that cannot be reached or answers badly is stored with status
// error.
func (s *Service) Create(ctx context.Context, in CreateRequest) (Server, error) {
	const op = "mcpserver.Create"
	var fe errs.FieldErrors
	checkName(in.Name, &fe)
	a, secret := checkAuth(in.Auth, &fe)
	if err := fe.Err(op); err != nil {
		return Server{}, err
	}
	u, err := checkURL(op, in.URL, s.o.AllowPrivate)
	if err != nil {
		return Server{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Server{}, errs.Wrap(op, err)
	}
	now := s.o.Now().UTC()
	srv := Server{ID: id.String(), UserID: auth.UserID(ctx), Name: in.Name, URL: u, Auth: a, Enabled: true, Version: 1,
		CreatedAt: now, UpdatedAt: now}
	if secret != "" {
		if srv.Secret, err = s.o.Vault.Seal(ctx, secretContext(srv.ID), []byte(secret)); err != nil {
			return Server{}, errs.Wrap(op, err)
		}
	}
	if err := s.connect(ctx, op, &srv, secret); err != nil {
		return Server{}, err
	}
	if err := s.o.Store.CreateServer(ctx, srv, MaxServers); err != nil {
		return Server{}, errs.Wrap(op, err)
	}
	s.o.Audit.Record(ctx, auth.UserID(ctx), audit.MCPServerAdded, map[string]any{"serverId": srv.ID, "name": srv.Name, "url": srv.URL})
	return srv, nil
}

// connect lists srv's tools into it and sets its status. A refused
// address is INVALID_URL and stores nothing.
//
// An oauth server is listed with its bearer token (TokenSource): without
// a grant, or when the token is refused, it is needs_authorization; when
// the authorization server cannot be reached it stays as it was.
func (s *Service) connect(ctx context.Context, op string, srv *Server, secret string) error {
	before := *srv
	srv.Error, srv.Tools = nil, nil
	e := Endpoint{URL: srv.URL}
	switch srv.Auth.Type {
	case AuthHeader:
		e.Header, e.Value = srv.Auth.Name, secret
	case AuthOAuth:
		oe, ok, err := s.oauthEndpoint(ctx, srv, before)
		if err != nil {
			return errs.Wrap(op, err)
		}
		if !ok {
			return nil
		}
		e = oe
	}
	tools, p := s.o.Remote.ListTools(ctx, e)
	srv.ToolsAt = s.o.Now().UTC()
	switch {
	case p != nil && srv.Auth.Type == AuthOAuth && p.Code == CodeUnauthorizedByRmt:
		// The token was refused: the user authorizes again.
		srv.Status, srv.Tools = StatusNeedsAuthorization, keptTools(before)
	case p != nil && p.Code == CodeInvalidURL:
		ie := errs.E(op, errs.Invalid, CodeInvalidURL, p.Message)
		ie.Details = []errs.FieldError{{Field: "url", Message: p.Message}}
		return ie
	case p != nil:
		srv.Status, srv.Error, srv.Tools = StatusError, p, []Tool{}
	default:
		srv.Status, srv.Tools, srv.AuthorizationURL = StatusConnected, tools, ""
	}
	return nil
}

// Get returns the server id of the signed-in user: NotFound, Forbidden.
func (s *Service) Get(ctx context.Context, id string) (Server, error) {
	srv, err := s.o.Store.Server(ctx, auth.UserID(ctx), id)
	return srv, errs.Wrap("mcpserver.Get", err)
}

// List returns a page of the signed-in user's servers and the next
// page's cursor.
func (s *Service) List(ctx context.Context, page paging.Cursor) ([]Server, string, error) {
	list, next, err := s.o.Store.ListServers(ctx, auth.UserID(ctx), page)
	return list, next, errs.Wrap("mcpserver.List", err)
}

// Update changes the server id as in says; a new URL or auth lists its
// tools again. Errors as Create's, and NotFound, Forbidden, Conflict
// when it changed meanwhile.
func (s *Service) Update(ctx context.Context, id string, in UpdateRequest) (Server, error) {
	const op = "mcpserver.Update"
	var fe errs.FieldErrors
	if in.Name != nil {
		checkName(*in.Name, &fe)
	}
	var a Auth
	var secret string
	if in.Auth != nil {
		a, secret = checkAuth(in.Auth, &fe)
	}
	if err := fe.Err(op); err != nil {
		return Server{}, err
	}
	var newURL string
	if in.URL != nil {
		u, err := checkURL(op, *in.URL, s.o.AllowPrivate)
		if err != nil {
			return Server{}, err
		}
		newURL = u
	}
	srv, err := s.Get(ctx, id)
	if err != nil {
		return Server{}, errs.Wrap(op, err)
	}
	oldName := srv.Name
	reconnect := false
	if in.Name != nil {
		srv.Name = *in.Name
	}
	if in.Enabled != nil {
		srv.Enabled = *in.Enabled
	}
	if in.URL != nil && newURL != srv.URL {
		srv.URL, reconnect = newURL, true
	}
	if (reconnect || in.Auth != nil) && srv.Auth.Type == AuthOAuth && s.o.OAuth != nil {
		// A new URL or auth: the tokens of the old are not sent on.
		if err := s.o.OAuth.Forget(ctx, srv); err != nil {
			return Server{}, errs.Wrap(op, err)
		}
		srv.AuthorizationURL = ""
	}
	if in.Auth != nil {
		// Another auth may reach other tools: none is kept from before.
		srv.Auth, srv.Secret, srv.Tools, reconnect = a, "", nil, true
		if secret != "" {
			if srv.Secret, err = s.o.Vault.Seal(ctx, secretContext(srv.ID), []byte(secret)); err != nil {
				return Server{}, errs.Wrap(op, err)
			}
		}
	} else if reconnect && srv.Secret != "" {
		// A new URL keeps the key: it is sent to the new URL.
		plain, err := s.o.Vault.Open(ctx, secretContext(srv.ID), srv.Secret)
		if err != nil {
			return Server{}, errs.Wrap(op, err)
		}
		secret = string(plain)
	}
	if reconnect {
		if err := s.connect(ctx, op, &srv, secret); err != nil {
			return Server{}, err
		}
	}
	return s.save(ctx, op, srv, oldName)
}

func (s *Service) save(ctx context.Context, op string, srv Server, oldName string) (Server, error) {
	srv.Version++
	srv.UpdatedAt = s.o.Now().UTC()
	if err := s.o.Store.UpdateServer(ctx, srv, oldName); err != nil {
		return Server{}, errs.Wrap(op, err)
	}
	return srv, nil
}

// Refresh lists the server's tools again: NotFound, Forbidden, Conflict,
// INVALID_URL.
func (s *Service) Refresh(ctx context.Context, id string) (Server, error) {
	const op = "mcpserver.Refresh"
	srv, err := s.Get(ctx, id)
	if err != nil {
		return Server{}, errs.Wrap(op, err)
	}
	var secret string
	if srv.Secret != "" {
		plain, err := s.o.Vault.Open(ctx, secretContext(srv.ID), srv.Secret)
		if err != nil {
			return Server{}, errs.Wrap(op, err)
		}
		secret = string(plain)
	}
	if err := s.connect(ctx, op, &srv, secret); err != nil {
		return Server{}, err
	}
	saved, err := s.save(ctx, op, srv, srv.Name)
	if err == nil && saved.Auth.Type == AuthOAuth && saved.Status == StatusConnected && s.o.OnConnected != nil {
		if herr := s.o.OnConnected(context.WithoutCancel(ctx), saved.UserID, saved.ID); herr != nil {
			logging.FromContext(ctx).WarnContext(ctx, "continue the runs waiting for a server's authorization; the sweeper will", "serverId", saved.ID, "err", herr.Error())
		}
	}
	return saved, err
}

// Delete removes the server id of the signed-in user: NotFound, Forbidden.
func (s *Service) Delete(ctx context.Context, id string) error {
	if err := s.o.Store.DeleteServer(ctx, auth.UserID(ctx), id); err != nil {
		return errs.Wrap("mcpserver.Delete", err)
	}
	s.o.Audit.Record(ctx, auth.UserID(ctx), audit.MCPServerRemoved, map[string]any{"serverId": id})
	return nil
}
