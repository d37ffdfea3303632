package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/paging"
)

// MCPServers stores the users' remote MCP servers in the Data table. It
// implements mcpserver.Store.
//
//   - The server: PK USER#<uid>, SK MCPSERVER#<id> (ids are UUIDv7, so
//     the sort key orders a user's servers by creation), with its tool
//     list (JSON, the cache the chats and runs read) and its sealed
//     secret. A user's servers are one consistent Query of their
//     partition; every change is conditioned on the item's version.
//   - Its owner: PK MCPSERVER#<id>, SK OWNER (userId), so that another
//     user's server is told apart from a missing one (403, not 404).
//   - Its name: PK USER#<uid>, SK MCPNAME#<name> (serverId), the
//     uniqueness of a name per user.
//   - The user's count: PK USER#<uid>, SK COUNTER#MCPSERVERS, attribute n.
//
// Each write of more than one item is one transaction.
type MCPServers struct {
	db    *dynamo.DB
	table dynamo.Table
}

// NewMCPServers returns the MCPServers over the named Data table.
func NewMCPServers(db *dynamo.DB, dataTable string) *MCPServers {
	return &MCPServers{db: db, table: db.Table(dataTable)}
}

const (
	mcpServerPrefix  = "MCPSERVER#"
	mcpNamePrefix    = "MCPNAME#"
	mcpOwnerSK       = "OWNER"
	mcpServerCounter = "COUNTER#MCPSERVERS"
)

type mcpServerItem struct {
	PK, SK           string
	Type             string    `dynamo:"type"`
	ID               string    `dynamo:"id"`
	UserID           string    `dynamo:"userId"`
	Name             string    `dynamo:"name"`
	URL              string    `dynamo:"url"`
	Auth             string    `dynamo:"auth"` // JSON
	Enabled          bool      `dynamo:"enabled"`
	Status           string    `dynamo:"status"`
	Problem          string    `dynamo:"problem,omitempty"` // JSON
	AuthorizationURL string    `dynamo:"authorizationUrl,omitempty"`
	Tools            string    `dynamo:"tools"` // JSON
	Secret           string    `dynamo:"secret,omitempty"`
	Version          int       `dynamo:"version"`
	CreatedAt        time.Time `dynamo:"createdAt"`
	UpdatedAt        time.Time `dynamo:"updatedAt"`
	ToolsAt          time.Time `dynamo:"toolsAt"`
}

type mcpRefItem struct {
	PK, SK   string
	Type     string `dynamo:"type"`
	UserID   string `dynamo:"userId,omitempty"`
	ServerID string `dynamo:"serverId"`
}

func newMCPServerItem(s mcpserver.Server) (mcpServerItem, error) {
	a, err := json.Marshal(s.Auth)
	if err != nil {
		return mcpServerItem{}, err
	}
	tools := s.Tools
	if tools == nil {
		tools = []mcpserver.Tool{}
	}
	t, err := json.Marshal(tools)
	if err != nil {
		return mcpServerItem{}, fmt.Errorf("encode tools: %w", err)
	}
	it := mcpServerItem{PK: userKey(s.UserID), SK: mcpServerPrefix + s.ID, Type: "mcpServer", ID: s.ID, UserID: s.UserID, Name: s.Name,
		URL: s.URL, Auth: string(a), Enabled: s.Enabled, Status: s.Status, AuthorizationURL: s.AuthorizationURL, Tools: string(t),
		Secret: s.Secret, Version: s.Version, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, ToolsAt: s.ToolsAt}
	if s.Error != nil {
		p, _ := json.Marshal(s.Error)
		it.Problem = string(p)
	}
	return it, nil
}

func (it mcpServerItem) server() (mcpserver.Server, error) {
	s := mcpserver.Server{ID: it.ID, UserID: it.UserID, Name: it.Name, URL: it.URL, Enabled: it.Enabled, Status: it.Status,
		AuthorizationURL: it.AuthorizationURL, Secret: it.Secret, Version: it.Version, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		ToolsAt: it.ToolsAt}
	if err := decodeAttr(it.PK, it.SK, "auth", it.Auth, &s.Auth); err != nil {
		return mcpserver.Server{}, err
	}
	if err := decodeAttr(it.PK, it.SK, "tools", it.Tools, &s.Tools); err != nil {
		return mcpserver.Server{}, err
	}
	if it.Problem != "" {
		s.Error = &mcpserver.Problem{}
		if err := decodeAttr(it.PK, it.SK, "problem", it.Problem, s.Error); err != nil {
			return mcpserver.Server{}, err
		}
	}
	return s, nil
}

