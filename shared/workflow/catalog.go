package workflow

import (
	"context"
	"encoding/json"

	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/tools"
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

// NewToolCatalog returns the ToolCatalog of proposals over the process's
// one tool catalog: its list, then each tool's detail (output schema and
// outputs), every read served from cat's cache while fresh, stale copies
// while the tool server is down.
func NewToolCatalog(cat *tools.Catalog) ToolCatalog { return toolCatalog{cat} }

type toolCatalog struct{ cat *tools.Catalog }

// Tools implements ToolCatalog.
func (c toolCatalog) Tools(ctx context.Context) ([]ToolInfo, error) {
	const op = "workflow.ToolCatalog"
	list, err := c.cat.List(ctx, false)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	out := make([]ToolInfo, len(list))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, s := range list {
		g.Go(func() error {
			d, err := c.cat.Get(gctx, s.ID)
			if err != nil {
				return err
			}
			out[i] = ToolInfo{ID: d.ID, Name: d.Name, Description: d.Description, InputSchema: d.InputSchema,
				OutputSchema: d.OutputSchema, Outputs: d.Outputs}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, errs.Wrap(op, err)
	}
	return out, nil
}
