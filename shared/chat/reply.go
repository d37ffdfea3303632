package chat

import (
	"context"
	"encoding/json"
	"strings"
	"unicode"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
)

// Event is one event of a reply, as docs/openapi.yaml's StreamEvent gives them.
type Event struct {
	Type      string          `json:"type"`
	MessageID string          `json:"messageId,omitempty"`
	Delta     string          `json:"delta,omitempty"`
	ToolName  string          `json:"toolName,omitempty"`
	ToolArgs  json.RawMessage `json:"toolArgs,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	Message   string          `json:"message,omitempty"`
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
	EventEnd        = "end"
	EventError      = "error"
)

// SystemPrompt frames every chat.
const SystemPrompt = "You are the assistant of Workflow Chat, a service where users build and run workflows of tools. " +
	"Answer helpfully and concisely. When a tool would help, call it with arguments that match its input schema."

// reply generates the assistant's reply to user after history: model turns
// streamed as content events, tool calls run and reported as tool_call and
// tool_result events, at most MaxToolRounds rounds. It returns the
// assistant message with id, its content the concatenation of the deltas,
// bounded to what one stored item holds (see bound), and ModelCalls set.
// Before every model call but the first (its caller checks that one) the
// user's budget is checked, counting the reply's own tokens: over budget,
// it ends with RateLimited BUDGET_EXCEEDED.
// On an error it returns the message generated so far with the error.
func (s *Service) reply(ctx context.Context, history []Message, user Message, modelID, id string, emit func(Event) error) (Message, error) {
	msg := Message{ID: id, ChatID: user.ChatID, Role: model.RoleAssistant, ModelID: modelID, ReplyTo: user.ID, Status: StatusCompleted}
	var specs []model.ToolSpec
	if s.tools != nil {
		var err error
		if specs, err = s.tools.Specs(ctx); err != nil {
			logWarn(ctx, "tools unavailable; replying without them", "err", err.Error())
			specs = nil
		}
	}
	req := model.Request{ModelID: modelID, System: SystemPrompt, Messages: toModelMessages(history, user)}
	var content strings.Builder
	var usage model.Usage // this reply's, summed over its model calls
	finish := func(err error) (Message, error) {
		msg.Content, msg.InputTokens, msg.OutputTokens, msg.CreatedAt = content.String(), usage.InputTokens, usage.OutputTokens, s.clock()
		bound(&msg)
		return msg, err
	}
	for round := 0; ; round++ {
		req.Tools = specs
		if round == MaxToolRounds {
			req.Tools = nil // the last round must answer in text
		}
		if round > 0 {
			// The caller checked the budget before the first call; later
			// calls count what this reply has spent so far.
			if err := s.usage.Check(ctx, auth.UserID(ctx), int64(usage.InputTokens+usage.OutputTokens)); err != nil {
				return finish(err)
			}
		}
		sep := content.Len() > 0
		msg.ModelCalls++
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
		usage = usage.Add(res.Usage)
		if err != nil {
			return finish(err)
		}
		if len(res.ToolCalls) == 0 || round == MaxToolRounds {
			return finish(nil)
		}
		req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Content: content.String(), ToolCalls: res.ToolCalls})
		for _, call := range res.ToolCalls {
			if err := emit(Event{Type: EventToolCall, ToolName: call.Name, ToolArgs: call.Args}); err != nil {
				return finish(err)
			}
			result := s.runTool(ctx, call)
			if err := emit(Event{Type: EventToolResult, ToolName: call.Name, Result: result}); err != nil {
				return finish(err)
			}
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ToolName: call.Name, ToolArgs: call.Args, Result: result})
			req.Messages = append(req.Messages, model.Message{Role: model.RoleTool, ToolCallID: call.ID, Content: string(result)})
		}
		if err := ctx.Err(); err != nil {
			return finish(err)
		}
	}
}

// runTool runs one call and returns its result, or {"error": message} when
// it fails; a failed tool is reported to the model, not fatal to the reply.
func (s *Service) runTool(ctx context.Context, call model.ToolCall) json.RawMessage {
	var args map[string]any
	if err := json.Unmarshal(call.Args, &args); err != nil || args == nil {
		return errorResult("tool arguments must be a JSON object")
	}
	if s.tools == nil {
		return errorResult("tools are not available")
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