var (
	errMCPServerNotFound = errs.E("store.MCPServers", errs.NotFound, mcpserver.CodeNotFound, "MCP server not found")
	errMCPServerOther    = errs.E("store.MCPServers", errs.Forbidden, "FORBIDDEN", "you do not have access to this MCP server")
	errMCPNameTaken      = errs.E("store.MCPServers", errs.Conflict, mcpserver.CodeNameTaken, "you already have an MCP server with this name")
	errMCPServerLimit    = errs.E("store.MCPServers", errs.Conflict, mcpserver.CodeServerLimit,
		fmt.Sprintf("you have the most MCP servers a user may have (%d); delete one first", mcpserver.MaxServers))
	errMCPServerChanged = errs.E("store.MCPServers", errs.Conflict, "CONFLICT", "the MCP server changed meanwhile; read it again and retry")
	errMCPCursor        = func() *errs.Error {
		e := errs.E("store.MCPServers", errs.Invalid, "INVALID_PAGINATION", "cursor must be the nextCursor of an earlier page")
		e.Details = []errs.FieldError{{Field: "cursor", Message: "must be the nextCursor of an earlier page"}}
		return e
	}()
)

// CreateServer implements mcpserver.Store: the server, its owner and name
// items and the count + 1 in one transaction, conditioned on the name
// being free and the count below max.
func (s *MCPServers) CreateServer(ctx context.Context, srv mcpserver.Server, max int) error {
	const op = "store.CreateServer"
	it, err := newMCPServerItem(srv)
	if err != nil {
		return errs.Wrap(op, err)
	}
	uk := userKey(srv.UserID)
	err = s.db.WriteTx().
		Put(s.table.Put(mcpRefItem{PK: uk, SK: mcpNamePrefix + srv.Name, Type: "mcpServerName", ServerID: srv.ID}).If("attribute_not_exists(PK)")).
		Update(s.table.Update("PK", uk).Range("SK", mcpServerCounter).Add("n", 1).Set("type", "counter").
			If("attribute_not_exists(n) OR n < ?", max)).
		Put(s.table.Put(it).If("attribute_not_exists(PK)")).
		Put(s.table.Put(mcpRefItem{PK: mcpServerPrefix + srv.ID, SK: mcpOwnerSK, Type: "mcpServerOwner", UserID: srv.UserID, ServerID: srv.ID}).
			If("attribute_not_exists(PK)")).
		Run(ctx)
	switch {
	case failedCondition(err, 0):
		return errs.Wrap(op, errMCPNameTaken)
	case failedCondition(err, 1):
		return errs.Wrap(op, errMCPServerLimit)
	}
	return storeError(op, err)
}

// Server implements mcpserver.Store: one consistent GetItem, and one more
// of the owner item when the user has no such server.
func (s *MCPServers) Server(ctx context.Context, userID, id string) (mcpserver.Server, error) {
	const op = "store.MCPServer"
	var it mcpServerItem
	err := s.table.Get("PK", userKey(userID)).Range("SK", dynamo.Equal, mcpServerPrefix+id).Consistent(true).One(ctx, &it)
	switch {
	case errors.Is(err, dynamo.ErrNotFound):
		return mcpserver.Server{}, s.missing(ctx, op, userID, id)
	case err != nil:
		return mcpserver.Server{}, storeError(op, err)
	}
	srv, err := it.server()
	return srv, errs.Wrap(op, err)
}

// missing says why userID has no server id: Forbidden when it is
// another user's, else NotFound.
func (s *MCPServers) missing(ctx context.Context, op, userID, id string) error {
	var ref mcpRefItem
	err := s.table.Get("PK", mcpServerPrefix+id).Range("SK", dynamo.Equal, mcpOwnerSK).Consistent(true).One(ctx, &ref)
	switch {
	case errors.Is(err, dynamo.ErrNotFound):
		return errs.Wrap(op, errMCPServerNotFound)
	case err != nil:
		return storeError(op, err)
	case ref.UserID != userID:
		return errs.Wrap(op, errMCPServerOther)
	}
	return errs.Wrap(op, errMCPServerNotFound)
}

