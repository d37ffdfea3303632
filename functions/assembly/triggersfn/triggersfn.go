// Package triggersfn builds TriggersFunction: the triggers of workflows
// (CRUD under /api/workflows/{workflowId}/triggers) and the webhook route
// POST /hooks/{triggerId}, over the function's one trigger service, which
// runstart.Build builds with the run service, over the schedules' keeper
// of the configuration (schedules.Open) and the webhook secrets.
package triggersfn

import (
	"context"
	"errors"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/functions/assembly/runstart"
	"github.com/workflowchat/service/functions/assembly/schedules"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/trigger"
)

// Triggers is TriggersFunction. In AWS its schedules are EventBridge
// Scheduler's, so it requires the SCHEDULE_* variables, and the webhook
// secrets' key.
var Triggers = assembly.Function{
	LogicalID: "TriggersFunction",
	Required: []string{"SESSIONS_TABLE", "DATA_TABLE", "RATE_LIMITS_TABLE", "RUNNER_FUNCTION", "BLOB_BUCKET", "WEBHOOK_SIGNING_KEY",
		"SCHEDULE_GROUP", "SCHEDULE_TARGET_ARN", "SCHEDULE_ROLE_ARN", "SCHEDULE_DLQ_ARN"},
	Build: build,
}

// build mounts the trigger routes over the function's trigger service.
// It fails when there is no webhook key (runstart.Secrets: this function
// serves the webhooks), or the schedules' keeper, the blob store or the
// run service cannot be built.
func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	if !runstart.HasWebhookKey(cfg) {
		return nil, errors.New("config: required but not set: WEBHOOK_SIGNING_KEY")
	}
	sched, err := schedules.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	rs, err := runstart.Build(ctx, cfg, d, blobs, sched)
	if err != nil {
		return nil, err
	}
	return trigger.Routes(rs.Triggers, d.Auth(cfg)), nil
}
