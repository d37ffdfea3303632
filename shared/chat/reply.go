package chat

import (
	"context"
	"encoding/json"
	"strings"
	"unicode"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/toolpolicy"
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
	Error      string `json:"error,omitempty"`
	Message    string `json:"message,omitempty"`
	// Content, on the error INTERRUPTED, is the reply as saved: a client
	// replaces what it shows with it (what it received after the last
	// saved event was lost with the process that generated it).
	Content *string `json:"content,omitempty"`
	// Reason says why an end event ended the stream: completed, stopped,
	// awaiting_approval or interrupted.
	Reason string `json:"reason,omitempty"`
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
// tool_result events, at most MaxToolRounds rounds (see generate).
func (s *Service) reply(ctx context.Context, history []Message, user Message, modelID, id string, emit func(Event) error) (Message, error) {
	msg := Message{ID: id, ChatID: user.ChatID, Role: model.RoleAssistant, ModelID: modelID, ReplyTo: user.ID, Status: StatusCompleted}
	return s.generate(ctx, msg, Pending{Messages: toModelMessages(history, user)}, "", emit)
}

// errAwaitingApproval ends a reply paused for a tool approval.
var errAwaitingApproval = errs.E("chat.reply", errs.Conflict, "AWAITING_APPROVAL", "the reply waits for a tool approval")

// generate goes on with reply msg from state p: first the tool calls of p
// (the first decided by decision when it is set), then model turns. It
// returns msg with its content the concatenation of the deltas (msg's own
// first), bounded to what one stored item holds (see bound), and Spent
// set. Each tool call follows the user's policy: allow runs it, deny gives
// the model a refusal as its result, ask pauses the reply: a tool_approval
// event, then errAwaitingApproval with msg.Pending set. Before every model
// call but a new reply's first (its caller checks that one) the user's
// budget is checked, counting the reply's own tokens: over budget, it ends
// with RateLimited BUDGET_EXCEEDED. On an error it returns the message
// generated so far with the error.
func (s *Service) generate(ctx context.Context, msg Message, p Pending, decision string, emit func(Event) error) (Message, error) {
	var specs []model.ToolSpec
	if s.tools != nil {
		var err error
		if specs, err = s.tools.Specs(ctx); err != nil {
			logWarn(ctx, "tools unavailable; replying without them", "err", err.Error())
			specs = nil
		}
	}
	userID := auth.UserID(ctx)
	req := model.Request{ModelID: msg.ModelID, System: SystemPrompt, Messages: p.Messages}
	var content strings.Builder
	content.WriteString(msg.Content)
	spent := &Spent{}
	msg.Spent, msg.Pending, msg.Decision = spent, nil, ""
	finish := func(err error) (Message, error) {
		msg.Content, msg.CreatedAt = content.String(), s.clock()
		msg.InputTokens += spent.InputTokens
		msg.OutputTokens += spent.OutputTokens
		bound(&msg)
		return msg, err
	}
	round, calls := p.Round, p.Calls
	for {
		for i, call := range calls {
			policy := toolpolicy.Allow
			switch {
			case i == 0 && decision == DecisionApproved:
			case i == 0 && decision == DecisionDenied:
				policy = toolpolicy.Deny
			case s.policies != nil:
				var err error
				if policy, err = s.policies.Policy(ctx, userID, call.Name); err != nil {
					return finish(err)
				}
			}
			if policy == toolpolicy.Ask {
				msg.Pending = &Pending{Messages: req.Messages, Calls: calls[i:], Round: round}
				if err := emit(Event{Type: EventToolApproval, ToolCallID: call.ID, ToolName: call.Name, ToolArgs: call.Args}); err != nil {
					return finish(err)
				}
				return finish(errAwaitingApproval)
			}
			if err := emit(Event{Type: EventToolCall, ToolName: call.Name, ToolArgs: call.Args}); err != nil {
				return finish(err)
			}
			result := refusal
			if policy != toolpolicy.Deny {
				result = s.runTool(ctx, call)
			}
			if err := emit(Event{Type: EventToolResult, ToolName: call.Name, Result: result}); err != nil {
				return finish(err)
			}
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ToolName: call.Name, ToolArgs: call.Args, Result: result})
			req.Messages = append(req.Messages, model.Message{Role: model.RoleTool, ToolCallID: call.ID, Content: string(result)})
		}
		if len(calls) > 0 {
			calls, round = nil, round+1
			if err := ctx.Err(); err != nil {
				return finish(err)
			}
		}
		req.Tools = specs
		if round == MaxToolRounds {
			req.Tools = nil // the last round must answer in text
		}
		if round > 0 {
			// A new reply's caller checked the budget before the first
			// call; later calls count what this reply has spent so far.
			if err := s.usage.Check(ctx, userID, int64(spent.InputTokens+spent.OutputTokens)); err != nil {
				return finish(err)
			}
		}
		sep := content.Len() > 0
		spent.Calls++
		res, err := s.models.Generate(ctx, req, func(c model.Chunk) error {
			if c.Delta == "" {
				return nil
			}
			delta := c.Delta
			if sep {
				if last := []rune(content.String()); !unicode.IsSpace(last[len(last)-1]) {
					delta = "\n\n" + delta
				}
				sep = false
			}
			content.WriteString(delta)
			return emit(Event{Type: EventContent, Delta: delta})
		})
		spent.InputTokens += res.Usage.InputTokens
		spent.OutputTokens += res.Usage.OutputTokens
		if err != nil {
			return finish(err)
		}
		if len(res.ToolCalls) == 0 || round == MaxToolRounds {
			return finish(nil)
		}
		req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Content: content.String(), ToolCalls: res.ToolCalls})
		calls = res.ToolCalls
	}
}

// refusal is the tool result a model gets for a call the user denied.
var refusal = errorResult("the user did not allow this tool call")

// runTool runs one call and returns its result, or {"error": message} when
// it fails; a failed tool is reported to the model, not fatal to the reply.
// A tool that calls a model (llm_generate) is refused when the user's
// budget is spent.
func (s *Service) runTool(ctx context.Context, call model.ToolCall) json.RawMessage {
	var args map[string]any
	if err := json.Unmarshal(call.Args, &args); err != nil || args == nil {
		return errorResult("tool arguments must be a JSON object")
	}
	if s.tools == nil {
		return errorResult("tools are not available")
	}
	if usage.CallsModel(call.Name) {
		if err := s.usage.Check(ctx, auth.UserID(ctx), 0); err != nil {
			return errorResult(errs.MessageOf(err, "the monthly token budget could not be checked"))
		}
	}
	out, err := s.tools.Run(ctx, call.Name, args)
	if err != nil {
		return errorResult(errs.MessageOf(err, "the tool failed"))
	}
	b, err := json.Marshal(out)
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
// message to model messages.
func toModelMessages(history []Message, user Message) []model.Message {
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
	return append(out, model.Message{Role: model.RoleUser, Content: user.Content})
}