// ListServers implements mcpserver.Store: one consistent Query of the
// user's partition from the server after the cursor's.
func (s *MCPServers) ListServers(ctx context.Context, userID string, page paging.Cursor) ([]mcpserver.Server, string, error) {
	const op = "store.ListServers"
	limit := min(max(page.Limit, 1), paging.MaxLimit)
	uk := userKey(userID)
	q := s.table.Get("PK", uk).Range("SK", dynamo.BeginsWith, mcpServerPrefix).Consistent(true).SearchLimit(limit + 1)
	if page.After != "" {
		raw, err := base64.RawURLEncoding.DecodeString(page.After)
		if err != nil || uuid.Validate(string(raw)) != nil {
			return nil, "", errs.Wrap(op, errMCPCursor)
		}
		q = q.StartFrom(dynamo.PagingKey{
			"PK": &types.AttributeValueMemberS{Value: uk},
			"SK": &types.AttributeValueMemberS{Value: mcpServerPrefix + string(raw)},
		})
	}
	var items []mcpServerItem
	lek, err := q.AllWithLastEvaluatedKey(ctx, &items)
	if err != nil {
		return nil, "", storeError(op, err)
	}
	items, next := pageOf(items, limit, lek != nil, func(it mcpServerItem) string { return base64.RawURLEncoding.EncodeToString([]byte(it.ID)) })
	out := make([]mcpserver.Server, 0, len(items))
	for _, it := range items {
		srv, err := it.server()
		if err != nil {
			return nil, "", errs.Wrap(op, err)
		}
		out = append(out, srv)
	}
	return out, next, nil
}

// UpdateServer implements mcpserver.Store: a conditional put of the
// server, in one transaction with the move of its name item when the
// name changed.
func (s *MCPServers) UpdateServer(ctx context.Context, srv mcpserver.Server, oldName string) error {
	const op = "store.UpdateServer"
	it, err := newMCPServerItem(srv)
	if err != nil {
		return errs.Wrap(op, err)
	}
	put := s.table.Put(it).If("attribute_exists(PK) AND version = ?", srv.Version-1)
	if oldName == srv.Name {
		err := put.Run(ctx)
		if dynamo.IsCondCheckFailed(err) {
			return s.changed(ctx, op, srv)
		}
		return storeError(op, err)
	}
	uk := userKey(srv.UserID)
	err = s.db.WriteTx().
		Put(put).
		Put(s.table.Put(mcpRefItem{PK: uk, SK: mcpNamePrefix + srv.Name, Type: "mcpServerName", ServerID: srv.ID}).If("attribute_not_exists(PK)")).
		Delete(s.table.Delete("PK", uk).Range("SK", mcpNamePrefix+oldName).If("serverId = ?", srv.ID)).
		Run(ctx)
	switch {
	case failedCondition(err, 0):
		return s.changed(ctx, op, srv)
	case failedCondition(err, 1):
		return errs.Wrap(op, errMCPNameTaken)
	case failedCondition(err, 2):
		return errs.Wrap(op, errMCPServerChanged)
	}
	return storeError(op, err)
}

// changed says why a version-conditioned write of srv failed: it is gone
// (NotFound) or was changed meanwhile (Conflict).
func (s *MCPServers) changed(ctx context.Context, op string, srv mcpserver.Server) error {
	if _, err := s.Server(ctx, srv.UserID, srv.ID); err != nil {
		return errs.Wrap(op, err)
	}
	return errs.Wrap(op, errMCPServerChanged)
}

// DeleteServer implements mcpserver.Store: the server, its owner and name
// items, its OAuth grant (when any) and the count - 1 in one transaction, conditioned on the server
// being userID's.
func (s *MCPServers) DeleteServer(ctx context.Context, userID, id string) error {
	const op = "store.DeleteServer"
	srv, err := s.Server(ctx, userID, id)
	if err != nil {
		return errs.Wrap(op, err)
	}
	uk := userKey(userID)
	err = s.db.WriteTx().
		Delete(s.table.Delete("PK", uk).Range("SK", mcpServerPrefix+id).If("attribute_exists(PK) AND version = ?", srv.Version)).
		Delete(s.table.Delete("PK", uk).Range("SK", mcpNamePrefix+srv.Name).If("serverId = ?", id)).
		Delete(s.table.Delete("PK", mcpServerPrefix+id).Range("SK", mcpOwnerSK)).
		Update(s.table.Update("PK", uk).Range("SK", mcpServerCounter).Add("n", -1).If("n > ?", 0)).
		Delete(s.table.Delete("PK", uk).Range("SK", mcpOAuthPrefix+id)).
		Run(ctx)
	if failedCondition(err, 0) || failedCondition(err, 1) {
		// Renamed or deleted meanwhile: say which.
		if _, gerr := s.Server(ctx, userID, id); gerr != nil {
			return errs.Wrap(op, gerr)
		}
		return errs.Wrap(op, errMCPServerChanged)
	}
	return storeError(op, err)
}

// EnabledServers returns every enabled server of userID (at most
// MaxServers): what a chat or a run offers and calls, from the stored
// tool lists, with no remote call.
func (s *MCPServers) EnabledServers(ctx context.Context, userID string) ([]mcpserver.Server, error) {
	list, _, err := s.ListServers(ctx, userID, paging.Cursor{Limit: mcpserver.MaxServers})
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, srv := range list {
		if srv.Enabled {
			out = append(out, srv)
		}
	}
	return out, nil
}
