// Package eventbridge keeps the schedules of schedule triggers in Amazon
// EventBridge Scheduler: it implements trigger.Scheduler with one
// schedule per trigger, named after the trigger's id, in the stack's
// schedule group. The schedule's target is TriggerFireFunction, invoked
// with a trigger.FireEvent (the trigger id, its version, and the fire's
// scheduled time, which Scheduler fills in from its
// <aws.scheduler.scheduled-time> context attribute), through a role that
// may only invoke that function and send to the dead-letter queue, where
// Scheduler puts the events it could not deliver after its retries.
//
// A rate schedule gets a StartDate: EventBridge Scheduler fires a rate
// schedule without one at once, where a trigger's rate schedule fires one
// period after it was set. The StartDate is the schedule's next fire on
// that grid (never in the past, which Scheduler refuses). A one-time
// at(...) schedule is deleted by Scheduler after it fires
// (ActionAfterCompletion DELETE); the trigger stays, with no next fire.
package eventbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/schedule"
	"github.com/workflowchat/service/shared/trigger"
)

// API is the part of the EventBridge Scheduler client the Scheduler uses.
type API interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

// Config names the resources of template.yaml the schedules use.
type Config struct {
	// Group is the schedule group (SCHEDULE_GROUP).
	Group string
	// TargetARN is TriggerFireFunction's ARN (SCHEDULE_TARGET_ARN).
	TargetARN string
	// RoleARN is the role Scheduler assumes to invoke the target
	// (SCHEDULE_ROLE_ARN).
	RoleARN string
	// DeadLetterARN is the SQS queue of undelivered fires
	// (SCHEDULE_DLQ_ARN).
	DeadLetterARN string
}

// Delivery retries: Scheduler retries an invocation Lambda refuses
// (throttling) for at most an hour; a fire that late has lost its
// meaning, and goes to the dead-letter queue.
const (
	maxRetryAttempts = 5
	maxEventAge      = time.Hour
)

// ScheduledTimeAttribute is the context attribute Scheduler replaces in a
// target's input with the fire's scheduled time (RFC 3339).
const ScheduledTimeAttribute = "<aws.scheduler.scheduled-time>"

// Scheduler implements trigger.Scheduler on EventBridge Scheduler.
type Scheduler struct {
	api API
	cfg Config
	now func() time.Time
}

// New returns the Scheduler over api; now (nil: time.Now) places a rate
// schedule's StartDate.
func New(api API, cfg Config, now func() time.Time) *Scheduler {
	if now == nil {
		now = time.Now
	}
	return &Scheduler{api: api, cfg: cfg, now: now}
}

// Client returns the EventBridge Scheduler client of region, at endpoint
// when not empty (tests), with the default credential chain. It fails when
// the AWS configuration cannot be loaded.
func Client(ctx context.Context, region, endpoint string) (*scheduler.Client, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region))
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration for EventBridge Scheduler: %w", err)
	}
	return scheduler.NewFromConfig(cfg, func(o *scheduler.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

// definition is what CreateSchedule and UpdateSchedule both take.
type definition struct {
	expr, tz string
	start    *time.Time
	state    types.ScheduleState
	after    types.ActionAfterCompletion
	target   *types.Target
}

func (s *Scheduler) define(spec trigger.ScheduleSpec) (definition, error) {
	sch, err := schedule.Parse(spec.Expression, spec.Timezone)
	if err != nil {
		return definition{}, err
	}
	d := definition{expr: sch.String(), tz: sch.Timezone(), state: types.ScheduleStateEnabled, after: types.ActionAfterCompletionNone}
	if !spec.Enabled {
		d.state = types.ScheduleStateDisabled
	}
	switch sch.Kind() {
	case schedule.Rate:
		if next, ok := sch.Next(spec.Start, s.now()); ok {
			next = next.UTC()
			d.start = &next
		}
	case schedule.At:
		d.after = types.ActionAfterCompletionDelete
	}
	input, err := fireInput(spec)
	if err != nil {
		return definition{}, err
	}
	d.target = &types.Target{
		Arn:              aws.String(s.cfg.TargetARN),
		RoleArn:          aws.String(s.cfg.RoleARN),
		Input:            aws.String(input),
		DeadLetterConfig: &types.DeadLetterConfig{Arn: aws.String(s.cfg.DeadLetterARN)},
		RetryPolicy: &types.RetryPolicy{
			MaximumRetryAttempts:     aws.Int32(maxRetryAttempts),
			MaximumEventAgeInSeconds: aws.Int32(int32(maxEventAge / time.Second)),
		},
	}
	return d, nil
}

// fireInput is the target's input: a trigger.FireEvent whose scheduled
// time is Scheduler's context attribute. The attribute's angle brackets
// are written as they are (encoding/json would escape them, and Scheduler
// would not recognise it).
func fireInput(spec trigger.ScheduleSpec) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		TriggerID     string `json:"triggerId"`
		Version       int    `json:"version"`
		ScheduledTime string `json:"scheduledTime"`
	}{spec.TriggerID, spec.Version, ScheduledTimeAttribute})
	return strings.TrimSpace(buf.String()), err
}

