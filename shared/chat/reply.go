package chat

import (
	"context"
	"encoding/json"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/toolgate"
	"github.com/workflowchat/service/shared/toolloop"
	"github.com/workflowchat/service/shared/usage"
)

// Event is one event of a reply, as docs/openapi.yaml's StreamEvent gives them.
type Event struct {
	Type      string          `json:"type"`
	MessageID string          `json:"messageId,omitempty"`
	Delta     string          `json:"delta,omitempty"`
	ToolName  string          `json:"toolName,omitempty"`
	ToolArgs  json.RawMessage `json:"toolArgs,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	// ToolCallID names the call a tool_approval event asks about.
	ToolCallID string `json:"toolCallId,omitempty"`
	// Truncated says that a value of the event (toolArgs, result) was
	// cut to ValueBound; ResultSize, on a tool_result, is the length of
	// the whole result (served by the stored tool call's resultUrl when
	// it was kept).
	Truncated  bool   `json:"truncated,omitempty"`
	ResultSize int64  `json:"resultSize,omitempty"`
	Error      string `json:"error,omitempty"`
	Message    string `json:"message,omitempty"`
	// Content, on the error INTERRUPTED, is the reply as saved: a client
	// replaces what it shows with it (what it received after the last
	// saved event was lost with the process that generated it).
	Content *string `json:"content,omitempty"`
	// Reason says why an end event ended the stream: completed, stopped,
	// awaiting_approval or interrupted.
	Reason string `json:"reason,omitempty"`
	// Citations, on an end event, are the reply's citations as the
	// assistant message stores them (none for a chat without knowledge
	// bases, or when nothing was retrieved).
	Citations []Citation `json:"citations,omitempty"`
	// ID is the event's SSE id, <messageId>:<seq> (not part of its JSON).
	ID string `json:"-"`
}

// End reasons.
const (
	ReasonCompleted        = "completed"
	ReasonStopped          = "stopped"
	ReasonAwaitingApproval = "awaiting_approval"
	ReasonInterrupted      = "interrupted"
)

// Event types.
const (
	EventStart      = "start"
	EventContent    = "content"
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
	// EventToolApproval asks the user to approve or deny a tool call;
	// end (awaiting_approval) follows.
	EventToolApproval = "tool_approval"
	EventEnd          = "end"
	EventError        = "error"
)

// SystemPrompt frames every chat.
const SystemPrompt = "You are the assistant of Workflow Chat, a service where users build and run workflows of tools. " +
	"Answer helpfully and concisely. When a tool would help, call it with arguments that match its input schema."

// reply generates the assistant's reply to user after history: model turns
// streamed as content events, tool calls run and reported as tool_call and
// tool_result events, at most MaxToolRounds rounds (see generate). held,
// when not nil, is the budget reservation of its first model call
// (reserveReply).
// The passages of the chat's knowledge bases go with the system prompt
// (systemWith) and are the reply's citations.
func (s *Service) reply(ctx context.Context, history []Message, user Message, atts []model.Attachment, passages []Passage, modelID, id string, held *usage.Reservation, emit func(Event) error) (Message, error) {
	parent := user.ID
	msg := Message{ID: id, ChatID: user.ChatID, Role: model.RoleAssistant, ModelID: modelID, ReplyTo: user.ID, ParentID: &parent, Status: StatusCompleted,
		Citations: citations(passages)}
	p := Pending{Messages: toModelMessages(history, user, atts)}
	if len(passages) > 0 {
		p.System = systemWith(passages)
	}
	return s.generate(ctx, msg, p, "", held, emit)
}

// reserveReply reserves userID's budget for the first model call of a
// reply to msgs with modelID (the request generate will make), so that a
// reply over budget is refused before anything is stored. Without a
// budget it writes nothing. Its errors are usage.Meter.Reserve's.
func (s *Service) reserveReply(ctx context.Context, userID, modelID, system string, msgs []model.Message) (*usage.Reservation, error) {
	if !s.usage.Budgeted() {
		return s.usage.Reserve(ctx, userID, 0, 0)
	}
	return s.usage.ReserveCall(ctx, s.models, userID, model.Request{ModelID: modelID, System: system, Messages: msgs, Tools: s.specs(ctx)})
}

// specs returns the tools offered to models, none when the catalog is
// unavailable (the reply goes on without them).
func (s *Service) specs(ctx context.Context) []model.ToolSpec {
	if s.tools == nil {
		return nil
	}
	specs, err := s.tools.Specs(ctx)
	if err != nil {
		logWarn(ctx, "tools unavailable; replying without them", "err", err.Error())
		return nil
	}
	return specs
}

// errAwaitingApproval ends a reply paused for a tool approval.
var errAwaitingApproval = errs.E("chat.reply", errs.Conflict, "AWAITING_APPROVAL", "the reply waits for a tool approval")

// generate goes on with reply msg from state p: first the tool calls of p
// (the first decided by decision when it is set), then model turns. It
// returns msg with its content the concatenation of the deltas (msg's own
// first), bounded to what one stored item holds (see bound), and its
// tokens. Each tool call passes the tool gate (package toolgate): it runs,
// is refused (the model gets the refusal as its result) or asks, which
// pauses the reply: a tool_approval event, then errAwaitingApproval with
// msg.Pending set. Every model call reserves the user's budget before
// and settles it after (usage.Meter.Generate; the first one uses held when
// it is given): a call the budget has no room for ends the reply with
// RateLimited BUDGET_EXCEEDED. On an error it returns the message
// generated so far with the error.
func (s *Service) generate(ctx context.Context, msg Message, p Pending, decision string, held *usage.Reservation, emit func(Event) error) (Message, error) {
	userID := auth.UserID(ctx)
	msg.Pending, msg.Decision, msg.PendingKey = nil, "", ""
	first := true // the first call run is the one decision answers
	o := toolloop.Options{
		Meter: s.usage, Models: s.models, UserID: userID,
		ModelID: msg.ModelID, System: firstNonEmpty(p.System, SystemPrompt), Tools: s.specs(ctx), MaxRounds: MaxToolRounds, Held: held,
		Delta: func(delta string) error { return emit(Event{Type: EventContent, Delta: delta}) },
		Call: func(ctx context.Context, call model.ToolCall) (toolloop.CallOutcome, error) {
			d := toolgate.Undecided
			if first {
				switch decision {
				case DecisionApproved:
					d = toolgate.Approved
				case DecisionDenied:
					d = toolgate.Denied
				}
				first = false
			}
			out, err := s.runTool(ctx, userID, call, d, emit)
			if err != nil {
				return toolloop.CallOutcome{}, err
			}
			if out.Kind == toolgate.Ask {
				return toolloop.CallOutcome{Pause: true}, nil
			}
			// A result longer than ValueBound is kept whole in the blob
			// store; the event, the message and the model get it cut.
			tc, read := s.keepResult(ctx, msg, len(msg.ToolCalls), ToolCall{ToolName: call.Name, ToolArgs: call.Args, Result: toolResult(out)})
			if err := emit(Event{Type: EventToolResult, ToolName: call.Name, Result: tc.Result, Truncated: tc.Truncated, ResultSize: tc.ResultSize}); err != nil {
				return toolloop.CallOutcome{}, err
			}
			msg.ToolCalls = append(msg.ToolCalls, tc)
			return toolloop.CallOutcome{Result: string(read)}, nil
		},
	}
	res, err := toolloop.Run(ctx, o, toolloop.State{Content: msg.Content, Messages: p.Messages, Calls: p.Calls, Round: p.Round})
	msg.Content, msg.CreatedAt = res.Content, s.clock()
	msg.InputTokens += res.Usage.InputTokens
	msg.OutputTokens += res.Usage.OutputTokens
	if err == nil && res.Paused != nil {
		msg.Pending = &Pending{Messages: res.Paused.Messages, Calls: res.Paused.Calls, Round: res.Paused.Round, System: p.System}
		call := res.Paused.Calls[0]
		if err = emit(Event{Type: EventToolApproval, ToolCallID: call.ID, ToolName: call.Name, ToolArgs: call.Args}); err == nil {
			err = errAwaitingApproval
		}
	}
	bound(&msg)
	return msg, err
}

// runTool passes one call of the model through the tool gate: its
// tool_call event is emitted once the gate decided to run or refuse it
// (not for a call that asks). It fails with the gate's errors (the
// policies or the budget could not be read) and emit's.
func (s *Service) runTool(ctx context.Context, userID string, call model.ToolCall, d toolgate.Decision, emit func(Event) error) (toolgate.Outcome, error) {
	announce := func() error { return emit(Event{Type: EventToolCall, ToolName: call.Name, ToolArgs: call.Args}) }
	if s.gate == nil {
		return toolgate.Outcome{Kind: toolgate.Run, ToolError: errs.E("chat.runTool", errs.Unavailable, "TOOLS_UNAVAILABLE", "tools are not available")}, announce()
	}
	c := toolgate.Call{Origin: toolgate.Chat, UserID: userID, ToolID: call.Name, Decision: d, Announce: announce}
	if err := json.Unmarshal(call.Args, &c.Input); err != nil || c.Input == nil {
		c.Input, c.InputError = nil, errs.E("chat.runTool", errs.Invalid, "INVALID_PARAMS", "tool arguments must be a JSON object")
	}
	return s.gate.Run(ctx, c)
}

// toolResult is the tool result the model gets for a call's outcome: the
// tool's output, or {"error": message} for a failed or refused call (a
// failed tool is reported to the model, not fatal to the reply).
func toolResult(out toolgate.Outcome) json.RawMessage {
	switch {
	case out.Kind == toolgate.Refuse:
		return errorResult(out.Message)
	case out.ToolError != nil:
		return errorResult(errs.MessageOf(out.ToolError, "the tool failed"))
	}
	b, err := json.Marshal(out.Output)
	if err != nil {
		return errorResult("the tool returned an unencodable result")
	}
	return b
}

func errorResult(msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return b
}

// toModelMessages converts the last MaxHistory messages and the new user
// message, with its attachments as the model takes them, to model
// messages. Earlier messages go as their text: their tool calls and
// attachments are not sent again.
func toModelMessages(history []Message, user Message, atts []model.Attachment) []model.Message {
	if len(history) > MaxHistory {
		history = history[len(history)-MaxHistory:]
	}
	out := make([]model.Message, 0, len(history)+1)
	for _, m := range history {
		if m.Content == "" {
			continue
		}
		out = append(out, model.Message{Role: m.Role, Content: m.Content})
	}
	return append(out, model.Message{Role: model.RoleUser, Content: user.Content, Attachments: atts})
}
