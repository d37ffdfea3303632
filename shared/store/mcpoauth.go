package store

import (
	"context"
	"errors"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcpserver"
)

// The OAuth client side of the users' remote servers, in the Data table
// (MCPServers implements mcpserver.OAuthStore):
//
//   - The grant: PK USER#<uid>, SK MCPOAUTH#<serverId>: the authorization
//     server, the service's client there (registered once and kept) and
//     the sealed tokens; every write is conditioned on its version, which
//     is how one refresh at a time runs per server. DeleteServer removes
//     it with the server.
//   - A flow in progress: PK MCPOAUTHSTATE#<sha256 of the state>, SK
//     STATE, with the user, the server, the sealed PKCE verifier and
//     expiresAt (the table's TTL); taken by one conditional delete, so a
//     state is redeemed once.
const (
	mcpOAuthPrefix      = "MCPOAUTH#"
	mcpOAuthStatePrefix = "MCPOAUTHSTATE#"
	mcpOAuthStateSK     = "STATE"
)

type mcpGrantItem struct {
	PK, SK                string
	Type                  string    `dynamo:"type"`
	UserID                string    `dynamo:"userId"`
	ServerID              string    `dynamo:"serverId"`
	Issuer                string    `dynamo:"issuer"`
	AuthorizationEndpoint string    `dynamo:"authorizationEndpoint"`
	TokenEndpoint         string    `dynamo:"tokenEndpoint"`
	Resource              string    `dynamo:"resource"`
	ClientID              string    `dynamo:"clientId"`
	ClientSecret          string    `dynamo:"clientSecret,omitempty"`
	AuthMethod            string    `dynamo:"authMethod,omitempty"`
	Registered            bool      `dynamo:"registered"`
	Tokens                string    `dynamo:"tokens,omitempty"`
	TokenExpiresAt        time.Time `dynamo:"tokenExpiresAt"`
	RefreshingUntil       time.Time `dynamo:"refreshingUntil"`
	Version               int       `dynamo:"version"`
	UpdatedAt             time.Time `dynamo:"updatedAt"`
}

type mcpStateItem struct {
	PK, SK      string
	Type        string    `dynamo:"type"`
	UserID      string    `dynamo:"userId"`
	ServerID    string    `dynamo:"serverId"`
	Verifier    string    `dynamo:"verifier"`
	RedirectURI string    `dynamo:"redirectUri"`
	ReturnTo    string    `dynamo:"returnTo,omitempty"`
	Issuer      string    `dynamo:"issuer"`
	IssRequired bool      `dynamo:"issRequired"`
	Expires     time.Time `dynamo:"expires"`
	ExpiresAt   int64     `dynamo:"expiresAt"`
}

var (
	errMCPGrantNotFound = errs.E("store.MCPOAuth", errs.NotFound, "OAUTH_GRANT_NOT_FOUND", "the MCP server has no OAuth grant")
	errMCPGrantChanged  = errs.E("store.MCPOAuth", errs.Conflict, "CONFLICT", "the MCP server's OAuth grant changed meanwhile")
	errMCPStateNotFound = errs.E("store.MCPOAuth", errs.NotFound, "OAUTH_STATE_NOT_FOUND", "the authorization is unknown, expired or already used")
)

// Grant implements mcpserver.OAuthStore: one consistent GetItem.
func (s *MCPServers) Grant(ctx context.Context, userID, serverID string) (mcpserver.OAuthGrant, error) {
	const op = "store.MCPGrant"
	var it mcpGrantItem
	err := s.table.Get("PK", userKey(userID)).Range("SK", dynamo.Equal, mcpOAuthPrefix+serverID).Consistent(true).One(ctx, &it)
	switch {
	case errors.Is(err, dynamo.ErrNotFound):
		return mcpserver.OAuthGrant{}, errs.Wrap(op, errMCPGrantNotFound)
	case err != nil:
		return mcpserver.OAuthGrant{}, storeError(op, err)
	}
	return mcpserver.OAuthGrant{UserID: it.UserID, ServerID: it.ServerID, Issuer: it.Issuer, AuthorizationEndpoint: it.AuthorizationEndpoint,
		TokenEndpoint: it.TokenEndpoint, Resource: it.Resource, ClientID: it.ClientID, ClientSecret: it.ClientSecret, AuthMethod: it.AuthMethod,
		Registered: it.Registered, Tokens: it.Tokens, ExpiresAt: it.TokenExpiresAt, RefreshingUntil: it.RefreshingUntil,
		Version: it.Version, UpdatedAt: it.UpdatedAt}, nil
}

