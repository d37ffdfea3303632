package tools

import (
	"context"
	"time"

	"github.com/workflowchat/service/shared/agent"
	"github.com/workflowchat/service/shared/errs"
)

// AgentID is the id of the agent step (agent.ID): a model that calls
// tools in a loop (docs/decisions.md, Agent steps).
const AgentID = agent.ID

// agentTool is agent, whose contract (inputs, bounds, output) is package
// agent's. It is in the catalog so that definitions validate its inputs
// and models can propose it, but only the workflow runner carries it out
// (it needs the user's models, budget and tool gate, which the tool
// server does not have): running it as a tool fails with INVALID_PARAMS.
// Its annotations are those of the tools it may be given, which may be
// anything: not read-only, open world.
func agentTool() *Tool {
	return &Tool{
		ID:           AgentID,
		Name:         "AI agent",
		Category:     CategoryAI,
		Description:  agent.Description,
		InputSchema:  agent.InputSchema,
		OutputSchema: agent.OutputSchema,
		Annotations:  Annotations{OpenWorld: true},
		Timeout:      time.Second,
		Run:          runAgent,
	}
}

const errAgentStepOnly = AgentID + " runs only as a workflow step"

func runAgent(context.Context, map[string]any) (map[string]any, error) {
	return nil, &errs.Error{Kind: errs.Invalid, Code: CodeInvalidParams, Message: errAgentStepOnly,
		Details: []errs.FieldError{{Field: "toolId", Message: errAgentStepOnly}}}
}
