// Package usertools is a user's whole tool catalog: the tool server's
// built-in tools and the tools of the user's own remote MCP servers
// (package mcpserver), whose ids are mcp/<server>/<tool>. One Catalog
// stands where the built-in catalog stood, for every consumer:
//
//   - the tool gate runs tools through it (Get, RunAs): a remote tool is
//     called on its server for the call's user, bounded by
//     mcpserver.CallTimeout, its result bounded as any tool result;
//   - the users' tool policies read the annotations of its Details: a
//     remote tool marked readOnlyHint is allowed by default, every other
//     one asks;
//   - chats offer its Specs to models (the remote tools of the enabled,
//     connected servers, at most MaxOffered);
//   - workflow edits and proposals validate step toolIds against its
//     Details (an unknown remote tool is refused as any unknown tool);
//   - GET /api/tools lists it (List), the remote tools in category mcp.
//
// The user is the one the context acts for (auth.UserID), except in
// RunAs, which takes the call's identity. A user's servers are read from
// the store (their tool lists as last listed: no remote call) and kept in
// memory for a short TTL, so that a chat message, whose reply reads them
// several times, does not read them more than once (the functions that
// check workflow edits keep no copy).
package usertools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/toolclient"
)

// Category is the catalog category of remote tools.
const Category = "mcp"

// MaxOffered bounds the remote tools a chat offers a model.
const MaxOffered = 128

// DefaultTTL is how long a user's servers are kept in memory.
const DefaultTTL = 5 * time.Second

// maxUsers bounds the users whose servers are kept in memory, and
// maxCachedBytes the size of their tool lists together (a user's 20
// servers may hold 3.8 MiB of tool lists, so a count of users alone would
// let a process keep gigabytes).
const (
	maxUsers       = 4096
	maxCachedBytes = 32 << 20
)

// Builtin is the tool server's catalog (toolclient.Catalog).
type Builtin interface {
	List(ctx context.Context, force bool) ([]toolclient.ToolSummary, error)
	Search(ctx context.Context, query string) ([]toolclient.ToolSummary, error)
	Get(ctx context.Context, id string) (toolclient.ToolDetail, error)
	Details(ctx context.Context) ([]toolclient.ToolDetail, error)
	Specs(ctx context.Context) ([]model.ToolSpec, error)
	RunAs(ctx context.Context, id string, input map[string]any, who toolclient.Identity) (toolclient.RunResult, error)
}

// Servers are the users' remote servers with their stored tool lists
// (mcpserver.Service, or StoreServers where no call is made).
type Servers interface {
	// Servers returns every server of userID with its stored tool list.
	Servers(ctx context.Context, userID string) ([]mcpserver.Server, error)
}

// Caller calls a tool of a server (mcpserver.Service).
type Caller interface {
	CallTool(ctx context.Context, srv mcpserver.Server, tool string, args map[string]any) (map[string]any, error)
}

// StoreServers reads the servers straight from their store, for the
// functions that list remote tools and never call them.
type StoreServers struct {
	Store interface {
		ListServers(ctx context.Context, userID string, page paging.Cursor) ([]mcpserver.Server, string, error)
	}
}

// Servers implements Servers: one page of at most mcpserver.MaxServers.
func (s StoreServers) Servers(ctx context.Context, userID string) ([]mcpserver.Server, error) {
	list, _, err := s.Store.ListServers(ctx, userID, paging.Cursor{Limit: mcpserver.MaxServers})
	return list, err
}

// Options configure New. Caller nil refuses every remote call
// (Unavailable). TTL 0 means DefaultTTL, negative keeps nothing; Now nil
// means time.Now.
type Options struct {
	Builtin Builtin
	Servers Servers
	Caller  Caller
	TTL     time.Duration
	Now     func() time.Time
}

// Catalog is the built-in catalog plus each user's remote tools. It is
// safe for concurrent use.
type Catalog struct {
	o     Options
	group singleflight.Group
	mu    sync.Mutex
	users map[string]cached
	bytes int // the listSize of users' lists together
}

type cached struct {
	servers []mcpserver.Server
	expires time.Time
	size    int
}

// listSize is about what list holds in memory: its tools' names,
// descriptions, schemas and titles, and a little for each server.
func listSize(list []mcpserver.Server) int {
	n := 0
	for _, srv := range list {
		n += 512 + len(srv.Name) + len(srv.URL)
		for _, t := range srv.Tools {
			n += 64 + len(t.Name) + len(t.Description) + len(t.InputSchema)
			if t.Annotations != nil {
				n += len(t.Annotations.Title)
			}
		}
	}
	return n
}

