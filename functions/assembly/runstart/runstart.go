// Package runstart builds the run service, in one place with every
// option, for every function that starts, follows or ends workflow runs
// (chats, the chat stream, workflows, MCP, triggers, the runner, the
// sweeper): the Data table's runs with their large values in the blob
// store, the jobs' logs, the workflows, the Invoker that hands runs to
// the runner (the Lambda Invoke API with InvocationType Event, through
// shared/awsapi; the in-process runner on the dev server), the lease and
// clock, the hook that tells a schedule trigger its run ended, the
// attachments run inputs name, and the run rate limit (RATE_LIMIT_RUNS),
// applied inside the service's start whatever started the run (a parent
// run's run_workflow step included: the runner starts child runs
// through this service, and every end of a run passes through its
// RunEnded, which resumes a waiting parent). It builds the one trigger
// service with it, with every option (the two depend on each other: a
// trigger starts runs, a run's end releases its trigger's overlap
// marker), over the schedules' keeper the function gives
// (schedules.Open where the function keeps schedules, NoSchedules
// elsewhere) and the webhook secrets of the configuration. Apart
// from runnerfn so that what starts runs does not link what executes
// them (the expression language of a step's `if`, the tool gate).
package runstart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/awsapi"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/webhook"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// Runs is the run service of a function and what is built with it.
type Runs struct {
	// Service is the run service. Where no runner can be reached (no
	// RUNNER_FUNCTION: ChatsFunction, which only checks workflows) its
	// starts fail RUNNER_UNAVAILABLE.
	Service *runs.Service
	// Triggered is the triggers' trigger.RunStarter: Service's
	// runs.Triggered.
	Triggered trigger.RunStarter
	// Triggers is the one trigger service of the function: the Data
	// table's triggers, the schedules' keeper Build was given, Triggered,
	// the webhook secrets (Secrets), PUBLIC_BASE_URL, the clock, the
	// logger and the audit log. Ended tells it of a schedule's run's end;
	// the trigger routes, what fires schedules and what deletes a
	// workflow's triggers use it too.
	Triggers *trigger.Service
	// Ended tells a schedule trigger that a run it started has ended
	// (trigger.Service.RunEnded: the overlap marker is released, a
	// buffered fire starts through Triggered); other runs are left alone.
	// Service ends runs through it, and the runner and the sweeper are
	// given it.
	Ended func(ctx context.Context, run workflow.Run) error
	// Store is the Data table's runs, deleting a run's values with it
	// from the blob store: the one run store, which the runner, the
	// sweeper and the workflow service are given too.
	Store *store.Runs
	// Resume is the sweeper's handler of the runs whose lease expired
	// (runs.ResumeExpired) over Store, the blob store (a run it records
	// spills its large values, as the runner does, rather than cutting
	// them), the Invoker, the lease, the clock and Ended. Nil where no
	// runner can be reached.
	Resume job.Handler
}

