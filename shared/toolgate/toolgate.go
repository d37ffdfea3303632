// Package toolgate is the one gate before every tool call: a model's call
// in a chat reply, a workflow step (and the workflows exposed as tools,
// which run as workflow runs). For each call it
//
//   - decides by the user's policy (package toolpolicy): in a chat, allow
//     runs the call, ask asks the user (unless the user already approved
//     or denied this very call), deny refuses; a workflow step runs
//     without asking, and only a tool the user denies is refused; a
//     model's call in an agent step is decided as in a chat, but no one
//     is there to ask: a tool that would ask is refused
//     (TOOL_APPROVAL_REQUIRED);
//   - for a metered tool (one whose catalog entry says it calls a model,
//     toolclient.ToolDetail.Metered) reserves the user's token budget
//     before the call (package usage) and settles it to the usage the
//     tool reports after;
//   - runs the tool for the user: the tool server gets the user's identity
//     and the output cap, signed (toolclient.Identity), never from the
//     model's arguments;
//
// and returns a typed Outcome: the tool ran (its output, or its error),
// the call is refused (a code and a message), or the user must be asked.
// An error from Run means the gate could not decide (the policies or the
// budget could not be read); a refusal is never an error.
package toolgate

import (
	"context"
	"errors"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/toolpolicy"
	"github.com/workflowchat/service/shared/tracing"
	"github.com/workflowchat/service/shared/usage"
)

// CodeToolDenied is the code of a call the user's policy (or, in a chat,
// the user's decision) refuses.
const CodeToolDenied = "TOOL_DENIED"

// CodeApprovalRequired is the code of an agent step's call of a tool
// whose policy asks: a workflow run has no one to ask.
const CodeApprovalRequired = "TOOL_APPROVAL_REQUIRED"

// Origin is where a call comes from.
type Origin uint8

// Origins.
const (
	// Chat is a model's tool call in a chat reply.
	Chat Origin = iota + 1
	// Workflow is a step of a workflow run (the user built the workflow).
	Workflow
	// Agent is a model's tool call in an agent step of a workflow run:
	// the model chose it, and no person is there to ask.
	Agent
)

// Decision is the user's answer to a chat call that asked.
type Decision uint8

// Decisions.
const (
	Undecided Decision = iota
	Approved
	Denied
)

// Call is one tool call to decide and run.
type Call struct {
	Origin Origin
	// UserID is the user the call is made for (its policies, budget and
	// identity).
	UserID string
	ToolID string
	// Input is the tool's input (nil is {}).
	Input map[string]any
	// InputError, when set, says the caller's arguments are unusable (not
	// a JSON object): the call is decided as any other, and where it would
	// run it ends as this tool error without running.
	InputError error
	// Decision is the user's answer to this chat call (Approved runs it
	// without reading the policy, Denied refuses it).
	Decision Decision
	// Announce, when set, is called once the call is decided to run or
	// refused, before it runs (a chat emits its tool_call event). Its
	// error ends Run with that error, any reservation given back.
	Announce func() error
}

// Kind is the kind of an Outcome.
type Kind uint8

// Outcome kinds.
const (
	// Run: the tool ran (or was tried): Output, or ToolError.
	Run Kind = iota + 1
	// Refuse: the call was not run: Code and Message.
	Refuse
	// Ask: the user's policy asks; nothing ran (chat calls only).
	Ask
)

// Outcome is how a call ended.
type Outcome struct {
	Kind Kind
	// Output is the tool's output (Run, when it succeeded).
	Output map[string]any
	// ToolError is the tool's failure (Run): the tool server's error (its
	// code and client-safe message) or the catalog's.
	ToolError error
	// Usage is what a metered tool's model call spent (Run), else nil.
	Usage *toolclient.Usage
	// Code and Message say why a call was refused (Refuse): CodeToolDenied,
	// CodeApprovalRequired, usage.CodeBudgetExceeded or usage.CodeBudgetBusy. RetryAfter is the
	// seconds until the budget renews (BUDGET_EXCEEDED) or until a retry
	// may find room (BUDGET_BUSY).
	Code, Message string
	RetryAfter    int
}

