package workflow

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/toolserver"
)

// ToolInfo is what workflow editing needs to know of a tool: its schemas
// and the names of its outputs (the property names of OutputSchema).
type ToolInfo struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Outputs      []string        `json:"outputs"`
}

// ToolCatalog is the tool catalog proposals are validated against.
type ToolCatalog interface {
	// Tools returns every tool with its schemas and outputs.
	Tools(ctx context.Context) ([]ToolInfo, error)
}

// ToolserverCatalog is a ToolCatalog over the tool server (listTools, then
// getTool for each tool's output schema), cached for a TTL so that a
// workflow request does not cost tool server round trips. When a reload
// fails, the previous copy is served.
type ToolserverCatalog struct {
	client *toolserver.Client
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	tools   []ToolInfo
	expires time.Time
}

// NewToolserverCatalog returns a catalog over c cached for ttl.
func NewToolserverCatalog(c *toolserver.Client, ttl time.Duration) *ToolserverCatalog {
	return &ToolserverCatalog{client: c, ttl: ttl, now: time.Now}
}

// Tools implements ToolCatalog.
func (c *ToolserverCatalog) Tools(ctx context.Context) ([]ToolInfo, error) {
	const op = "workflow.ToolserverCatalog"
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tools != nil && c.now().Before(c.expires) {
		return c.tools, nil
	}
	list, err := c.client.ListTools(ctx)
	if err != nil {
		if c.tools != nil {
			return c.tools, nil
		}
		return nil, errs.Wrap(op, err)
	}
	out := make([]ToolInfo, len(list))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, s := range list {
		g.Go(func() error {
			d, err := c.client.GetTool(gctx, s.ID)
			if err != nil {
				return err
			}
			out[i] = ToolInfo{ID: d.ID, Name: d.Name, Description: d.Description, InputSchema: d.InputSchema,
				OutputSchema: d.OutputSchema, Outputs: d.Outputs}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if c.tools != nil {
			return c.tools, nil
		}
		return nil, errs.Wrap(op, err)
	}
	c.tools, c.expires = out, c.now().Add(c.ttl)
	return out, nil
}
