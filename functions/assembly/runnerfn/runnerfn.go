// Package runnerfn builds RunnerFunction, the executor of durable
// workflow runs, and the Invoker through which WorkflowsFunction and the
// sweeper hand it a run: the Lambda Invoke API with InvocationType Event
// (asynchronous; a failed invocation goes to the function's dead-letter
// queue). It has no HTTP routes; infra/local runs the same Runner in
// process (runs.InProcess) behind the same workflow.Invoker.
package runnerfn

import (
	"context"
	"encoding/json"
	"fmt"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// LogicalID is the function's resource name in template.yaml.
const LogicalID = "RunnerFunction"

// Required are the variables the bootstrap refuses to start without.
var Required = []string{"DATA_TABLE", "USERS_TABLE", "MCP_URL", "MCP_SERVICE_KEY"}

// Runner builds the runner over the Data table and the tool server's
// catalog (whose annotations say which tools are idempotent). Its steps
// pass the same tool gate as the workflow function's (Deps.Gate), for the
// run's user: a tool the user denies fails TOOL_DENIED, a metered tool
// reserves the user's budget and fails BUDGET_EXCEEDED when it has no
// room (both in the Users table).
func Runner(cfg config.Config, d assembly.Deps) *runs.Runner {
	catalog := toolclient.NewCatalog(d.ToolClient(cfg, 0), cfg.ToolsCacheTTL, d.Now)
	return runs.NewRunner(runs.RunnerOptions{
		Store: store.NewRuns(d.DB, cfg.DataTable), Jobs: store.NewJobs(d.DB, cfg.DataTable), Tools: d.Gate(cfg, catalog).Steps(),
		StepTimeout: d.StepTimeout, Lease: cfg.GenerationLease, Now: d.Now,
		Idempotent: func(ctx context.Context, toolID string) (bool, error) {
			t, err := catalog.Get(ctx, toolID)
			return t.Annotations.IdempotentHint, err
		},
	})
}

// LambdaAPI is the part of the Lambda client the Invoker uses.
type LambdaAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// LambdaInvoker hands runs to the runner function through the Lambda
// Invoke API, asynchronously (InvocationType Event): Lambda queues the
// event and answers 202 at once.
type LambdaInvoker struct {
	Client   LambdaAPI
	Function string
}

// Invoke queues ref for the runner function. It fails when the call
// fails or Lambda does not accept the event (a status other than 202).
func (l LambdaInvoker) Invoke(ctx context.Context, ref workflow.RunRef) error {
	payload, err := json.Marshal(ref)
	if err != nil {
		return err
	}
	out, err := l.Client.Invoke(ctx, &lambda.InvokeInput{FunctionName: &l.Function, InvocationType: lambdatypes.InvocationTypeEvent, Payload: payload})
	if err != nil {
		return fmt.Errorf("invoke %s: %w", l.Function, err)
	}
	if out.StatusCode != 202 {
		return fmt.Errorf("invoke %s: status %d", l.Function, out.StatusCode)
	}
	return nil
}

// Invoker returns d.Runs when set (the dev server), else the LambdaInvoker
// of RUNNER_FUNCTION. It fails when RUNNER_FUNCTION is not set or the AWS
// configuration cannot be loaded.
func Invoker(ctx context.Context, cfg config.Config, d assembly.Deps) (workflow.Invoker, error) {
	if d.Runs != nil {
		return d.Runs, nil
	}
	if err := cfg.Require("RUNNER_FUNCTION"); err != nil {
		return nil, err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region))
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration for the Lambda client: %w", err)
	}
	return LambdaInvoker{Client: lambda.NewFromConfig(awsCfg), Function: cfg.RunnerFunction}, nil
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
	r := Runner(cfg, d)
	return func(ctx context.Context, ref workflow.RunRef) error {
		d.Logger.InfoContext(ctx, "run attempt", "runId", ref.RunID, "attempt", ref.Attempt)
		return r.Run(ctx, ref)
	}, nil
}
