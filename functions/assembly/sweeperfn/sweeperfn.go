// Package sweeperfn builds SweeperFunction: the sweeper that ends the
// streamed replies whose lease ran out (their process died) and resumes
// the durable workflow runs whose lease ran out. It has no
// HTTP routes: Lambda runs it on an EventBridge schedule, and infra/local
// runs the same sweeper on a ticker.
package sweeperfn

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/functions/assembly/chatcore"
	"github.com/workflowchat/service/functions/assembly/knowledgecore"
	"github.com/workflowchat/service/functions/assembly/runstart"
	"github.com/workflowchat/service/functions/assembly/schedules"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/workflow"
)

// LogicalID is the function's resource name in template.yaml.
const LogicalID = "SweeperFunction"

// Required are the variables the bootstrap refuses to start without;
// SCHEDULE_GROUP because the erasure of an account deletes its triggers'
// schedules, in AWS EventBridge Scheduler's (see schedules.Open).
var Required = []string{"DATA_TABLE", "RATE_LIMITS_TABLE", "RUNNER_FUNCTION", "BLOB_BUCKET", "USERS_TABLE", "SESSIONS_TABLE", "OAUTH_TABLE",
	"SCHEDULE_GROUP"}

// Sweeper builds the sweeper over the Data table: the jobs whose lease
// expired (store.Jobs) handed to their kind's handler, a streamed reply's
// to chat.Service.InterruptExpired, a workflow run's to the run service's
// Resume (runstart.Build: the one run store, with the blob store its
// large values spill to, handing the run to the runner through
// runstart.Invoker). It fails when the blob store or that Invoker cannot
// be built (RUNNER_FUNCTION missing).
func Sweeper(ctx context.Context, cfg config.Config, d assembly.Deps) (*job.Sweeper, error) {
	if d.Runs == nil {
		// Runs are resumed through the runner function.
		if err := cfg.Require("RUNNER_FUNCTION"); err != nil {
			return nil, err
		}
	}
	jobs := store.NewJobs(d.DB, cfg.DataTable)
	// The end of an interrupted schedule run may start its trigger's
	// buffered fire: through the one run service, with its blob store
	// and attachment checks.
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	// The workflows of an erased account are deleted with their
	// triggers and schedules, through the one trigger service.
	sched, err := schedules.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	rs, err := runstart.Build(ctx, cfg, d, blobs, sched)
	if err != nil {
		return nil, err
	}
	// The chats of an erased account are deleted as their owner's delete
	// does: with their attachments, their replies' and runs' values and
	// their search index entries (the one chat service; this function
	// makes no reply, so it gives no models and no tools).
	chats := chatcore.Service(cfg, d, rs, blobs, blobstore.Attachments(cfg, d, blobs), chatcore.Replies{})
	// An indexing of a knowledge base document whose process died is
	// started again (knowledgecore.Service: the process's one service;
	// built here, it embeds with the built-in embedder only, the one
	// this function links: knowledgecore.SweeperEmbedder).
	kn, err := knowledgecore.Service(ctx, cfg, d, knowledgecore.SweeperEmbedder(cfg))
	if err != nil {
		return nil, err
	}
	// The workflows of an erased account are deleted as their owner's
	// delete does: with their triggers (and schedules) and runs.
	workflows := rs.Workflows(cfg, d, nil)
	eraser := Eraser(cfg, d, chats, workflows, blobs, kn)
	return job.NewSweeper(jobs, map[string]job.Handler{chat.GenerationKind: chats.InterruptExpired, workflow.RunKind: rs.Resume,
		knowledge.JobKind: kn.Resume}, d.Now, d.Logger).
		// The purges of deleted documents' and knowledge bases' vectors
		// and segments that are due (a first pass that failed, a last one),
		// before the erasures: an erasure's last pass, later than the
		// purges' of its knowledge bases, then finds them done.
		Also("knowledge purges", kn.SweepPurges).
		Also("account erasure", eraser.Sweep).
		Also("account export", Exporter(cfg, d, blobs).Sweep), nil
}

// Lambda builds the scheduled handler of the Lambda bootstrap: one sweep
// per EventBridge event. It fails when the configuration is malformed,
// lacks DATA_TABLE, or DynamoDB cannot be configured.
func Lambda(ctx context.Context, getenv func(string) string) (func(context.Context, events.EventBridgeEvent) error, error) {
	cfg, d, err := assembly.Load(ctx, getenv, Required...)
	if err != nil {
		return nil, err
	}
	sw, err := Sweeper(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	fn := getenv("AWS_LAMBDA_FUNCTION_NAME")
	return assembly.Flushing(func(ctx context.Context, ev events.EventBridgeEvent) error {
		n, err := sw.Sweep(ctx)
		d.Logger.InfoContext(ctx, "sweep", append([]any{"event", ev.ID, "ended", n}, InterruptedJobs(fn, n, d.Now())...)...)
		return err
	}), nil
}

// MetricNamespace and InterruptedJobsMetric name the CloudWatch metric of
// the interrupted jobs (the streamed replies and durable runs a sweep
// ended or resumed because their process died), with the dimension
// FunctionName; template.yaml's InterruptedJobsAlarm reads it.
const (
	MetricNamespace       = "WorkflowChat"
	InterruptedJobsMetric = "InterruptedJobs"
)

// InterruptedJobs returns the attributes that make a JSON log line (the
// Lambda log format) a record of CloudWatch's embedded metric format: n
// interrupted jobs of function fn at t, which CloudWatch Logs turns into
// the metric InterruptedJobsMetric in MetricNamespace. Without a function
// name (not on Lambda) it returns none.
func InterruptedJobs(fn string, n int, t time.Time) []any {
	if fn == "" {
		return nil
	}
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	type directive struct {
		Namespace  string     `json:"Namespace"`
		Dimensions [][]string `json:"Dimensions"`
		Metrics    []metric   `json:"Metrics"`
	}
	return []any{
		slog.Group("_aws",
			slog.Int64("Timestamp", t.UnixMilli()),
			slog.Any("CloudWatchMetrics", []directive{{Namespace: MetricNamespace, Dimensions: [][]string{{"FunctionName"}},
				Metrics: []metric{{Name: InterruptedJobsMetric, Unit: "Count"}}}})),
		slog.String("FunctionName", fn),
		slog.Int(InterruptedJobsMetric, n),
	}
}
