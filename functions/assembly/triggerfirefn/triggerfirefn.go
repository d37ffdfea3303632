// Package triggerfirefn builds TriggerFireFunction, the target of the
// schedule triggers' EventBridge Scheduler schedules: each invocation is
// one fire (a trigger.FireEvent), handled by trigger.Service.Fire. It has
// no HTTP routes and is invoked by nothing but Scheduler (through the
// stack's scheduler role). The dev server fires the same handler from its
// poller (infra/local).
package triggerfirefn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/functions/assembly/runstart"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/trigger"
)

// LogicalID is the function's resource name in template.yaml.
const LogicalID = "TriggerFireFunction"

// Required are the variables the bootstrap refuses to start without.
var Required = []string{"DATA_TABLE", "RATE_LIMITS_TABLE", "RUNNER_FUNCTION", "BLOB_BUCKET"}

// Service returns the trigger service that fires schedules and releases
// the overlap markers (RunEnded): the function's one trigger service,
// built with the run service (runstart.Build: a fire's input naming an
// attachment is checked, a large one kept in the blob store). A fire
// creates, changes and deletes no schedule: the function keeps none
// (runstart.NoSchedules). It fails when the blob store or the run service
// cannot be built.
func Service(ctx context.Context, cfg config.Config, d assembly.Deps) (*trigger.Service, error) {
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	rs, err := runstart.Build(ctx, cfg, d, blobs, runstart.NoSchedules)
	if err != nil {
		return nil, err
	}
	// The one built with the run service, whose runs' ends it is told of.
	return rs.Triggers, nil
}

// Lambda builds the handler of the Lambda bootstrap: one fire per event.
// It fails when the configuration is malformed, lacks DATA_TABLE, or
// DynamoDB cannot be configured. The handler fails only when retrying may
// help (storage or the engine unavailable); Lambda then retries the event
// (the fire's run id makes a retry start no second run), and after its
// retries the event goes to the dead-letter queue.
func Lambda(ctx context.Context, getenv func(string) string) (func(context.Context, trigger.FireEvent) error, error) {
	cfg, d, err := assembly.Load(ctx, getenv, Required...)
	if err != nil {
		return nil, err
	}
	svc, err := Service(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	return assembly.Flushing(func(ctx context.Context, ev trigger.FireEvent) error {
		outcome, err := svc.Fire(ctx, ev)
		d.Logger.InfoContext(ctx, "fire", "triggerId", ev.TriggerID, "scheduledTime", ev.ScheduledTime, "outcome", outcome)
		return err
	}), nil
}
