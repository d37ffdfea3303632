// Package toolloop is the loop of a model with native tool calling, the
// one a chat reply and a workflow's agent step both run: a model turn,
// the tool calls it made (each run by the caller, through the tool gate),
// their results appended to the conversation, another turn, until the
// model answers without a tool call or the rounds run out (the last turn
// is offered no tools, so that it answers in text). Every model turn is
// metered: the user's budget is reserved before it and settled after
// (usage.Meter.Generate).
package toolloop

import (
	"context"
	"strings"
	"unicode"

	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/usage"
)

// State is where a loop stands: the content written so far, the
// conversation the next model turn gets, the calls of the last turn not
// yet run (the loop runs them first), and how many rounds of tool calls
// are done. A paused loop (Result.Paused) goes on from its State.
type State struct {
	Content  string
	Messages []model.Message
	Calls    []model.ToolCall
	Round    int
}

// CallOutcome is how the caller's Call ended: Result is what the model
// gets as the call's result; Pause, instead, stops the loop before this
// call (it is kept in Result.Paused.Calls).
type CallOutcome struct {
	Result string
	Pause  bool
}

// Options configure one Run.
type Options struct {
	Meter  *usage.Meter
	Models usage.Models
	UserID string
	// ModelID and System are those of every model turn; Tools are offered
	// on every turn but the one at MaxRounds.
	ModelID string
	System  string
	Tools   []model.ToolSpec
	// MaxRounds bounds the rounds of tool calls: the turn after that many
	// is offered no tools. A loop makes at most MaxRounds+1 model turns.
	MaxRounds int
	// Held, when set, is the reservation of the first model turn (made
	// before the loop, so that a call over budget is refused before
	// anything else); the loop settles it or gives it back.
	Held *usage.Reservation
	// Delta receives the text the content grows by, as the model streams
	// it: a turn's text after earlier content starts with a blank line.
	// Its error ends the loop.
	Delta func(string) error
	// Call runs one tool call of the model. Its error ends the loop.
	Call func(ctx context.Context, call model.ToolCall) (CallOutcome, error)
}

// Result is the end of a Run: the content (State.Content's and what the
// turns wrote), the usage of the model turns, how many model turns were
// made, and, for a loop a Call paused, the State to go on from.
type Result struct {
	Content string
	Usage   model.Usage
	Turns   int
	Paused  *State
}

// Run goes on from st: first st's calls, then model turns, until a turn
// makes no tool call or the round MaxRounds ends. It returns what was
// done so far with an error: Call's, Delta's, ctx's, or a model turn's
// (usage.Meter.Generate: RateLimited BUDGET_EXCEEDED when the budget has
// no room, the model's failures). o.Held is settled by the first model
// turn, or given back when none is made.
func Run(ctx context.Context, o Options, st State) (Result, error) {
	held := o.Held
	defer func() { o.Meter.Release(ctx, held) }() // a reservation whose call was not made
	var res Result
	var content strings.Builder
	content.WriteString(st.Content)
	messages, calls, round := st.Messages, st.Calls, st.Round
	end := func(err error) (Result, error) {
		res.Content = content.String()
		return res, err
	}
	for {
		for i, call := range calls {
			out, err := o.Call(ctx, call)
			if err != nil {
				return end(err)
			}
			if out.Pause {
				res.Paused = &State{Messages: messages, Calls: calls[i:], Round: round}
				res.Paused.Content = content.String()
				return end(nil)
			}
			messages = append(messages, model.Message{Role: model.RoleTool, ToolCallID: call.ID, Content: out.Result})
		}
		if len(calls) > 0 {
			calls, round = nil, round+1
			if err := ctx.Err(); err != nil {
				return end(err)
			}
		}
		req := model.Request{ModelID: o.ModelID, System: o.System, Messages: messages, Tools: o.Tools}
		if round >= o.MaxRounds {
			req.Tools = nil // the last round must answer in text
		}
		sep := content.Len() > 0
		turn, err := o.Meter.Generate(ctx, o.Models, o.UserID, req, held, func(c model.Chunk) error {
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
			return o.Delta(delta)
		})
		held = nil // settled by Generate
		res.Turns++
		res.Usage = res.Usage.Add(turn.Usage)
		if err != nil {
			return end(err)
		}
		if len(turn.ToolCalls) == 0 || round >= o.MaxRounds {
			return end(nil)
		}
		messages = append(messages, model.Message{Role: model.RoleAssistant, Content: content.String(), ToolCalls: turn.ToolCalls})
		calls = turn.ToolCalls
	}
}
