package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/workflow"
)

// Runs starts the caller's workflows in a chat and follows their runs,
// for the stream's workflowId (package runs implements it): every run is
// durable, and a reply renders its run's events.
type Runs interface {
	// CheckWorkflow returns workflowID if it is the signed-in user's
	// workflow: NotFound WORKFLOW_NOT_FOUND, then Forbidden.
	CheckWorkflow(ctx context.Context, workflowID string) (workflow.Workflow, error)
	// CheckStart returns workflowID if a run of it can start without
	// input: CheckWorkflow's errors, then Invalid INVALID_INPUT when its
	// inputSchema requires input.
	CheckStart(ctx context.Context, workflowID string) (workflow.Workflow, error)
	// Start stores a durable run of the caller's workflow in the
	// caller's chat and hands it to a runner, without waiting.
	Start(ctx context.Context, chatID, workflowID string) (workflow.Run, error)
	// Follow yields the run's events from its first, until its last,
	// ctx's end or yield's first error, which it returns.
	Follow(ctx context.Context, runID string, yield func(workflow.RunEvent) error) error
	// Run returns the run as stored.
	Run(ctx context.Context, runID string) (workflow.Run, error)
	// CancelRun cancels the run if it is still active: Invalid
	// RUN_NOT_ACTIVE when it has finished.
	CancelRun(ctx context.Context, runID string) error
}

// renderRun is the reply of a stream with a workflowId: it starts a
// durable run of the workflow (chosen at StartStream) and renders the
// run's events as they are logged: one tool_call per step at its start
// and its tool_result at its end, then a summary of the outcome as
// content. A step with a retry is one call: its later attempts (and a
// resumed run's start of it again) add no tool_call, and its result is
// its last attempt's. A step that the reply leaves unfinished (the run
// cancelled, the reply stopped or cut, a wait for an authorization) gets
// a result saying so, as an error. The run goes on when the client
// leaves; a stopped reply cancels it. It returns the assistant message
// (the steps as its tool calls, the summary as its content) and the
// error that stopped it.
func (s *Service) renderRun(ctx context.Context, t *Turn, emit func(Event) error) (Message, error) {
	msg := Message{ID: t.ReplyID, ChatID: t.Chat.ID, Role: model.RoleAssistant, ModelID: t.ModelID, ReplyTo: t.User.ID, Status: StatusCompleted}
	run, err := s.runs.Start(ctx, t.Chat.ID, t.Workflow.ID)
	if err != nil {
		msg.CreatedAt = s.clock()
		return msg, err
	}
	// open is the step whose tool_call awaits its tool_result (steps run
	// one at a time), with its tool and arguments.
	var open struct{ stepID, toolID string }
	started := map[string]json.RawMessage{}
	result := func(toolID, stepID string, result json.RawMessage) error {
		open.stepID, open.toolID = "", ""
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ToolName: toolID, ToolArgs: started[stepID], Result: result})
		return emit(Event{Type: EventToolResult, ToolName: toolID, Result: result})
	}
	// unfinished answers the open step, if any, with the error why.
	unfinished := func(why string) error {
		if open.stepID == "" {
			return nil
		}
		return result(open.toolID, open.stepID, errorResult(why))
	}
	err = s.runs.Follow(ctx, run.ID, func(e workflow.RunEvent) error {
		switch e.Type {
		case workflow.EventStepWaiting:
			if e.ChildRunID != "" {
				return nil // a child run's wait: its end goes on with the run
			}
			if e.Reason == workflow.WaitAuthorization {
				if err := unfinished("the step waits for the authorization of its server (" + e.AuthorizationURL + "); the run goes on without this reply"); err != nil {
					return err
				}
			}
			// A person answers, maybe days later: the reply ends with the
			// question, and the run goes on without it.
			return errRunWaiting
		case workflow.EventStepStarted:
			if open.stepID == e.StepID {
				return nil // its next attempt, or its start again after a crash: the same call
			}
			if err := unfinished("the step did not finish"); err != nil {
				return err
			}
			args := jsonObject(e.Input)
			started[e.StepID] = args
			open.stepID, open.toolID = e.StepID, e.ToolID
			return emit(Event{Type: EventToolCall, ToolName: e.ToolID, ToolArgs: args})
		case workflow.EventStepCompleted, workflow.EventStepFailed:
			if open.stepID != e.StepID {
				if err := unfinished("the step did not finish"); err != nil {
					return err
				}
				// Failed before its tool ran (a template error), or a
				// child run's step: its call is announced now.
				started[e.StepID] = jsonObject(nil)
				if err := emit(Event{Type: EventToolCall, ToolName: e.ToolID, ToolArgs: started[e.StepID]}); err != nil {
					return err
				}
			}
			res := jsonObject(e.Output)
			if e.Type == workflow.EventStepFailed {
				res = errorResult(e.Error)
			}
			return result(e.ToolID, e.StepID, res)
		case workflow.EventRunCancelled:
			why := e.Error
			if why == "" {
				why = "the run was cancelled"
			}
			return unfinished("the step was cancelled: " + why)
		case workflow.EventRunCompleted, workflow.EventRunFailed:
			return unfinished("the step did not finish: " + e.Error)
		}
		return nil
	})
	msg.CreatedAt = s.clock()
	if errors.Is(err, errRunWaiting) {
		err = nil
	}
	if err != nil {
		why := "the reply ended before the step did; the run goes on"
		if errs.CodeOf(context.Cause(ctx)) == job.CodeStopRequested {
			s.cancelRun(ctx, run.ID) // a stop of the reply stops its run
			why = "the step was cancelled: the reply was stopped"
		}
		if uerr := unfinished(why); uerr != nil {
			logging.FromContext(ctx).WarnContext(ctx, "answer the step a reply left", "runId", run.ID, "err", uerr.Error())
		}
		return msg, err
	}
	if run, err = s.runs.Run(ctx, run.ID); err != nil {
		return msg, err
	}
	msg.Content = SummarizeWorkflow(t.Workflow.Name, run)
	msg.CreatedAt = s.clock()
	return msg, emit(Event{Type: EventContent, Delta: msg.Content})
}

