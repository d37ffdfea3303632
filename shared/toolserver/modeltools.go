package toolserver

import (
	"context"
	"sync"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
)

// ModelTools offers the tool server's catalog to models and runs their
// calls through the client: it satisfies chat.Tools. The catalog is cached
// for ttl, so a chat message does not cost a tool server round trip.
type ModelTools struct {
	client *Client
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	specs   []model.ToolSpec
	expires time.Time
}

// NewModelTools returns ModelTools over c with a catalog cache lifetime of
// ttl; now nil means time.Now.
func NewModelTools(c *Client, ttl time.Duration, now func() time.Time) *ModelTools {
	if now == nil {
		now = time.Now
	}
	return &ModelTools{client: c, ttl: ttl, now: now}
}

// Specs returns the tools as model tool specs. When the tool server cannot
// be reached it returns a cached copy if any, else its error.
func (m *ModelTools) Specs(ctx context.Context) ([]model.ToolSpec, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.specs != nil && m.now().Before(m.expires) {
		return m.specs, nil
	}
	list, err := m.client.ListTools(ctx)
	if err != nil {
		if m.specs != nil {
			return m.specs, nil
		}
		return nil, errs.Wrap("toolserver.ModelTools.Specs", err)
	}
	specs := make([]model.ToolSpec, 0, len(list))
	for _, t := range list {
		specs = append(specs, model.ToolSpec{Name: t.ID, Description: t.Description, InputSchema: t.InputSchema})
	}
	m.specs, m.expires = specs, m.now().Add(m.ttl)
	return specs, nil
}

// Run runs tool name with args on the tool server and returns its result.
func (m *ModelTools) Run(ctx context.Context, name string, args map[string]any) (map[string]any, error) {
	res, err := m.client.RunTool(ctx, name, args)
	if err != nil {
		return nil, errs.Wrap("toolserver.ModelTools.Run", err)
	}
	return res.Result, nil
}