// Err returns the outcome as an error: a refusal as an *errs.Error with
// its code (Forbidden TOOL_DENIED, RateLimited BUDGET_EXCEEDED or
// BUDGET_BUSY), a run's
// ToolError, else nil.
func (o Outcome) Err() error {
	switch o.Kind {
	case Run:
		return o.ToolError
	case Refuse:
		kind := errs.Forbidden
		if o.Code == usage.CodeBudgetExceeded || o.Code == usage.CodeBudgetBusy {
			kind = errs.RateLimited
		}
		e := errs.E("toolgate", kind, o.Code, o.Message)
		e.RetryAfter = o.RetryAfter
		return e
	}
	return nil
}

// Tools is the catalog the gate runs tools from (toolclient.Catalog).
type Tools interface {
	// Get returns a tool's declaration (Metered); NotFound for a tool the
	// catalog does not have.
	Get(ctx context.Context, id string) (toolclient.ToolDetail, error)
	// RunAs runs a tool for a user.
	RunAs(ctx context.Context, id string, input map[string]any, who toolclient.Identity) (toolclient.RunResult, error)
}

// Policies are the users' tool policies (toolpolicy.Service).
type Policies interface {
	// Policy is the user's policy of a tool: the user's own, else the
	// default of its annotations.
	Policy(ctx context.Context, userID, toolID string) (string, error)
	// Override is the user's own policy of a tool, "" when none.
	Override(ctx context.Context, userID, toolID string) (string, error)
	// Allow stores allow as the user's policy of a tool.
	Allow(ctx context.Context, userID, toolID string) error
}

// Options are the dependencies of New. Policies nil allows every call;
// Meter nil meters nothing.
type Options struct {
	Tools    Tools
	Policies Policies
	Meter    *usage.Meter
}

// Gate decides and runs tool calls. It is safe for concurrent use.
type Gate struct {
	tools    Tools
	policies Policies
	meter    *usage.Meter
	// local are the tools served in process (WithLocal), by id.
	local map[string]Local
}

// Local is a tool served in process instead of by the tool server (a
// built-in tool over the service's own data, e.g. a knowledge base
// search). It calls no model (it is never metered) and runs for the
// user the call is made for.
type Local interface {
	Run(ctx context.Context, userID string, input map[string]any) (map[string]any, error)
}

// WithLocal returns a Gate like g that runs tool id in process with t:
// the same policies decide its calls, no budget is reserved, and its
// errors are the call's tool error. g is left as it was.
func (g *Gate) WithLocal(id string, t Local) *Gate {
	c := *g
	c.local = make(map[string]Local, len(g.local)+1)
	for k, v := range g.local {
		c.local[k] = v
	}
	c.local[id] = t
	return &c
}

// New returns a Gate.
func New(o Options) *Gate {
	return &Gate{tools: o.Tools, policies: o.Policies, meter: o.Meter}
}

// Messages of refusals.
const (
	// msgChatDenied is what a chat's model gets for a call the user (or
	// the user's policy) refused.
	msgChatDenied = "the user did not allow this tool call"
)

// Run decides call c and, when it may run, runs it for c.UserID (see the
// package documentation). Policy comes first: in a chat a call the user
// denied, or a deny tool, is refused (TOOL_DENIED) and an ask tool asks
// (Ask, nothing announced); a workflow step is refused only when the
// user's own policy is deny; an agent step's call is refused for a deny
// tool (TOOL_DENIED) and an ask tool (TOOL_APPROVAL_REQUIRED). Then a metered tool reserves its input's
// estimate plus its output cap (waiting, bounded, while other calls under
// way hold the room; refused BUDGET_BUSY when they still do, BUDGET_EXCEEDED
// when the input does not fit in what settled calls left; with a budget,
// a tool whose declaration
// cannot be read does not run), the call is announced, run with the
// user's identity and the reservation's cap, and its reservation settled
// to the usage the tool reported (given back when the tool server
// answered without usage; kept, as spent, when the call's fate is unknown:
// a timeout or a tool server that could not be reached). Without a
// budget nothing is reserved and the usage a tool reports is recorded.
// Errors: the policies' and the budget store's (nothing ran), Announce's.
func (g *Gate) Run(ctx context.Context, c Call) (Outcome, error) {
	ctx, span := tracing.StartTool(ctx, c.ToolID)
	out, err := g.run(ctx, c)
	failed := err
	if failed == nil {
		failed = out.Err() // a refusal or the tool's failure fails the span
	}
	tracing.End(span, failed)
	return out, err
}

