package toolclient

import (
	"context"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
)

// stepOnly are the tools that only a workflow run carries out (ask_human
// waits for a person's answer; agent needs the runner's models and gate;
// run_workflow starts a child run): a chat does not offer them to models,
// nor does an agent step.
var stepOnly = map[string]bool{"ask_human": true, "agent": true, "run_workflow": true}

// Specs returns the tools as model tool specs, for chats that offer them
// to models (chat.Tools): the cached list, so a chat message does not cost
// a tool server round trip, without the tools only workflow steps run.
// When the tool server cannot be reached it returns the cached copy if
// any, else TOOLS_UNAVAILABLE.
func (c *Catalog) Specs(ctx context.Context) ([]model.ToolSpec, error) {
	list, err := c.List(ctx, false)
	if err != nil {
		return nil, errs.Wrap("toolclient.Catalog.Specs", err)
	}
	specs := make([]model.ToolSpec, 0, len(list))
	for _, t := range list {
		if stepOnly[t.ID] {
			continue
		}
		specs = append(specs, model.ToolSpec{Name: t.ID, Description: t.Description, InputSchema: t.InputSchema})
	}
	return specs, nil
}

// Run runs tool name with args on the tool server for no one in
// particular and returns its result (the tool gate runs tools for users:
// RunAs). Its errors are the Client's.
func (c *Catalog) Run(ctx context.Context, name string, args map[string]any) (map[string]any, error) {
	res, err := c.RunAs(ctx, name, args, Identity{})
	if err != nil {
		return nil, err
	}
	return res.Result, nil
}

// RunAs runs tool name with args on the tool server for who (see
// Client.RunToolAs) and returns the whole answer: the result and, for a
// metered tool, its usage. Its errors are the Client's.
func (c *Catalog) RunAs(ctx context.Context, name string, args map[string]any, who Identity) (RunResult, error) {
	res, err := c.src.RunToolAs(ctx, name, args, who)
	if err != nil {
		return RunResult{}, errs.Wrap("toolclient.Catalog.RunAs", err)
	}
	return res, nil
}
