// Package triggersfn builds TriggersFunction: the triggers of workflows
// (CRUD under /api/workflows/{workflowId}/triggers) and the webhook route
// POST /hooks/{triggerId}. It also holds what the other functions that
// touch triggers share: the scheduler of the configuration (Scheduler),
// the webhook secrets (Secrets); the runs triggers start are the one run
// service's (runstart.Build), with its blob store and attachment checks.
package triggersfn

import (
	"context"
	"errors"
	"fmt"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/functions/assembly/runstart"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/trigger/eventbridge"
	"github.com/workflowchat/service/shared/webhook"
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

func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	svc, err := Service(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	return trigger.Routes(svc, d.Auth(cfg)), nil
}

// Service returns the whole trigger service of the configuration: the
// Data table's triggers, Scheduler, Secrets and the run service's
// Triggered. It fails when the scheduler, the secrets, the blob store or
// the run service cannot be built.
func Service(ctx context.Context, cfg config.Config, d assembly.Deps) (*trigger.Service, error) {
	sched, err := Scheduler(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	secrets, err := Secrets(cfg)
	if err != nil {
		return nil, err
	}
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	rs, err := runstart.Build(ctx, cfg, d, blobs)
	if err != nil {
		return nil, err
	}
	return trigger.NewService(trigger.Options{Store: store.NewTriggers(d.DB, cfg.DataTable), Scheduler: sched, Runs: rs.Triggered,
		Secrets: secrets, PublicBaseURL: cfg.PublicBaseURL, Now: d.Now, Logger: d.Logger, Audit: d.Audit(cfg)}), nil
}

// Deleter returns the trigger service that only deletes triggers with
// their schedules: what WorkflowsFunction needs to delete a workflow's
// triggers. It fails when the scheduler cannot be built.
func Deleter(ctx context.Context, cfg config.Config, d assembly.Deps) (*trigger.Service, error) {
	sched, err := Scheduler(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	return trigger.NewService(trigger.Options{Store: store.NewTriggers(d.DB, cfg.DataTable), Scheduler: sched, Now: d.Now, Logger: d.Logger}), nil
}

// Scheduler returns the schedules' keeper: EventBridge Scheduler when
// SCHEDULE_GROUP is set (AWS; SCHEDULER_ENDPOINT in tests), else the Data
// table's due index (store.DueSchedules), which the dev server polls. It
// fails when the AWS configuration cannot be loaded.
func Scheduler(ctx context.Context, cfg config.Config, d assembly.Deps) (trigger.Scheduler, error) {
	if cfg.ScheduleGroup == "" {
		return store.NewDueSchedules(d.DB, cfg.DataTable, d.Now), nil
	}
	client, err := eventbridge.Client(ctx, cfg.Region, cfg.SchedulerEndpoint)
	if err != nil {
		return nil, err
	}
	return eventbridge.New(client, eventbridge.Config{Group: cfg.ScheduleGroup, TargetARN: cfg.ScheduleTargetARN,
		RoleARN: cfg.ScheduleRoleARN, DeadLetterARN: cfg.ScheduleDLQARN}, d.Now), nil
}

// Secrets returns the webhook secrets of WEBHOOK_SIGNING_KEY or, outside
// Lambda when it is unset, of a key derived from MCP_SERVICE_KEY. It
// fails when there is neither.
func Secrets(cfg config.Config) (*webhook.Secrets, error) {
	key := []byte(cfg.WebhookSigningKey)
	if len(key) == 0 && !cfg.InLambda && cfg.MCPServiceKey != "" {
		key = webhook.DeriveKey(cfg.MCPServiceKey)
	}
	if len(key) == 0 {
		return nil, errors.New("config: required but not set: WEBHOOK_SIGNING_KEY")
	}
	s, err := webhook.NewSecrets(key)
	if err != nil {
		return nil, fmt.Errorf("config: WEBHOOK_SIGNING_KEY: %w", err)
	}
	return s, nil
}