// run is Run without its span.
func (g *Gate) run(ctx context.Context, c Call) (Outcome, error) {
	const op = "toolgate.Run"
	if out, decided, err := g.decide(ctx, c); err != nil || decided {
		if err == nil && out.Kind == Refuse {
			err = announce(c)
		}
		return out, errs.Wrap(op, err)
	}
	if c.InputError != nil {
		return Outcome{Kind: Run, ToolError: c.InputError}, errs.Wrap(op, announce(c))
	}
	input := c.Input
	if input == nil {
		input = map[string]any{}
	}
	if t, ok := g.local[c.ToolID]; ok {
		if err := announce(c); err != nil {
			return Outcome{}, errs.Wrap(op, err)
		}
		out, err := t.Run(ctx, c.UserID, input)
		if err != nil {
			return Outcome{Kind: Run, ToolError: err}, nil
		}
		return Outcome{Kind: Run, Output: out}, nil
	}
	var r *usage.Reservation
	if g.meter.Budgeted() {
		// Only a budget needs the declaration, before the call: the usage
		// of any call comes back with its result.
		d, err := g.tools.Get(ctx, c.ToolID)
		if err != nil && !errs.Is(err, errs.NotFound) {
			// Whether it is metered is unknown: it does not run unmetered.
			return Outcome{Kind: Run, ToolError: err}, errs.Wrap(op, announce(c))
		}
		if err == nil && d.Metered {
			r, err = g.meter.Reserve(ctx, c.UserID, EstimateInput(input), 0)
			if code := errs.CodeOf(err); code == usage.CodeBudgetExceeded || code == usage.CodeBudgetBusy {
				var e *errs.Error
				errors.As(err, &e)
				return Outcome{Kind: Refuse, Code: e.Code, Message: e.Message, RetryAfter: e.RetryAfter}, errs.Wrap(op, announce(c))
			}
			if err != nil {
				return Outcome{}, errs.Wrap(op, err)
			}
		}
	}
	if err := announce(c); err != nil {
		g.meter.Release(ctx, r)
		return Outcome{}, errs.Wrap(op, err)
	}
	res, err := g.tools.RunAs(ctx, c.ToolID, input, toolclient.Identity{UserID: c.UserID, MaxOutput: r.MaxOutput()})
	g.settle(ctx, c.UserID, r, res.Usage, err)
	if err != nil {
		return Outcome{Kind: Run, ToolError: err}, nil
	}
	return Outcome{Kind: Run, Output: res.Result, Usage: res.Usage}, nil
}

// decide applies the policy: decided is true when the call must not run
// (out is Refuse or Ask).
func (g *Gate) decide(ctx context.Context, c Call) (out Outcome, decided bool, err error) {
	denied := func(msg string) (Outcome, bool, error) {
		return Outcome{Kind: Refuse, Code: CodeToolDenied, Message: msg}, true, nil
	}
	switch c.Origin {
	case Chat:
		switch {
		case c.Decision == Approved:
			return Outcome{}, false, nil
		case c.Decision == Denied:
			return denied(msgChatDenied)
		case g.policies == nil:
			return Outcome{}, false, nil
		}
		p, err := g.policies.Policy(ctx, c.UserID, c.ToolID)
		switch {
		case err != nil:
			return Outcome{}, false, err
		case p == toolpolicy.Deny:
			return denied(msgChatDenied)
		case p == toolpolicy.Ask:
			return Outcome{Kind: Ask}, true, nil
		}
		return Outcome{}, false, nil
	case Agent:
		if g.policies == nil {
			return Outcome{}, false, nil
		}
		p, err := g.policies.Policy(ctx, c.UserID, c.ToolID)
		switch {
		case err != nil:
			return Outcome{}, false, err
		case p == toolpolicy.Deny:
			return denied("the user's policy denies the tool " + c.ToolID)
		case p == toolpolicy.Ask:
			return Outcome{Kind: Refuse, Code: CodeApprovalRequired, Message: "the user's policy asks before the tool " + c.ToolID + " runs, and no one is there to approve it in a workflow run: set its policy to allow to let agents call it"}, true, nil
		}
		return Outcome{}, false, nil
	case Workflow:
		// Steps run without asking; only the user's own policy can deny
		// (no default does), so the catalog is not read for it.
		if g.policies == nil {
			return Outcome{}, false, nil
		}
		p, err := g.policies.Override(ctx, c.UserID, c.ToolID)
		if err != nil {
			return Outcome{}, false, err
		}
		if p == toolpolicy.Deny {
			return denied("the user's policy denies the tool " + c.ToolID)
		}
		return Outcome{}, false, nil
	}
	return Outcome{}, false, errs.E("toolgate.decide", errs.Internal, "", "a tool call of no known origin")
}

