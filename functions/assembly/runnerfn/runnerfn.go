// Package runnerfn builds RunnerFunction, the executor of durable
// workflow runs, which the functions that start runs reach through
// runstart.Invoker: the Lambda Invoke API with InvocationType Event
// (asynchronous; a failed invocation goes to the function's dead-letter
// queue). It has no HTTP routes; infra/local runs the same Runner in
// process (runs.InProcess) behind the same workflow.Invoker.
package runnerfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/functions/assembly/mcpserversfn"
	"github.com/workflowchat/service/functions/assembly/runstart"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/usertools"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/condition"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// LogicalID is the function's resource name in template.yaml.
const LogicalID = "RunnerFunction"

// Required are the variables the bootstrap refuses to start without.
var Required = []string{"DATA_TABLE", "USERS_TABLE", "RATE_LIMITS_TABLE", "MCP_URL", "MCP_SERVICE_KEY", "BLOB_BUCKET"}

// Runner builds the runner over the Data table and the tool server's
// catalog (whose annotations say which tools are idempotent). Its steps
// pass the same tool gate as the workflow function's (Deps.Gate), for the
// run's user: a tool the user denies fails TOOL_DENIED, a metered tool
// reserves the user's budget and fails BUDGET_EXCEEDED when it has no
// room (both in the Users table). A run's values too large for its
// record go to the blob store (BLOB_BUCKET).
//
// The end of a run started by a schedule goes to its trigger (the run
// service's Ended, runstart.Build):
// the overlap marker is released and a buffered fire starts, handed to
// the runner (d.Runs locally; in Lambda this very function). It fails when
// that Invoker cannot be built.
func Runner(ctx context.Context, cfg config.Config, d assembly.Deps) (*runs.Runner, error) {
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	rs, err := runstart.Build(ctx, cfg, d, blobs, runstart.NoSchedules)
	if err != nil {
		return nil, err
	}
	// The attachments run inputs name, whose text steps read.
	files := blobstore.Attachments(cfg, d, blobs)
	// Steps' large inputs and results travel to and from the tool server
	// by reference, through the blob store.
	builtin := toolclient.NewCatalog(d.ToolClient(cfg, 0).WithBlobs(blobs), cfg.ToolsCacheTTL, d.Now)
	// Steps may name the user's own remote MCP tools, called with their
	// sealed secrets (the vault).
	caller, err := mcpserversfn.Caller(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	catalog := d.UserTools(cfg, builtin, caller, usertools.DefaultTTL)
	d.Blobs = blobs // the knowledge service of knowledge_search shares them
	steps, err := AgentSteps(ctx, cfg, d, catalog)
	if err != nil {
		return nil, err
	}
	return runs.NewRunner(runs.RunnerOptions{
		Store: rs.Store, Values: blobs, Files: files, Jobs: store.NewJobs(d.DB, cfg.DataTable), Tools: steps,
		StepTimeout: d.StepTimeout, Lease: cfg.GenerationLease, Now: d.Now, Ended: rs.Ended, Condition: condition.Eval,
		// run_workflow steps start their child runs through the one run
		// service, as every run starts.
		Children: rs.Service,
		// A remote tool whose server needs the user's authorization
		// leaves its run waiting, with a wait item the authorization's
		// callback finds (mcpserversfn).
		AuthWaits: rs.Store,
		Idempotent: func(ctx context.Context, toolID string) (bool, error) {
			t, err := catalog.Get(ctx, toolID)
			return t.Annotations.IdempotentHint, err
		},
		ComputeOnly: catalog.ComputeOnly,
	}), nil
}

// Lambda builds the handler of the Lambda bootstrap: one attempt of a run
// per event (the workflow.RunRef the Invoker sent). It fails when the
// configuration is malformed or lacks a required variable, or DynamoDB
// cannot be configured. The handler fails only when the run could not be
// read or recorded; Lambda then retries the event, and the attempt check
// makes a retry of a finished attempt a no-op.
func Lambda(ctx context.Context, getenv func(string) string) (func(context.Context, workflow.RunRef) error, error) {
	cfg, d, err := assembly.Load(ctx, getenv, Required...)
	if err != nil {
		return nil, err
	}
	if cfg.RunnerFunction == "" {
		// The runs this function starts (a trigger's buffered fire) go to
		// itself: a function cannot name itself in its own template.
		cfg.RunnerFunction = cfg.FunctionName
	}
	r, err := Runner(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	return assembly.Flushing(func(ctx context.Context, ref workflow.RunRef) error {
		d.Logger.InfoContext(ctx, "run attempt", "runId", ref.RunID, "attempt", ref.Attempt)
		return r.Run(ctx, ref)
	}), nil
}