// errRunWaiting ends the rendering of a run at a human step.
var errRunWaiting = errors.New("the run waits for an answer")

// cancelRun cancels the run a stopped or cut reply renders, with a
// detached context; a run that has finished meanwhile is left alone.
func (s *Service) cancelRun(ctx context.Context, runID string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	if err := s.runs.CancelRun(dctx, runID); err != nil && !errors.Is(err, context.Canceled) && !errs.Is(err, errs.Invalid) {
		logging.FromContext(ctx).WarnContext(ctx, "cancel the run of a stopped reply", "runId", runID, "err", err.Error())
	}
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

// SummarizeWorkflow is the assistant's deterministic summary of run o of
// the workflow name, e.g. `Workflow "Report" completed: fetch → {"body":"…"},
// total → {"value":3}.`
func SummarizeWorkflow(name string, o workflow.Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Workflow %q ", name)
	if len(o.Steps) == 0 && o.Status == "completed" {
		b.WriteString("completed: it has no steps.")
		return b.String()
	}
	var done, skipped []string
	var failed, waiting, retrying string
	for _, st := range o.Steps {
		switch st.Status {
		case "pending":
			if st.RetryAt != nil {
				retrying = fmt.Sprintf("%s (%s) at %s after attempt %d failed", st.ID, st.ToolID, st.RetryAt.UTC().Format(time.RFC3339), len(st.Attempts))
			}
		case "waiting":
			msg, _ := st.Input["message"].(string)
			waiting = fmt.Sprintf("%s: %q (answer with POST /api/workflows/%s/runs/%s/steps/%s/respond)", st.ID, clip(msg), o.WorkflowID, o.ID, st.ID)
		case "completed":
			done = append(done, st.ID+" → "+clip(string(jsonObject(workflow.WithoutKey(st.Output)))))
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
	case "waiting":
		if waiting == "" && retrying != "" {
			b.WriteString("will retry step " + retrying + ".")
		} else {
			b.WriteString("is waiting for your answer at step " + waiting + ".")
		}
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
