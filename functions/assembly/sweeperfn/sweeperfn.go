// Package sweeperfn builds SweeperFunction: the sweeper that ends the
// streamed replies whose lease ran out (their process died). It has no
// HTTP routes: Lambda runs it on an EventBridge schedule, and infra/local
// runs the same sweeper on a ticker.
package sweeperfn

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/lease"
	"github.com/workflowchat/service/shared/store"
)

// LogicalID is the function's resource name in template.yaml.
const LogicalID = "SweeperFunction"

// Required are the variables the bootstrap refuses to start without.
var Required = []string{"DATA_TABLE"}

// Sweeper builds the sweeper over the Data table: the expired leases of
// active work (store.Leases) handed to their kind's handler, a streamed
// reply's to chat.Service.InterruptExpired.
func Sweeper(cfg config.Config, d assembly.Deps) *lease.Sweeper {
	chats := chat.NewService(chat.Options{Store: store.NewChats(d.DB, cfg.DataTable), Now: d.Now})
	return lease.NewSweeper(store.NewLeases(d.DB, cfg.DataTable),
		map[string]lease.Handler{chat.GenerationKind: chats.InterruptExpired}, d.Now, d.Logger)
}

// Lambda builds the scheduled handler of the Lambda bootstrap: one sweep
// per EventBridge event. It fails when the configuration is malformed,
// lacks DATA_TABLE, or DynamoDB cannot be configured.
func Lambda(ctx context.Context, getenv func(string) string) (func(context.Context, events.EventBridgeEvent) error, error) {
	cfg, err := assembly.Config(getenv, Required...)
	if err != nil {
		return nil, err
	}
	d, err := assembly.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sw := Sweeper(cfg, d)
	return func(ctx context.Context, ev events.EventBridgeEvent) error {
		n, err := sw.Sweep(ctx)
		d.Logger.InfoContext(ctx, "sweep", "event", ev.ID, "ended", n)
		return err
	}, nil
}