// PutGrant implements mcpserver.OAuthStore: one PutItem conditioned on
// the version (on no grant at version 1). A grant written just after its
// server was deleted stays in the user's partition, which the account's
// erasure removes.
func (s *MCPServers) PutGrant(ctx context.Context, g mcpserver.OAuthGrant) error {
	const op = "store.PutMCPGrant"
	it := mcpGrantItem{PK: userKey(g.UserID), SK: mcpOAuthPrefix + g.ServerID, Type: "mcpOAuthGrant", UserID: g.UserID, ServerID: g.ServerID,
		Issuer: g.Issuer, AuthorizationEndpoint: g.AuthorizationEndpoint, TokenEndpoint: g.TokenEndpoint, Resource: g.Resource,
		ClientID: g.ClientID, ClientSecret: g.ClientSecret, AuthMethod: g.AuthMethod, Registered: g.Registered, Tokens: g.Tokens,
		TokenExpiresAt: g.ExpiresAt, RefreshingUntil: g.RefreshingUntil, Version: g.Version, UpdatedAt: g.UpdatedAt}
	put := s.table.Put(it)
	if g.Version <= 1 {
		put = put.If("attribute_not_exists(PK)")
	} else {
		put = put.If("version = ?", g.Version-1)
	}
	err := put.Run(ctx)
	if dynamo.IsCondCheckFailed(err) {
		return errs.Wrap(op, errMCPGrantChanged)
	}
	return storeError(op, err)
}

// PutState implements mcpserver.OAuthStore: one PutItem of a new item.
func (s *MCPServers) PutState(ctx context.Context, st mcpserver.OAuthState) error {
	const op = "store.PutMCPState"
	it := mcpStateItem{PK: mcpOAuthStatePrefix + st.Hash, SK: mcpOAuthStateSK, Type: "mcpOAuthState", UserID: st.UserID, ServerID: st.ServerID,
		Verifier: st.Verifier, RedirectURI: st.RedirectURI, ReturnTo: st.ReturnTo, Issuer: st.Issuer, IssRequired: st.IssRequired,
		Expires: st.ExpiresAt, ExpiresAt: st.ExpiresAt.Unix()}
	err := s.table.Put(it).If("attribute_not_exists(PK)").Run(ctx)
	if dynamo.IsCondCheckFailed(err) {
		return errs.Wrap(op, errMCPGrantChanged)
	}
	return storeError(op, err)
}

// State implements mcpserver.OAuthStore: one consistent GetItem.
func (s *MCPServers) State(ctx context.Context, hash string, now time.Time) (mcpserver.OAuthState, error) {
	const op = "store.MCPState"
	var it mcpStateItem
	err := s.table.Get("PK", mcpOAuthStatePrefix+hash).Range("SK", dynamo.Equal, mcpOAuthStateSK).Consistent(true).One(ctx, &it)
	switch {
	case errors.Is(err, dynamo.ErrNotFound):
		return mcpserver.OAuthState{}, errs.Wrap(op, errMCPStateNotFound)
	case err != nil:
		return mcpserver.OAuthState{}, storeError(op, err)
	}
	return stateOf(hash, it, now, op)
}

// TakeState implements mcpserver.OAuthStore: one DeleteItem conditioned
// on the item existing, returning it (ReturnValues ALL_OLD): of two
// callbacks with one state, one gets it.
func (s *MCPServers) TakeState(ctx context.Context, hash string, now time.Time) (mcpserver.OAuthState, error) {
	const op = "store.TakeMCPState"
	var it mcpStateItem
	err := s.table.Delete("PK", mcpOAuthStatePrefix+hash).Range("SK", mcpOAuthStateSK).If("attribute_exists(PK)").OldValue(ctx, &it)
	switch {
	case dynamo.IsCondCheckFailed(err) || errors.Is(err, dynamo.ErrNotFound):
		return mcpserver.OAuthState{}, errs.Wrap(op, errMCPStateNotFound)
	case err != nil:
		return mcpserver.OAuthState{}, storeError(op, err)
	}
	return stateOf(hash, it, now, op)
}

// stateOf returns the state of it, NotFound once it has expired (the
// table's TTL removes it later).
func stateOf(hash string, it mcpStateItem, now time.Time, op string) (mcpserver.OAuthState, error) {
	if !now.Before(it.Expires) {
		return mcpserver.OAuthState{}, errs.Wrap(op, errMCPStateNotFound)
	}
	return mcpserver.OAuthState{Hash: hash, UserID: it.UserID, ServerID: it.ServerID, Verifier: it.Verifier, RedirectURI: it.RedirectURI,
		ReturnTo: it.ReturnTo, Issuer: it.Issuer, IssRequired: it.IssRequired, ExpiresAt: it.Expires}, nil
}
