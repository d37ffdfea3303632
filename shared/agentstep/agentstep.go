// Package agentstep carries out the agent steps of workflow runs (their
// contract: package agent). It is the run engine's tool runner: a step
// of any other tool goes on to the next runner (the tool gate), and an
// agent step runs the chat's model/tool loop (package toolloop) with the
// step's instructions and tools, for the run's user: every model turn
// reserves and settles the user's token budget, and every tool call the
// model makes passes the tool gate as an agent call (the user's policy
// decides; a tool that would ask is refused, since no one is there to
// answer).
package agentstep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/workflowchat/service/shared/agent"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/toolgate"
	"github.com/workflowchat/service/shared/toolloop"
	"github.com/workflowchat/service/shared/truncate"
	"github.com/workflowchat/service/shared/usage"
)

// Codes of an agent step's failures and of its refused calls, at the
// start of their messages (a step's error is its message).
const (
	// CodeToolNotGiven: the model called a tool the step did not list
	// (the call is not run; the model is told).
	CodeToolNotGiven = "TOOL_NOT_GIVEN"
	// CodeToolNotFound: the step lists a tool the catalog does not offer
	// to agents (the step fails before any model turn).
	CodeToolNotFound = "TOOL_NOT_FOUND"
	// CodeTooManyCalls: a call past agent.MaxCalls (not run).
	CodeTooManyCalls = "TOOL_CALLS_EXCEEDED"
)

// SystemPrompt frames every agent step; the step's instructions follow.
const SystemPrompt = "You are an agent step of a workflow in Workflow Chat. Follow the instructions, calling the tools offered when they help, " +
	"with arguments that match their input schemas. Finish with a final answer in text, without a tool call."

// Runner is the run engine's tool runner with agent steps.
type Runner interface {
	Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error)
}

// Tools are the tools that may be offered to models (toolclient.Catalog's
// Specs: the catalog without the step-only tools).
type Tools interface {
	Specs(ctx context.Context) ([]model.ToolSpec, error)
}

// Models are the models a step may use (model.Registry).
type Models interface {
	usage.Models
	Lookup(id string) (model.Model, error)
}

// Options are New's dependencies; all are required but Meter (nil: no
// budget) and DefaultModelID (empty: model.BuiltinID).
type Options struct {
	Next           Runner
	Gate           *toolgate.Gate
	Tools          Tools
	Models         Models
	Meter          *usage.Meter
	DefaultModelID string
}

// Steps runs agent steps and hands every other step to Next.
type Steps struct{ o Options }

// New returns the runner.
func New(o Options) *Steps {
	if o.DefaultModelID == "" {
		o.DefaultModelID = model.BuiltinID
	}
	return &Steps{o: o}
}

// Run runs step tool toolID on input: an agent step here (see Agent),
// another tool through Next.
func (s *Steps) Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error) {
	if toolID != agent.ID {
		return s.o.Next.Run(ctx, toolID, input)
	}
	out, err := s.Agent(ctx, input)
	if err != nil {
		return nil, err
	}
	return out.Map(), nil
}

// Agent runs an agent step with inputs in for the user ctx acts for
// (auth.UserID): the model (modelId, else the default) gets the
// instructions and the input, and the listed tools, for at most maxTurns
// model turns, the last one without tools. A call of a tool not listed,
// past agent.MaxCalls, or refused by the gate is not run: the model gets
// an error for it, which toolCalls records. It fails, with a message
// starting with the code, for inputs Parse refuses (INVALID_PARAMS), an
// unknown model (INVALID_MODEL), a listed tool the catalog does not offer
// (TOOL_NOT_FOUND), a catalog that cannot be read (TOOLS_UNAVAILABLE), a
// model turn the budget has no room for (BUDGET_EXCEEDED, BUDGET_BUSY) or
// the model's failure; and with ctx's error, or the gate's (the policies
// or the budget could not be read).
func (s *Steps) Agent(ctx context.Context, in map[string]any) (agent.Output, error) {
	const op = "agentstep.Agent"
	req, err := agent.Parse(in)
	if err != nil {
		return agent.Output{}, coded(op, err)
	}
	modelID := req.ModelID
	if modelID == "" {
		modelID = s.o.DefaultModelID
	}
	if _, err := s.o.Models.Lookup(modelID); err != nil {
		return agent.Output{}, coded(op, err)
	}
	specs, err := s.specs(ctx, req.ToolIDs)
	if err != nil {
		return agent.Output{}, coded(op, err)
	}
	given := map[string]bool{}
	for _, sp := range specs {
		given[sp.Name] = true
	}
	userID := auth.UserID(ctx)
	var out agent.Output
	o := toolloop.Options{
		Meter: s.o.Meter, Models: s.o.Models, UserID: userID,
		ModelID: modelID, System: SystemPrompt, Tools: specs, MaxRounds: req.MaxTurns - 1,
		Delta: func(string) error { return nil },
		Call: func(ctx context.Context, call model.ToolCall) (toolloop.CallOutcome, error) {
			c, result, err := s.call(ctx, userID, call, given, len(out.ToolCalls))
			if err != nil {
				return toolloop.CallOutcome{}, err
			}
			out.ToolCalls = append(out.ToolCalls, c)
			return toolloop.CallOutcome{Result: result}, nil
		},
	}
	res, err := toolloop.Run(ctx, o, toolloop.State{Messages: []model.Message{{Role: model.RoleUser, Content: prompt(req)}}})
	if err != nil {
		if ctx.Err() != nil {
			return agent.Output{}, ctx.Err()
		}
		return agent.Output{}, coded(op, err)
	}
	out.Text, out.Turns = res.Content, res.Turns
	if out.ToolCalls == nil {
		out.ToolCalls = []agent.Call{}
	}
	return out, nil
}

