package toolclient

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/errs"
)

// Details returns every tool with its schemas and outputs, for workflow
// proposals: the list, then each tool's detail, every read served from
// the cache while fresh and from stale copies while the tool server is
// down. Its errors are List's and Get's.
func (c *Catalog) Details(ctx context.Context) ([]ToolDetail, error) {
	const op = "toolclient.Catalog.Details"
	list, err := c.List(ctx, false)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	out := make([]ToolDetail, len(list))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, s := range list {
		g.Go(func() error {
			d, err := c.Get(gctx, s.ID)
			if err != nil {
				return err
			}
			out[i] = d
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, errs.Wrap(op, err)
	}
	return out, nil
}
