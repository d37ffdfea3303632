package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/model"
)

// WorkflowRunner runs the caller's workflows in a chat, for the stream's
// workflowId. The workflow package implements it.
type WorkflowRunner interface {
	// PrepareRun checks that workflowID is the signed-in user's workflow
	// (NotFound WORKFLOW_NOT_FOUND, then Forbidden) and returns the run to
	// execute in chat chatID. Nothing is recorded yet.
	PrepareRun(ctx context.Context, chatID, workflowID string) (PreparedRun, error)
	// CheckWorkflow checks that workflowID is the signed-in user's
	// workflow: NotFound WORKFLOW_NOT_FOUND, then Forbidden.
	CheckWorkflow(ctx context.Context, workflowID string) error
}

// PreparedRun is a workflow ready to run in a chat.
type PreparedRun struct {
	WorkflowName string
	// Execute records a run and executes the workflow's steps in order,
	// telling observe when each starts and ends. A client that leaves
	// (ctx done) cancels the run. The error is only for a run that could
	// not be recorded; the outcome is in WorkflowOutcome.
	Execute func(ctx context.Context, observe func(WorkflowStep)) (WorkflowOutcome, error)
}

// WorkflowStep is the start (Done false) or end (Done true) of one step of a
// running workflow. Input is the resolved input; Output and Error are set
// at the end.
type WorkflowStep struct {
	Done   bool
	StepID string
	ToolID string
	Input  map[string]any
	Output map[string]any
	Error  string
	Status string
}

// WorkflowOutcome is a finished run: its id, status (completed, failed,
// cancelled), error and steps.
type WorkflowOutcome struct {
	RunID  string
	Status string
	Error  string
	Steps  []WorkflowStepOutcome
}

// WorkflowStepOutcome is one step of a finished run.
type WorkflowStepOutcome struct {
	ID     string
	ToolID string
	Status string
	Output map[string]any
	Error  string
}

// runWorkflow executes t's workflow as the reply: tool_call and
// tool_result per step, then a summary of the outcome as content. It
// returns the assistant message (the steps as its tool calls, the summary
// as its content) and the error that stopped it.
func (s *Service) runWorkflow(ctx context.Context, t *Turn, emit func(Event) error) (Message, error) {
	msg := Message{ID: t.ReplyID, ChatID: t.Chat.ID, Role: model.RoleAssistant, ModelID: t.ModelID, ReplyTo: t.User.ID, Status: StatusCompleted}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		emitErr error
		started = map[string]json.RawMessage{}
	)
	send := func(e Event) {
		if emitErr != nil {
			return
		}
		if err := emit(e); err != nil {
			emitErr = err
			cancel() // the client is gone: cancel the run
		}
	}
	outcome, err := t.Workflow.Execute(ctx, func(st WorkflowStep) {
		args := jsonObject(st.Input)
		if !st.Done {
			started[st.StepID] = args
			send(Event{Type: EventToolCall, ToolName: st.ToolID, ToolArgs: args})
			return
		}
		if a, ok := started[st.StepID]; ok {
			args = a
		} else {
			send(Event{Type: EventToolCall, ToolName: st.ToolID, ToolArgs: args})
		}
		result := errorResult(st.Error)
		if st.Error == "" {
			result = jsonObject(st.Output)
		}
		send(Event{Type: EventToolResult, ToolName: st.ToolID, Result: result})
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ToolName: st.ToolID, ToolArgs: args, Result: result})
	})
	msg.CreatedAt = s.clock()
	if err != nil {
		return msg, err
	}
	if emitErr != nil {
		return msg, emitErr
	}
	summary := SummarizeWorkflow(t.Workflow.WorkflowName, outcome)
	msg.Content = summary
	msg.CreatedAt = s.clock()
	if err := emit(Event{Type: EventContent, Delta: summary}); err != nil {
		return msg, err
	}
	return msg, nil
}

func jsonObject(m map[string]any) json.RawMessage {
	if m == nil {
		return json.RawMessage(`{}`)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return errorResult("unencodable value")
	}
	return b
}

// maxSummaryValue caps one output's text in a workflow summary.
const maxSummaryValue = 200

// SummarizeWorkflow is the assistant's deterministic summary of a run of
// the workflow name, e.g. `Workflow "Report" completed: fetch → {"body":"…"},
// total → {"value":3}.`
func SummarizeWorkflow(name string, o WorkflowOutcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Workflow %q ", name)
	if len(o.Steps) == 0 && o.Status == "completed" {
		b.WriteString("completed: it has no steps.")
		return b.String()
	}
	var done, skipped []string
	var failed string
	for _, st := range o.Steps {
		switch st.Status {
		case "completed":
			done = append(done, st.ID+" → "+clip(string(jsonObject(st.Output))))
		case "failed":
			failed = st.ID + " (" + st.ToolID + "): " + st.Error
		case "skipped":
			skipped = append(skipped, st.ID)
		}
	}
	switch o.Status {
	case "completed":
		b.WriteString("completed: " + strings.Join(done, ", ") + ".")
	case "failed":
		b.WriteString("failed")
		if failed != "" {
			b.WriteString(" at step " + failed)
		} else if o.Error != "" {
			b.WriteString(": " + o.Error)
		}
		b.WriteString(".")
		if len(done) > 0 {
			b.WriteString(" Completed: " + strings.Join(done, ", ") + ".")
		}
		if len(skipped) > 0 {
			b.WriteString(" Skipped: " + strings.Join(skipped, ", ") + ".")
		}
	case "cancelled":
		fmt.Fprintf(&b, "was cancelled after %d of %d steps.", len(done), len(o.Steps))
		if len(done) > 0 {
			b.WriteString(" Completed: " + strings.Join(done, ", ") + ".")
		}
	default:
		b.WriteString("ended as " + o.Status + ".")
	}
	return b.String()
}

func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxSummaryValue {
		return s
	}
	r := []rune(s)
	return string(r[:maxSummaryValue]) + "…"
}