// prompt is the step's user message: its instructions, and its input as
// JSON when it has one.
func prompt(req agent.Request) string {
	if req.Input == nil {
		return req.Instructions
	}
	b, err := json.Marshal(req.Input)
	if err != nil {
		return req.Instructions
	}
	return req.Instructions + "\n\nInput:\n" + string(b)
}

// specs returns the specs of the listed tools, in their order; a tool
// the catalog does not offer models fails TOOL_NOT_FOUND.
func (s *Steps) specs(ctx context.Context, ids []string) ([]model.ToolSpec, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	all, err := s.o.Tools.Specs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]model.ToolSpec, 0, len(ids))
	for _, id := range ids {
		i := slices.IndexFunc(all, func(sp model.ToolSpec) bool { return sp.Name == id })
		if i < 0 {
			return nil, &errs.Error{Kind: errs.Invalid, Code: CodeToolNotFound, Message: fmt.Sprintf("toolIds names %s, which is not a tool agents can call", id),
				Details: []errs.FieldError{{Field: agent.FieldToolIDs, Message: "unknown tool " + id}}}
		}
		out = append(out, all[i])
	}
	return out, nil
}

// call runs one tool call of the model, the n-th of the step: a tool not
// given or a call past MaxCalls is not run, any other passes the gate.
// It returns the call as toolCalls records it and the result the model
// reads (the output's JSON, cut to agent.MaxCallValue, or {"error": ...});
// an error only when the gate could not decide.
func (s *Steps) call(ctx context.Context, userID string, call model.ToolCall, given map[string]bool, n int) (agent.Call, string, error) {
	c := agent.Call{ToolID: call.Name}
	if err := json.Unmarshal(call.Args, &c.Input); err != nil || c.Input == nil {
		c.Input = nil
	}
	refuse := func(msg string) (agent.Call, string, error) {
		c.Error = msg
		return c, errorResult(msg), nil
	}
	switch {
	case !given[call.Name]:
		return refuse(CodeToolNotGiven + ": the step does not give the agent the tool " + call.Name)
	case n >= agent.MaxCalls:
		return refuse(fmt.Sprintf("%s: an agent step makes at most %d tool calls", CodeTooManyCalls, agent.MaxCalls))
	case c.Input == nil:
		return refuse("INVALID_PARAMS: the tool arguments must be a JSON object")
	}
	res, err := s.o.Gate.Run(ctx, toolgate.Call{Origin: toolgate.Agent, UserID: userID, ToolID: call.Name, Input: c.Input})
	if err != nil {
		return c, "", err
	}
	if err := res.Err(); err != nil {
		msg := errs.MessageOf(err, "the tool failed")
		if code := errs.CodeOf(err); code != "" && !strings.HasPrefix(msg, code) {
			msg = code + ": " + msg
		}
		return refuse(msg)
	}
	b, err := json.Marshal(res.Output)
	if err != nil {
		return refuse("the tool returned an unencodable result")
	}
	if len(b) > agent.MaxCallValue {
		c.OutputTruncated = true
		return c, string(truncate.Cut(b, agent.MaxCallValue)), nil
	}
	c.Output = res.Output
	return c, string(b), nil
}

func errorResult(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}

// coded is err with its code at the start of its message, as a step's
// error shows it.
func coded(op string, err error) error {
	code, msg := errs.CodeOf(err), errs.MessageOf(err, "the agent step failed")
	if code != "" && !strings.HasPrefix(msg, code) {
		msg = code + ": " + msg
	}
	e := &errs.Error{Op: op, Kind: errs.KindOf(err), Code: code, Message: msg, Err: err}
	var orig *errs.Error
	if errors.As(err, &orig) {
		e.Details, e.RetryAfter = orig.Details, orig.RetryAfter
	}
	return e
}
