// Package runstart is how the functions that start durable workflow runs
// hand them to the runner: the Invoker (the Lambda Invoke API with
// InvocationType Event, through shared/awsapi; the in-process runner on
// the dev server), the run engine's trigger.RunStarter (Starter) and the
// hook that tells a schedule trigger its run ended (TriggerEnds). Apart
// from runnerfn so that what starts runs does not link what executes
// them (the expression language of a step's `if`, the tool gate).
package runstart

import (
	"context"
	"encoding/json"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/awsapi"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// TriggerEnds returns the hook that tells a schedule trigger that a run
// it started has ended (trigger.Service.RunEnded: the overlap marker is
// released, a buffered fire starts through Starter). Other runs are left
// alone. It fails when Starter does.
func TriggerEnds(ctx context.Context, cfg config.Config, d assembly.Deps) (func(context.Context, workflow.Run) error, error) {
	starter, err := Starter(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	triggers := trigger.NewService(trigger.Options{Store: store.NewTriggers(d.DB, cfg.DataTable), Runs: starter, Now: d.Now, Logger: d.Logger})
	return func(ctx context.Context, run workflow.Run) error {
		if run.Trigger == nil || run.Trigger.Type != workflow.TriggerSchedule || run.Trigger.TriggerID == "" {
			return nil
		}
		return triggers.RunEnded(auth.ActingFor(ctx, run.UserID), run.Trigger.TriggerID, run.ID)
	}, nil
}

// Starter returns the run engine's trigger.RunStarter: d.Triggered when
// set, else durable runs handed to the runner through Invoker (in the
// runner function itself, to this very function), counted against
// RATE_LIMIT_RUNS. It fails when the Invoker cannot be built.
func Starter(ctx context.Context, cfg config.Config, d assembly.Deps) (trigger.RunStarter, error) {
	if d.Triggered != nil {
		return d.Triggered, nil
	}
	invoker, err := Invoker(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	svc := runs.NewService(runs.Options{Store: store.NewRuns(d.DB, cfg.DataTable), Jobs: store.NewJobs(d.DB, cfg.DataTable),
		Workflows: store.NewWorkflows(d.DB, cfg.DataTable), Invoker: invoker, Lease: cfg.GenerationLease, Now: d.Now})
	return TriggeredRuns{Runs: svc, Limiter: d.Limiter(cfg), Rule: cfg.RateLimitRuns}, nil
}

// TriggeredRuns is the trigger.RunStarter of the run engine: a trigger's
// run is a durable run with the trigger's run id, its input checked
// against the workflow's inputSchema, counted against the user's run rate
// limit unless it exists already.
type TriggeredRuns struct {
	Runs    *runs.Service
	Limiter *ratelimit.Limiter
	Rule    ratelimit.Rule
}

// StartTriggered starts req's run for req.UserID (ctx acts for them), or
// answers for the run of that id if it exists: its id while it is
// active, Conflict RUN_ENDED once it has ended. Errors: NotFound
// WORKFLOW_NOT_FOUND, Forbidden, Invalid INVALID_INPUT, RateLimited.
func (t TriggeredRuns) StartTriggered(ctx context.Context, req trigger.TriggeredRun) (string, error) {
	const op = "runs.StartTriggered"
	ctx = auth.ActingFor(ctx, req.UserID)
	existing := func(r workflow.Run) (string, error) {
		if workflow.Active(r.Status) {
			return r.ID, nil
		}
		return "", errs.E(op, errs.Conflict, trigger.CodeRunEnded, "the trigger's run has ended")
	}
	if req.RunID != "" {
		if r, err := t.Runs.Run(ctx, req.RunID); err == nil {
			return existing(r)
		}
	}
	if err := t.Limiter.Allow(ctx, req.UserID, t.Rule); err != nil {
		return "", errs.Wrap(op, err)
	}
	run, err := t.Runs.Start(ctx, runs.StartRequest{WorkflowID: req.WorkflowID, Input: req.Input, RunID: req.RunID,
		Trigger: &workflow.Trigger{Type: req.TriggerType, TriggerID: req.TriggerID}})
	if errs.CodeOf(err) == workflow.CodeRunExists {
		// A concurrent start of the same id won.
		r, rerr := t.Runs.Run(ctx, req.RunID)
		if rerr != nil {
			return "", errs.Wrap(op, err)
		}
		return existing(r)
	}
	if err != nil {
		return "", errs.Wrap(op, err)
	}
	return run.ID, nil
}

// LambdaInvoker hands runs to the runner function through the Lambda
// Invoke API, asynchronously (InvocationType Event): Lambda queues the
// event and answers 202 at once.
type LambdaInvoker struct {
	Client   *awsapi.Client
	Function string
}

// Invoke queues ref for the runner function. It fails when Lambda does
// not accept the event (after the client's retries of throttling and
// server errors) or cannot be reached.
func (l LambdaInvoker) Invoke(ctx context.Context, ref workflow.RunRef) error {
	payload, err := json.Marshal(ref)
	if err != nil {
		return err
	}
	return l.Client.Invoke(ctx, l.Function, payload)
}

// Invoker returns d.Runs when set (the dev server), else the LambdaInvoker
// of RUNNER_FUNCTION. The AWS credentials are loaded at the first run
// handed over, not at init: a cold start that starts no run does not pay
// for them. It fails when RUNNER_FUNCTION is not set.
func Invoker(ctx context.Context, cfg config.Config, d assembly.Deps) (workflow.Invoker, error) {
	if d.Runs != nil {
		return d.Runs, nil
	}
	if err := cfg.Require("RUNNER_FUNCTION"); err != nil {
		return nil, err
	}
	return LambdaInvoker{Client: assembly.AWSAPI(cfg), Function: cfg.RunnerFunction}, nil
}