func announce(c Call) error {
	if c.Announce == nil {
		return nil
	}
	return c.Announce()
}

// settle records a call's model usage: the reservation r of a metered
// call settled to the usage the tool reported, given back when the tool
// server answered without usage (it called no model), kept when the
// call's fate is unknown (a timeout, a tool server not reached), as the
// model may have spent it; without a reservation (no budget) the usage
// the tool reported, if any, recorded.
func (g *Gate) settle(ctx context.Context, userID string, r *usage.Reservation, u *toolclient.Usage, runErr error) {
	var used usage.Counts
	id := ""
	if u != nil {
		used = usage.Counts{Requests: 1, InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens)}
		if id = u.ModelID; id == "" {
			id = "unknown"
		}
	}
	switch {
	case r == nil:
		if u != nil {
			if err := g.meter.Record(ctx, userID, id, used); err != nil {
				logging.FromContext(ctx).WarnContext(ctx, "record a tool's model usage", "err", err.Error())
			}
		}
	case u != nil:
		if err := g.meter.Settle(ctx, r, id, used); err != nil {
			logging.FromContext(ctx).WarnContext(ctx, "settle a metered tool's usage", "err", err.Error())
		}
	case runErr != nil && (errs.Is(runErr, errs.Timeout) || errs.Is(runErr, errs.Unavailable) || errors.Is(runErr, context.DeadlineExceeded) || errors.Is(runErr, context.Canceled)):
		logging.FromContext(ctx).WarnContext(ctx, "a metered tool call ended without its usage; its reservation stays counted",
			"reserved", r.Held(), "err", runErr.Error())
	default:
		g.meter.Release(ctx, r)
	}
}

// EstimateInput estimates the input tokens of a metered tool's model call
// from its input: every string in it (the prompt, the system instruction)
// as one message, by model.EstimateTokens (which never counts fewer than
// the words, the built-in model's count).
func EstimateInput(input map[string]any) int {
	var texts []model.Message
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			texts = append(texts, model.Message{Role: model.RoleUser, Content: v})
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(input)
	return model.EstimateTokens(model.Request{Messages: texts})
}

// Remember stores allow as userID's policy of toolID (a chat approval the
// user asked to remember). Without policies it does nothing. It fails with
// the policy store's errors.
func (g *Gate) Remember(ctx context.Context, userID, toolID string) error {
	if g.policies == nil {
		return nil
	}
	return errs.Wrap("toolgate.Remember", g.policies.Allow(ctx, userID, toolID))
}

// Steps returns the workflow engine's tool runner over g: each step is a
// Workflow call for the user the context acts for (auth.UserID), its
// outcome mapped to the engine's (output, error): a tool error as it is, a
// refusal as an *errs.Error whose message starts with its code (the
// engine keeps a step's message only).
func (g *Gate) Steps() StepRunner { return StepRunner{g: g} }

// StepRunner runs workflow steps through a Gate (Gate.Steps).
type StepRunner struct{ g *Gate }

// Run runs step tool toolID on input; see Gate.Steps.
func (s StepRunner) Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error) {
	out, err := s.g.Run(ctx, Call{Origin: Workflow, UserID: auth.UserID(ctx), ToolID: toolID, Input: input})
	if err != nil {
		return nil, err
	}
	if out.Kind == Refuse {
		out.Message = out.Code + ": " + out.Message
	}
	if err := out.Err(); err != nil {
		return nil, err
	}
	return out.Output, nil
}