// Build builds the run service and the trigger service of the
// configuration over the function's blob store (blobstore.Open) and
// schedules' keeper (schedules.Open, or NoSchedules; nil is NoSchedules);
// see the package comment. It fails when the Invoker cannot be built or
// WEBHOOK_SIGNING_KEY is malformed.
func Build(ctx context.Context, cfg config.Config, d assembly.Deps, blobs blob.Store, sched trigger.Scheduler) (Runs, error) {
	if sched == nil {
		sched = NoSchedules
	}
	secrets, err := Secrets(cfg)
	if err != nil {
		return Runs{}, err
	}
	var invoker workflow.Invoker
	if d.Runs != nil || cfg.RunnerFunction != "" {
		if invoker, err = Invoker(ctx, cfg, d); err != nil {
			return Runs{}, err
		}
	}
	// The service ends runs through the trigger service, which starts
	// buffered fires through the service: the hook reads it once built.
	// It also passes the end on to the run's parent and children
	// (runs.Service.RunEnded: a waiting parent resumes, an active child
	// of a cancelled run is cancelled).
	var (
		triggers *trigger.Service
		svc      *runs.Service
	)
	ended := func(ctx context.Context, run workflow.Run) error {
		err := svc.RunEnded(ctx, run)
		if run.Trigger == nil || run.Trigger.Type != workflow.TriggerSchedule || run.Trigger.TriggerID == "" {
			return err
		}
		return errors.Join(err, triggers.RunEnded(auth.ActingFor(ctx, run.UserID), run.Trigger.TriggerID, run.ID))
	}
	runStore := store.NewRuns(d.DB, cfg.DataTable).WithBlobs(blobs)
	svc = runs.NewService(runs.Options{
		Store: runStore, Jobs: store.NewJobs(d.DB, cfg.DataTable),
		Workflows: store.NewWorkflows(d.DB, cfg.DataTable), Invoker: invoker, Lease: cfg.GenerationLease, Now: d.Now,
		Ended: ended, Values: blobs, Files: blobstore.Attachments(cfg, d, blobs),
		Limiter: d.Limiter(cfg), Rule: cfg.RateLimitRuns,
		// The runs waiting for a remote server's authorization
		// (USER#/MCPWAIT# items), which Authorized continues.
		AuthWaits: runStore,
	})
	started := runs.Triggered{Service: svc}
	triggers = trigger.NewService(trigger.Options{Store: store.NewTriggers(d.DB, cfg.DataTable), Scheduler: sched, Runs: started,
		Secrets: secrets, PublicBaseURL: cfg.PublicBaseURL, Now: d.Now, Logger: d.Logger, Audit: d.Audit(cfg),
		Erasures: store.NewDeletedAccounts(d.DB, cfg.DataTable)})
	var resume job.Handler
	if invoker != nil {
		resume = runs.ResumeExpired(runs.ResumeOptions{Store: runStore, Values: blobs, Invoker: invoker, Lease: cfg.GenerationLease, Now: d.Now, Ended: ended})
	}
	return Runs{Service: svc, Triggered: started, Triggers: triggers, Ended: ended, Store: runStore, Resume: resume}, nil
}

// Workflows returns the workflow service over the Data table's
// workflows, r's run store (a workflow's runs are deleted with it) and
// trigger service (its triggers and their schedules too: r must have been
// built over schedules.Open), checking the steps and inputSchema of
// creates and updates with defs. defs nil refuses them: the sweeper's,
// which only deletes the workflows of erased accounts, and does not link
// what checks steps (the tool catalog, the expression language).
func (r Runs) Workflows(cfg config.Config, d assembly.Deps, defs workflow.Definitions) *workflow.Service {
	return workflow.NewService(workflow.Options{Store: store.NewWorkflows(d.DB, cfg.DataTable), Runs: r.Store, Triggers: r.Triggers,
		Definitions: defs, Now: d.Now})
}

// NoSchedules is the schedules' keeper of the functions that keep no
// schedules (no SCHEDULE_GROUP: they fire schedules, or end the runs
// schedules started, and never create, change or delete a trigger):
// its Put and Delete fail Internal, naming what is missing, instead of
// touching a keeper the function has no access to.
var NoSchedules trigger.Scheduler = noSchedules{}

type noSchedules struct{}

func (noSchedules) Put(context.Context, trigger.ScheduleSpec) error {
	return errs.E("runstart.NoSchedules.Put", errs.Internal, "", "internal error").
		WithCause(errors.New("trigger: this function keeps no schedules (SCHEDULE_GROUP)"))
}

func (noSchedules) Delete(context.Context, string) error {
	return errs.E("runstart.NoSchedules.Delete", errs.Internal, "", "internal error").
		WithCause(errors.New("trigger: this function keeps no schedules (SCHEDULE_GROUP)"))
}

// HasWebhookKey reports whether the configuration has a key for the
// webhook secrets (see Secrets).
func HasWebhookKey(cfg config.Config) bool { return len(webhookKey(cfg)) > 0 }

// Secrets returns the webhook secrets of WEBHOOK_SIGNING_KEY or, outside
// Lambda when it is unset, of a key derived from MCP_SERVICE_KEY; nil
// when there is neither (the trigger service's webhook operations then
// fail Internal: only TriggersFunction serves them, and it requires the
// key). It fails when the key is malformed.
func Secrets(cfg config.Config) (*webhook.Secrets, error) {
	key := webhookKey(cfg)
	if len(key) == 0 {
		return nil, nil
	}
	s, err := webhook.NewSecrets(key)
	if err != nil {
		return nil, fmt.Errorf("config: WEBHOOK_SIGNING_KEY: %w", err)
	}
	return s, nil
}

func webhookKey(cfg config.Config) []byte {
	key := []byte(cfg.WebhookSigningKey)
	if len(key) == 0 && !cfg.InLambda && cfg.MCPServiceKey != "" {
		key = webhook.DeriveKey(cfg.MCPServiceKey)
	}
	return key
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