// New returns the Catalog of o.
func New(o Options) *Catalog {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	return &Catalog{o: o, users: map[string]cached{}}
}

// remote returns userID's servers: the memory's copy while fresh, else
// one read of the store shared by the concurrent callers.
func (c *Catalog) remote(ctx context.Context, userID string) ([]mcpserver.Server, error) {
	return c.read(ctx, userID, false)
}

// read is remote; fresh skips the memory's copy (and replaces it).
func (c *Catalog) read(ctx context.Context, userID string, fresh bool) ([]mcpserver.Server, error) {
	if c.o.Servers == nil || userID == "" {
		return nil, nil
	}
	now := c.o.Now()
	c.mu.Lock()
	if e, ok := c.users[userID]; ok && now.Before(e.expires) && !fresh {
		c.mu.Unlock()
		return e.servers, nil
	}
	c.mu.Unlock()
	v, err, _ := c.group.Do(userID, func() (any, error) {
		list, err := c.o.Servers.Servers(context.WithoutCancel(ctx), userID)
		if err != nil {
			return nil, err
		}
		list = usable(list)
		if c.o.TTL > 0 {
			c.keep(userID, list)
		}
		return list, nil
	})
	if err != nil {
		return nil, errs.Wrap("usertools.remote", err)
	}
	return v.([]mcpserver.Server), nil
}

// usable drops from list's tools those a listing drops now and did not
// always (a duplicate name, an input schema that is not a compilable
// object schema), so that a list stored earlier neither breaks every chat
// that offers it nor the checks of the steps that use it. It copies only
// a server whose tools change.
func usable(list []mcpserver.Server) []mcpserver.Server {
	var out []mcpserver.Server
	for i, s := range list {
		tools := mcpserver.UsableTools(s.Tools)
		if len(tools) == len(s.Tools) {
			continue
		}
		if out == nil {
			out = slices.Clone(list)
		}
		out[i].Tools = tools
	}
	if out == nil {
		return list
	}
	return out
}

// keep puts userID's list in memory. When the users or their lists'
// bytes would pass their bounds, what is kept is dropped first (bounded
// memory: the next reads fill it again); a list over the bytes' bound
// alone is not kept.
func (c *Catalog) keep(userID string, list []mcpserver.Server) {
	size := listSize(list)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.users[userID]; ok {
		c.bytes -= old.size
		delete(c.users, userID)
	}
	if size > maxCachedBytes {
		return
	}
	if len(c.users) >= maxUsers || c.bytes+size > maxCachedBytes {
		clear(c.users)
		c.bytes = 0
	}
	c.users[userID] = cached{servers: list, expires: c.o.Now().Add(c.o.TTL), size: size}
	c.bytes += size
}

// Forget drops what is kept of userID's servers (after a change made in
// this process).
func (c *Catalog) Forget(userID string) {
	c.mu.Lock()
	c.bytes -= c.users[userID].size
	delete(c.users, userID)
	c.mu.Unlock()
}

// IsRemote reports whether id names a remote tool (mcp/<server>/<tool>).
func IsRemote(id string) bool {
	_, _, ok := mcpserver.ParseToolID(id)
	return ok
}

// find returns the server and the tool of id among servers.
func find(servers []mcpserver.Server, id string) (mcpserver.Server, mcpserver.Tool, bool) {
	name, tool, ok := mcpserver.ParseToolID(id)
	if !ok {
		return mcpserver.Server{}, mcpserver.Tool{}, false
	}
	for _, s := range servers {
		if s.Name != name {
			continue
		}
		for _, t := range s.Tools {
			if t.Name == tool {
				return s, t, true
			}
		}
	}
	return mcpserver.Server{}, mcpserver.Tool{}, false
}

func notFound(op, id string) error {
	return errs.NotFoundf(op, toolclient.CodeToolNotFound, "tool %q not found", id)
}

// detail is what the catalog says of tool t of server srv. Its
// annotations make the policies' default allow a read-only remote tool
// and ask for any other (a remote tool's open-world hint is not read).
func detail(srv mcpserver.Server, t mcpserver.Tool) toolclient.ToolDetail {
	d := toolclient.ToolDetail{ID: mcpserver.ToolID(srv.Name, t.Name), Name: t.Name, Description: t.Description,
		Category: Category, InputSchema: t.InputSchema, OutputSchema: outputSchema, Outputs: outputs}
	if a := t.Annotations; a != nil {
		d.Annotations = toolclient.Annotations{ReadOnlyHint: a.ReadOnlyHint, IdempotentHint: a.IdempotentHint,
			DestructiveHint: a.DestructiveHint == nil || *a.DestructiveHint}
		if a.Title != "" && d.Description == "" {
			d.Description = a.Title
		}
	} else {
		d.Annotations.DestructiveHint = true
	}
	return d
}

