package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// ToolCatalog lists a user's workflows exposed as tools
// (store.Workflows).
type ToolCatalog interface {
	ExposedTools(ctx context.Context, userID string) ([]workflow.ToolEntry, error)
	// ExposedTool fails NotFound when userID has no workflow exposed as
	// toolName.
	ExposedTool(ctx context.Context, userID, toolName string) (workflow.ToolEntry, error)
}

// RunEngine is what Engine needs of the run engine (runs.Service).
type RunEngine interface {
	Start(ctx context.Context, req runs.StartRequest) (workflow.Run, error)
	Follow(ctx context.Context, runID string, after int64, yield func(workflow.RunEvent) error) error
	Run(ctx context.Context, runID string) (workflow.Run, error)
	// Value returns a value of the run whole (a spilled output read
	// back from the blob store).
	Value(ctx context.Context, runID string, v map[string]any) (map[string]any, error)
}

// Engine is the WorkflowTools of the run engine: each exposed workflow is
// a tool, and a call is a durable run (trigger mcp) like any other,
// executed by the runner through the one tool gate.
type Engine struct {
	Catalog ToolCatalog
	Runs    RunEngine
	// OutputSchema returns a tool's output schema (the tool catalog's),
	// from which a workflow's outputSchema is made; nil, or an error,
	// gives the plain {"type":"object"}.
	OutputSchema func(ctx context.Context, toolID string) (json.RawMessage, error)
	// Wait bounds how long a call waits for its run; zero means
	// MaxCallWait.
	Wait time.Duration
}

// Tools lists userID's exposed workflows: name the toolName, title the
// workflow's name, its description and inputSchema, and an outputSchema
// (see outputSchema). It fails when the catalog cannot be read.
func (e *Engine) Tools(ctx context.Context, userID string) ([]Tool, error) {
	entries, err := e.Catalog.ExposedTools(ctx, userID)
	if err != nil {
		return nil, errs.Wrap("mcpgateway.Tools", err)
	}
	out := make([]Tool, 0, len(entries))
	for _, en := range entries {
		desc := en.Description
		if desc == "" {
			desc = "Runs the workflow " + en.Name + "."
		}
		out = append(out, Tool{Name: en.ToolName, Title: en.Name, Description: desc,
			InputSchema: en.InputSchema, OutputSchema: e.outputSchema(ctx, en)})
	}
	return out, nil
}

