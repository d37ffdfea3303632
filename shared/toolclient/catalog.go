package toolclient

import (
	"context"
	"regexp"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
)

// Source is where a Catalog gets and runs the tools: the tool server's
// Client (an interface so that tests can hold a load back).
type Source interface {
	// ListTools returns every tool.
	ListTools(ctx context.Context) ([]ToolSummary, error)
	// SearchTools returns the tools matching query, best first.
	SearchTools(ctx context.Context, query string) ([]ToolSummary, error)
	// GetTool returns one tool; NotFound (TOOL_NOT_FOUND) when it does not
	// exist.
	GetTool(ctx context.Context, id string) (ToolDetail, error)
	// RunToolAs runs one tool on input for who (anonymous when
	// who.UserID is empty).
	RunToolAs(ctx context.Context, id string, input map[string]any, who Identity) (RunResult, error)
}

// toolIDPattern is the shape of a tool id; the catalog refuses others
// without asking the tool server.
// Compiled on first use, not in package init: init runs at every cold
// start of each function that links this package.
var toolIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`) })

// staleRetry bounds how long a stale copy is served without asking the
// tool server again after a failed reload, so that an outage does not make
// every request wait for the tool server to fail. It is capped by the TTL.
const staleRetry = 30 * time.Second

// Catalog is the tool catalog of a process: one in-memory cache of the
// tool server's list and of the tools fetched one by one, used by the REST
// tool endpoints (Routes), by chats offering tools to models (Specs, Run)
// and by workflow proposals (Details).
// Entries live for ttl. A failed reload serves the previous copy (stale)
// with a logged warning; concurrent reloads of the same entry are
// coalesced into one call. Only successful answers are cached, so the
// cache never holds more than the catalog.
type Catalog struct {
	src   Source
	ttl   time.Duration
	now   func() time.Time
	group singleflight.Group

	mu      sync.Mutex
	list    *entryOf[[]ToolSummary]
	details map[string]*entryOf[ToolDetail]
	gen     uint64 // bumped by a forced reload; older detail loads are not stored
}

// entryOf is one cached value and the time it must be reloaded.
type entryOf[T any] struct {
	value   T
	expires time.Time
}

// NewCatalog returns a catalog of src whose entries live for ttl (0: every
// read reloads); now is its clock (nil: time.Now).
func NewCatalog(src Source, ttl time.Duration, now func() time.Time) *Catalog {
	if now == nil {
		now = time.Now
	}
	if ttl < 0 {
		ttl = 0
	}
	return &Catalog{src: src, ttl: ttl, now: now, details: map[string]*entryOf[ToolDetail]{}}
}

// unavailable is the error of a failed load with nothing cached.
func unavailable(op string, err error) error {
	return &errs.Error{Op: op, Kind: errs.Internal, Code: CodeToolsUnavailable,
		Message: "the tool catalog is unavailable; try again later", Err: err}
}

// List returns the catalog: the cached copy while it is fresh, otherwise a
// reload (force reloads even a fresh copy). When the reload fails, the
// previous copy is served if there is one; otherwise the error is
// TOOLS_UNAVAILABLE (Internal, 500).
func (c *Catalog) List(ctx context.Context, force bool) ([]ToolSummary, error) {
	const op = "toolclient.Catalog.List"
	c.mu.Lock()
	if e := c.list; e != nil && !force && c.now().Before(e.expires) {
		c.mu.Unlock()
		return e.value, nil
	}
	if force {
		// A forced reload refreshes the tools fetched one by one too.
		clear(c.details)
		c.gen++
	}
	c.mu.Unlock()

	v, err, _ := c.group.Do("list", func() (any, error) {
		// Detached from the caller: the reload is shared by every waiting
		// request, so one client going away must not fail the others. The
		// client's own timeout bounds it.
		tools, err := c.src.ListTools(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		if tools == nil {
			tools = []ToolSummary{}
		}
		c.mu.Lock()
		c.list = &entryOf[[]ToolSummary]{value: tools, expires: c.now().Add(c.ttl)}
		c.mu.Unlock()
		return tools, nil
	})
	if err == nil {
		return v.([]ToolSummary), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.list; e != nil {
		c.backOff(&e.expires)
		logging.FromContext(ctx).WarnContext(ctx, "tool catalog reload failed; serving the cached copy",
			"err", err.Error(), "retryAt", e.expires)
		return e.value, nil
	}
	return nil, unavailable(op, err)
}

// backOff sets expires so that a stale copy is served for a little while
// (staleRetry, at most the TTL) before the tool server is asked again.
// Callers hold c.mu.
func (c *Catalog) backOff(expires *time.Time) {
	*expires = c.now().Add(min(c.ttl, staleRetry))
}

// Get returns one tool, cached like the list. NotFound (TOOL_NOT_FOUND)
// for an id that is malformed or that the tool server does not know;
// a failure of the tool server serves the previous copy of the tool if
// there is one, else TOOLS_UNAVAILABLE.
func (c *Catalog) Get(ctx context.Context, id string) (ToolDetail, error) {
	const op = "toolclient.Catalog.Get"
	if !toolIDPattern().MatchString(id) {
		return ToolDetail{}, errs.NotFoundf(op, CodeToolNotFound, "tool %q not found", id)
	}
	c.mu.Lock()
	if e := c.details[id]; e != nil && c.now().Before(e.expires) {
		c.mu.Unlock()
		return e.value, nil
	}
	gen := c.gen
	c.mu.Unlock()

	v, err, _ := c.group.Do("get:"+id, func() (any, error) {
		d, err := c.src.GetTool(context.WithoutCancel(ctx), id)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.gen == gen {
			c.details[id] = &entryOf[ToolDetail]{value: d, expires: c.now().Add(c.ttl)}
		}
		c.mu.Unlock()
		return d, nil
	})
	if err == nil {
		return v.(ToolDetail), nil
	}
	if errs.Is(err, errs.NotFound) {
		c.mu.Lock()
		delete(c.details, id)
		c.mu.Unlock()
		return ToolDetail{}, errs.NotFoundf(op, CodeToolNotFound, "tool %q not found", id).WithCause(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.details[id]; e != nil {
		c.backOff(&e.expires)
		logging.FromContext(ctx).WarnContext(ctx, "tool reload failed; serving the cached copy",
			"toolId", id, "err", err.Error(), "retryAt", e.expires)
		return e.value, nil
	}
	return ToolDetail{}, unavailable(op, err)
}

// Search asks the catalog's source, which ranks the matches (the tool
// server's searchTools); it is not cached. Its items have the list's
// shape. A failure is TOOLS_UNAVAILABLE.
func (c *Catalog) Search(ctx context.Context, query string) ([]ToolSummary, error) {
	const op = "toolclient.Catalog.Search"
	tools, err := c.src.SearchTools(ctx, query)
	if err != nil {
		return nil, unavailable(op, err)
	}
	if tools == nil {
		tools = []ToolSummary{}
	}
	return tools, nil
}