// outputSchema and outputs are a remote tool's result as RunAs gives it.
var (
	outputSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"content":{"type":"array"},"structuredContent":{}}}`)
	outputs      = []string{"text", "content", "structuredContent"}
)

// List returns the built-in tools and the signed-in user's remote tools
// (every server's, category mcp). The built-in list's errors.
func (c *Catalog) List(ctx context.Context, force bool) ([]toolclient.ToolSummary, error) {
	const op = "usertools.List"
	list, err := c.o.Builtin.List(ctx, force)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	if force {
		c.Forget(auth.UserID(ctx))
	}
	servers, err := c.remote(ctx, auth.UserID(ctx))
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	if len(servers) == 0 {
		return list, nil
	}
	out := append(make([]toolclient.ToolSummary, 0, len(list)+len(servers)*4), list...)
	for _, s := range servers {
		for _, t := range s.Tools {
			d := detail(s, t)
			out = append(out, toolclient.ToolSummary{ID: d.ID, Name: d.Name, Description: d.Description, Category: Category, InputSchema: d.InputSchema})
		}
	}
	return out, nil
}

// Search returns the built-in tools the tool server ranks for query,
// then the signed-in user's remote tools whose id, name or description
// holds every word of query (case folded), in their list's order. The
// built-in search's errors, and the store's.
func (c *Catalog) Search(ctx context.Context, query string) ([]toolclient.ToolSummary, error) {
	const op = "usertools.Search"
	out, err := c.o.Builtin.Search(ctx, query)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	servers, err := c.remote(ctx, auth.UserID(ctx))
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	words := strings.Fields(strings.ToLower(query))
	for _, s := range servers {
		for _, t := range s.Tools {
			d := detail(s, t)
			text := strings.ToLower(d.ID + " " + d.Name + " " + d.Description)
			if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(text, w) }) {
				out = append(out, toolclient.ToolSummary{ID: d.ID, Name: d.Name, Description: d.Description, Category: Category, InputSchema: d.InputSchema})
			}
		}
	}
	return out, nil
}

// Details returns every built-in tool and the signed-in user's remote
// tools, those of disabled servers included (a workflow naming one stays
// valid; its step fails while the server is disabled). The functions
// that check workflow edits keep no copy (Options.TTL negative), so what
// an edit is checked against is what is stored.
func (c *Catalog) Details(ctx context.Context) ([]toolclient.ToolDetail, error) {
	const op = "usertools.Details"
	list, err := c.o.Builtin.Details(ctx)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	servers, err := c.remote(ctx, auth.UserID(ctx))
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	if len(servers) == 0 {
		return list, nil
	}
	out := append(make([]toolclient.ToolDetail, 0, len(list)+len(servers)*4), list...)
	for _, s := range servers {
		for _, t := range s.Tools {
			out = append(out, detail(s, t))
		}
	}
	return out, nil
}

// Get returns one tool: a remote one of the signed-in user's servers
// (NotFound TOOL_NOT_FOUND when none has it), else the built-in
// catalog's.
func (c *Catalog) Get(ctx context.Context, id string) (toolclient.ToolDetail, error) {
	const op = "usertools.Get"
	if !IsRemote(id) {
		return c.o.Builtin.Get(ctx, id)
	}
	servers, err := c.remote(ctx, auth.UserID(ctx))
	if err != nil {
		return toolclient.ToolDetail{}, errs.Wrap(op, err)
	}
	s, t, ok := find(servers, id)
	if !ok {
		// Maybe added a moment ago: the store says.
		if servers, err = c.read(ctx, auth.UserID(ctx), true); err != nil {
			return toolclient.ToolDetail{}, errs.Wrap(op, err)
		}
		if s, t, ok = find(servers, id); !ok {
			return toolclient.ToolDetail{}, notFound(op, id)
		}
	}
	return detail(s, t), nil
}

// ComputeOnly reports whether tool id only computes from its input: a
// built-in tool that declares itself read-only and idempotent and does not
// reach an open world. A remote tool never does (its server is reached
// over the network, whatever its hints say), nor a tool that cannot be
// read now.
func (c *Catalog) ComputeOnly(ctx context.Context, id string) bool {
	if IsRemote(id) {
		return false
	}
	t, err := c.o.Builtin.Get(ctx, id)
	return err == nil && t.Annotations.ComputeOnly()
}

// Specs returns the tools a chat offers a model: the built-in ones, then
// the tools of the signed-in user's enabled and connected servers, at most
// MaxOffered of them. When one of the two cannot be read the other is
// still offered; the error is the built-in catalog's when both fail.
func (c *Catalog) Specs(ctx context.Context) ([]model.ToolSpec, error) {
	specs, berr := c.o.Builtin.Specs(ctx)
	servers, rerr := c.remote(ctx, auth.UserID(ctx))
	if berr != nil && rerr != nil {
		return nil, errs.Wrap("usertools.Specs", berr)
	}
	return append(specs, Offered(servers, onlyFrom(ctx))...), nil
}

// MaxOnly bounds the remote tool ids a chat message narrows its offer to
// (its toolIds).
const MaxOnly = MaxOffered

type onlyKey struct{}

// WithOnly returns ctx under which Specs offers, of the remote tools,
// only those of ids (a chat message's toolIds); nil ids leave ctx as it
// is (every one offered), an empty list offers none. Built-in tools are
// offered as always.
func WithOnly(ctx context.Context, ids []string) context.Context {
	if ids == nil {
		return ctx
	}
	only := make(map[string]bool, len(ids))
	for _, id := range ids {
		only[id] = true
	}
	return context.WithValue(ctx, onlyKey{}, only)
}

// onlyFrom is the narrowing WithOnly put in ctx, nil when none.
func onlyFrom(ctx context.Context) map[string]bool {
	only, _ := ctx.Value(onlyKey{}).(map[string]bool)
	return only
}

// Offered returns the specs of the remote tools of servers a chat offers
// (enabled and connected servers' tools, at most MaxOffered), narrowed to
// the ids in only when only is not nil.
func Offered(servers []mcpserver.Server, only map[string]bool) []model.ToolSpec {
	var out []model.ToolSpec
	for _, s := range servers {
		if !s.Enabled || s.Status != mcpserver.StatusConnected {
			continue
		}
		for _, t := range s.Tools {
			id := mcpserver.ToolID(s.Name, t.Name)
			if only != nil && !only[id] {
				continue
			}
			if len(out) == MaxOffered {
				return out
			}
			desc := t.Description
			if desc == "" && t.Annotations != nil {
				desc = t.Annotations.Title
			}
			out = append(out, model.ToolSpec{Name: id, Description: desc, InputSchema: t.InputSchema})
		}
	}
	return out
}

// RunAs runs tool id for who: a remote tool on its server (the server
// read again from the store, so that a key or a URL changed a moment ago
// is the one used), else the built-in catalog's. A remote tool's errors
// are NotFound TOOL_NOT_FOUND and mcpserver.Service.CallTool's, their
// messages led by their codes (ledByCode).
func (c *Catalog) RunAs(ctx context.Context, id string, input map[string]any, who toolclient.Identity) (toolclient.RunResult, error) {
	const op = "usertools.RunAs"
	if !IsRemote(id) {
		return c.o.Builtin.RunAs(ctx, id, input, who)
	}
	if c.o.Servers == nil || who.UserID == "" {
		return toolclient.RunResult{}, notFound(op, id)
	}
	if c.o.Caller == nil {
		return toolclient.RunResult{}, errs.E(op, errs.Unavailable, toolclient.CodeToolsUnavailable, "remote tools cannot be called here")
	}
	servers, err := c.o.Servers.Servers(ctx, who.UserID)
	if err != nil {
		return toolclient.RunResult{}, errs.Wrap(op, err)
	}
	s, t, ok := find(servers, id)
	if !ok {
		return toolclient.RunResult{}, notFound(op, id)
	}
	start := c.o.Now()
	out, err := c.o.Caller.CallTool(ctx, s, t.Name, input)
	if err != nil {
		return toolclient.RunResult{}, ledByCode(op, err)
	}
	return toolclient.RunResult{Result: out, ExecutionTime: c.o.Now().Sub(start).Milliseconds()}, nil
}

// ledByCode returns err wrapped with op, its message led by its code
// ("SERVER_UNREACHABLE: the server could not be reached"), its kind, code
// and cause kept. A step's error and a model's tool result carry a tool
// error's message alone, and the code is what tells a remote tool's own
// failure from a server that is disabled, slow or out of reach. An error
// with no code of its own or no message, or whose message already starts
// with its code, is only wrapped.
func ledByCode(op string, err error) error {
	var e *errs.Error
	if !errors.As(err, &e) || e.Code == "" || e.Message == "" || strings.HasPrefix(e.Message, e.Code+":") {
		return errs.Wrap(op, err)
	}
	return errs.E(op, e.Kind, e.Code, e.Code+": "+e.Message).WithCause(err)
}
