// Package schedules opens the schedules' keeper (a trigger.Scheduler) of
// the functions that create, change or delete schedule triggers
// (TriggersFunction, WorkflowsFunction and SweeperFunction, which delete
// a workflow's triggers): EventBridge Scheduler in AWS, the Data table's
// due index on the dev server. It is apart from runstart, which builds
// the one trigger service over the keeper it is given, so that only these
// functions link the EventBridge Scheduler client; the others give
// runstart.NoSchedules.
package schedules

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/trigger/eventbridge"
)

// Open returns the schedules' keeper: EventBridge Scheduler when
// SCHEDULE_GROUP is set (AWS; SCHEDULER_ENDPOINT in tests), else the Data
// table's due index (store.DueSchedules), which the dev server polls. It
// fails when the AWS configuration cannot be loaded.
func Open(ctx context.Context, cfg config.Config, d assembly.Deps) (trigger.Scheduler, error) {
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
