package toolserver

import (
	"context"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/tools"
)

// ModelTools offers the tool server's catalog to models and runs their
// calls through the client: it satisfies chat.Tools. The tool list comes
// from the process's one tools.Catalog, so a chat message does not cost a
// tool server round trip.
type ModelTools struct {
	client  *Client
	catalog *tools.Catalog
}

// NewModelTools returns ModelTools running calls through c and listing
// the tools of cat.
func NewModelTools(c *Client, cat *tools.Catalog) *ModelTools {
	return &ModelTools{client: c, catalog: cat}
}

// Specs returns the tools as model tool specs. When the tool server cannot
// be reached it returns the catalog's cached copy if any, else its error.
func (m *ModelTools) Specs(ctx context.Context) ([]model.ToolSpec, error) {
	list, err := m.catalog.List(ctx, false)
	if err != nil {
		return nil, errs.Wrap("toolserver.ModelTools.Specs", err)
	}
	specs := make([]model.ToolSpec, 0, len(list))
	for _, t := range list {
		specs = append(specs, model.ToolSpec{Name: t.ID, Description: t.Description, InputSchema: t.InputSchema})
	}
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
