// Command triggerfire is TriggerFireFunction: EventBridge Scheduler
// invokes it at each fire of a schedule trigger, with the trigger's id,
// version and the scheduled time; it applies the trigger's overlap policy
// and starts the run. The dev server fires the same handler from its
// poller.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/triggerfirefn"
	"github.com/workflowchat/service/shared/trigger"
)

func main() {
	assembly.Main(newHandler, func(h func(context.Context, trigger.FireEvent) error) { lambda.Start(h) })
}

// newHandler builds the function from its builder, triggerfirefn.Lambda.
func newHandler(ctx context.Context, getenv func(string) string) (func(context.Context, trigger.FireEvent) error, error) {
	return triggerfirefn.Lambda(ctx, getenv)
}