// outputSchema describes what a call's structuredContent may be: the
// last step's output (its tool's output properties; a forEach step's
// {results: [...]}), or {runId, status} for a run that outlives the call.
// No property is required and others are allowed, so that both, and the
// empty output of a skipped last step, conform.
func (e *Engine) outputSchema(ctx context.Context, en workflow.ToolEntry) json.RawMessage {
	props := map[string]any{}
	switch {
	case en.LastForEach:
		props["results"] = map[string]any{"type": "array", "description": "The output of each of the last step's calls, in order."}
	case en.LastToolID != "" && e.OutputSchema != nil:
		if raw, err := e.OutputSchema(ctx, en.LastToolID); err == nil {
			var s struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if json.Unmarshal(raw, &s) == nil {
				for k, v := range s.Properties {
					props[k] = v
				}
			}
		}
	}
	for k, v := range map[string]string{"runId": "Set when the run outlived the call: its id.", "status": "Set when the run outlived the call: its status."} {
		if _, taken := props[k]; !taken {
			props[k] = map[string]any{"type": "string", "description": v}
		}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
	return b
}

// Call starts a durable run of userID's workflow exposed as name, with
// args as its input, tells progress of each step as it ends, and waits
// for the run up to Wait. The outcome: the last step's output; isError
// with the reason for arguments the workflow's inputSchema refuses, a rate
// limit, or a run that failed or was cancelled; or the run's id and
// status when it is still going. It fails NotFound TOOL_NOT_FOUND for a
// tool the user does not have, and with the storage error when the run
// cannot be started or read.
func (e *Engine) Call(ctx context.Context, userID, name string, args json.RawMessage, progress func(Progress)) (CallResult, error) {
	const op = "mcpgateway.Call"
	entry, err := e.Catalog.ExposedTool(ctx, userID, name)
	if errs.Is(err, errs.NotFound) {
		return CallResult{}, errUnknownTool
	}
	if err != nil {
		return CallResult{}, errs.Wrap(op, err)
	}
	var input map[string]any
	if err := json.Unmarshal(args, &input); err != nil || input == nil {
		return CallResult{IsError: true, Text: "invalid arguments: a JSON object is required"}, nil
	}
	run, err := e.Runs.Start(ctx, runs.StartRequest{WorkflowID: entry.WorkflowID, Input: input, Trigger: &workflow.Trigger{Type: workflow.TriggerMCP}})
	switch {
	case errs.Is(err, errs.Invalid):
		return CallResult{IsError: true, Text: refusal("invalid arguments", err)}, nil
	case errs.Is(err, errs.RateLimited):
		// The run engine counts every run it starts (RATE_LIMIT_RUNS).
		return CallResult{IsError: true, Text: refusal("too many workflow runs", err)}, nil
	case errs.Is(err, errs.NotFound), errs.Is(err, errs.Forbidden):
		return CallResult{}, errUnknownTool // deleted or unexposed since the lookup
	case err != nil:
		return CallResult{}, errs.Wrap(op, err)
	}

	wait := e.Wait
	if wait <= 0 {
		wait = MaxCallWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	notes := progressOf(run, progress)
	err = e.Runs.Follow(wctx, run.ID, 0, func(ev workflow.RunEvent) error {
		if ev.Type == workflow.EventStepWaiting && ev.ChildRunID == "" {
			return errWaiting // a person answers, maybe days later
		}
		notes.see(ev)
		return nil
	})
	if err != nil && !errors.Is(err, errWaiting) && wctx.Err() == nil {
		return CallResult{}, errs.Wrap(op, err)
	}
	// The client may be gone; the answer is still read for the log.
	dctx := context.WithoutCancel(ctx)
	final, err := e.Runs.Run(dctx, run.ID)
	if err != nil {
		return CallResult{}, errs.Wrap(op, err)
	}
	if !workflow.Active(final.Status) && progress != nil {
		// The wait may have ended before the follow saw the run's last
		// events (a loaded machine, a run ending just at the bound):
		// replay its whole log, now complete, so that every ended step
		// is told before the result, whatever the timing. Steps already
		// told are not told again.
		rctx, rcancel := context.WithTimeout(dctx, replayBound)
		err := e.Runs.Follow(rctx, run.ID, 0, func(ev workflow.RunEvent) error { notes.see(ev); return nil })
		rcancel()
		if err != nil {
			return CallResult{}, errs.Wrap(op, err)
		}
	}
	if n := len(final.Steps); final.Status == workflow.RunCompleted && n > 0 {
		if final.Steps[n-1].Output, err = e.Runs.Value(dctx, run.ID, final.Steps[n-1].Output); err != nil {
			return CallResult{}, errs.Wrap(op, err)
		}
	}
	return outcome(final), nil
}

// replayBound bounds the replay of a finished run's log: it is all
// stored, so the replay is a few reads.
const replayBound = 30 * time.Second

// progressNotes tells progress of each step of a run once, in the
// order of the run's log: one notification per ended step (completed or
// failed), counted from 1.
type progressNotes struct {
	progress func(Progress)
	total    int
	told     map[string]bool
}

// progressOf returns the notes of run for progress (nil: none are told).
func progressOf(run workflow.Run, progress func(Progress)) *progressNotes {
	return &progressNotes{progress: progress, total: len(run.Steps), told: map[string]bool{}}
}

// see tells progress of ev when it ends a step not told yet (an
// interrupted run's log may end a step again after its resume).
func (n *progressNotes) see(ev workflow.RunEvent) {
	if n.progress == nil || (ev.Type != workflow.EventStepCompleted && ev.Type != workflow.EventStepFailed) || n.told[ev.StepID] {
		return
	}
	n.told[ev.StepID] = true
	verb := "completed"
	if ev.Type == workflow.EventStepFailed {
		verb = "failed"
	}
	n.progress(Progress{Step: len(n.told), Total: n.total, Message: fmt.Sprintf("step %s (%s) %s", ev.StepID, ev.ToolID, verb)})
}

// outcome is the CallResult of run as it stands.
func outcome(run workflow.Run) CallResult {
	switch run.Status {
	case workflow.RunCompleted:
		out := map[string]any{}
		if n := len(run.Steps); n > 0 && run.Steps[n-1].Output != nil {
			out = run.Steps[n-1].Output
		}
		b, err := json.Marshal(out)
		if err != nil {
			return CallResult{IsError: true, Text: "the workflow run " + run.ID + " completed, but its output cannot be encoded"}
		}
		return CallResult{Output: b}
	case workflow.RunFailed, workflow.RunCancelled:
		reason := run.Error
		if reason == "" {
			reason = "no reason recorded"
		}
		return CallResult{IsError: true, Text: fmt.Sprintf("The workflow run %s %s: %s", run.ID, run.Status, reason)}
	}
	where := fmt.Sprintf("/api/workflows/%s/runs/%s", run.WorkflowID, run.ID)
	if run.Status == workflow.RunWaiting {
		for _, s := range run.Steps {
			if s.Status == workflow.StepWaiting {
				msg, _ := s.Input["message"].(string)
				return CallResult{RunID: run.ID, Status: run.Status, Text: fmt.Sprintf(
					"The workflow run %s is waiting for a person's answer at step %s: %q. Answer with POST %s/steps/%s/respond {\"approved\": true|false, \"values\": {...}}; follow it at GET %s.",
					run.ID, s.ID, msg, where, s.ID, where)}
			}
		}
	}
	return CallResult{RunID: run.ID, Status: run.Status, Text: fmt.Sprintf(
		"The workflow run %s is still %s. Follow it at GET %s (its events at .../events).", run.ID, run.Status, where)}
}

// errWaiting stops following a run at a human step.
var errWaiting = errors.New("the run waits for a person")

// refusal is what a client is told of a refused call: what, the error's
// client-safe message and field details, and when to retry.
func refusal(what string, err error) string {
	var b strings.Builder
	b.WriteString(what)
	b.WriteString(": ")
	msg := errs.MessageOf(err, "refused")
	b.WriteString(msg)
	var e *errs.Error
	if errors.As(err, &e) {
		for _, d := range e.Details {
			// Validation messages often list their details already.
			if detail := d.Field + ": " + d.Message; !strings.Contains(msg, detail) {
				b.WriteString("; " + detail)
			}
		}
		if e.RetryAfter > 0 {
			fmt.Fprintf(&b, " (retry in %d s)", e.RetryAfter)
		}
	}
	return b.String()
}