// Put creates or replaces the schedule of spec.TriggerID: UpdateSchedule,
// and CreateSchedule when there is none (a new trigger, or a one-time
// schedule Scheduler deleted after it fired). Invalid, naming "schedule",
// when Scheduler refuses the expression; Unavailable when it throttles or
// fails.
func (s *Scheduler) Put(ctx context.Context, spec trigger.ScheduleSpec) error {
	const op = "eventbridge.Put"
	d, err := s.define(spec)
	if err != nil {
		return errs.Wrap(op, err)
	}
	name := aws.String(spec.TriggerID)
	update := func() error {
		_, err := s.api.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
			Name: name, GroupName: aws.String(s.cfg.Group), ScheduleExpression: aws.String(d.expr),
			ScheduleExpressionTimezone: aws.String(d.tz), StartDate: d.start, State: d.state, ActionAfterCompletion: d.after,
			FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff}, Target: d.target,
		})
		return err
	}
	err = update()
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		_, err = s.api.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
			Name: name, GroupName: aws.String(s.cfg.Group), ScheduleExpression: aws.String(d.expr),
			ScheduleExpressionTimezone: aws.String(d.tz), StartDate: d.start, State: d.state, ActionAfterCompletion: d.after,
			FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff}, Target: d.target,
			ClientToken: aws.String(fmt.Sprintf("%s-%d", spec.TriggerID, spec.Version)),
		})
		var conflict *types.ConflictException
		if errors.As(err, &conflict) {
			err = update() // created meanwhile
		}
	}
	return schedulerError(op, err)
}

// Delete deletes the schedule of triggerID; one already gone is not an
// error.
func (s *Scheduler) Delete(ctx context.Context, triggerID string) error {
	const op = "eventbridge.Delete"
	_, err := s.api.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(triggerID), GroupName: aws.String(s.cfg.Group)})
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		return nil
	}
	return schedulerError(op, err)
}

// schedulerError maps a Scheduler error: a refused expression is Invalid
// naming "schedule" (with Scheduler's message, which names only the
// expression); throttling, internal errors and quotas are Unavailable;
// anything else, a misconfiguration of the stack, Internal.
func schedulerError(op string, err error) error {
	if err == nil {
		return nil
	}
	var validation *types.ValidationException
	if errors.As(err, &validation) && strings.Contains(strings.ToLower(aws.ToString(validation.Message)), "expression") {
		return errs.Fields(op, errs.FieldError{Field: "schedule", Message: "refused by EventBridge Scheduler: " + aws.ToString(validation.Message)})
	}
	var (
		throttled *types.ThrottlingException
		internal  *types.InternalServerException
		quota     *types.ServiceQuotaExceededException
	)
	switch {
	case errors.As(err, &throttled), errors.As(err, &internal):
		e := errs.E(op, errs.Unavailable, "SCHEDULER_UNAVAILABLE", "the scheduler is temporarily unavailable; retry shortly").WithCause(err)
		e.RetryAfter = 1
		return e
	case errors.As(err, &quota):
		return errs.E(op, errs.Unavailable, "SCHEDULER_QUOTA", "no more schedules can be created in this deployment").WithCause(err)
	}
	return errs.E(op, errs.Internal, "", "internal error").WithCause(err)
}
