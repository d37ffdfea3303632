// Package trigger decides when a workflow runs without a person pressing
// start, and with what input: schedule triggers (an EventBridge Scheduler
// expression in a time zone, with an overlap policy) and webhook triggers
// (POST /hooks/{triggerId}, signed with the trigger's secret). It owns
// the triggers' CRUD routes, the webhook route, the fire handler that a
// schedule's fire reaches (the same code in AWS, where EventBridge
// Scheduler invokes TriggerFireFunction, and locally, where Poller reads
// the due schedules on a ticker), and the end-of-run hook that releases a
// trigger's overlap marker.
//
// A run is started through RunStarter, which the run engine implements:
// it validates the input against the workflow's inputSchema, applies the
// user's run rate limit and records the run's trigger. Trigger chooses
// each run's id before starting it, so that every start can be retried
// without starting a second run: a schedule's fire has the id derived
// from the trigger and the scheduled time (FireRunID), a webhook call the
// id stored with its idempotency key.
//
// The package imports no AWS code: Store is the DynamoDB storage
// (store.Triggers), Scheduler the schedules (eventbridge.Scheduler in AWS,
// store.DueSchedules locally).
package trigger

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// The types of triggers.
const (
	TypeSchedule = "schedule"
	TypeWebhook  = "webhook"
)

// The overlap policies of a schedule trigger: what a fire does while a
// run it started is still active.
const (
	// OverlapSkip skips the fire (the default).
	OverlapSkip = "skip"
	// OverlapAllow starts another run.
	OverlapAllow = "allow"
	// OverlapBufferOne keeps the fire waiting, at most one, and starts it
	// when the active run ends; further fires are skipped.
	OverlapBufferOne = "buffer_one"
)

// Limits of the triggers.
const (
	// MaxPerUser is how many triggers a user may have, over all their
	// workflows.
	MaxPerUser = 20
	// MaxInputBytes bounds a schedule trigger's input, as JSON.
	MaxInputBytes = 64 << 10
	// MaxWebhookBody bounds a webhook request's body (256 KiB), which is
	// the run's input.
	MaxWebhookBody = 256 << 10
	// DeliveryTTL is how long a webhook call's idempotency key (or
	// signature) is remembered.
	DeliveryTTL = 24 * time.Hour
	// MaxIdempotencyKey bounds the Idempotency-Key header.
	MaxIdempotencyKey = 255
	// MaxSecretGrace bounds how long a rotated secret stays valid.
	MaxSecretGrace = 24 * time.Hour
)

// Error codes of the trigger operations.
const (
	CodeTriggerNotFound  = "TRIGGER_NOT_FOUND"
	CodeWorkflowNotFound = "WORKFLOW_NOT_FOUND"
	// CodeTriggerLimit: the user has MaxPerUser triggers (409).
	CodeTriggerLimit = "TRIGGER_LIMIT"
	// CodeNotWebhook: rotate-secret on a schedule trigger (400).
	CodeNotWebhook = "NOT_A_WEBHOOK_TRIGGER"
	// CodeIdempotencyKeyReused: an Idempotency-Key sent again with another
	// body within DeliveryTTL (409).
	CodeIdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED"
	// CodeInvalidIdempotencyKey: an Idempotency-Key that is empty, too
	// long or not printable ASCII (400).
	CodeInvalidIdempotencyKey = "INVALID_IDEMPOTENCY_KEY"
	// CodeConcurrentUpdate is the Conflict UpdateTrigger reports when the
	// trigger changed since it was read; the service re-reads and retries.
	CodeConcurrentUpdate = "CONCURRENT_UPDATE"
	// CodeRunEnded is the code of the Conflict a RunStarter returns when
	// the run id it is asked to start names a run that has already ended.
	CodeRunEnded = "RUN_ENDED"
)

// Trigger is a trigger of a workflow. Schedule fields are set for schedule
// triggers, the nonces for webhook triggers.
type Trigger struct {
	ID, UserID, WorkflowID string
	Type                   string
	Enabled                bool

	// Schedule triggers.
	Schedule string // the expression
	Timezone string // IANA name
	Input    map[string]any
	Overlap  string
	// ScheduleStart is when the expression was last set: a rate schedule
	// fires one period after it, and every period after that.
	ScheduleStart time.Time

	// Webhook triggers: the stored part of the secret (webhook.Secrets
	// derives the secret from it), and during a rotation's grace period
	// the previous one.
	SecretNonce       string
	PreviousNonce     string
	PreviousExpiresAt *time.Time

	// Overlap markers, written only by conditional updates: the run this
	// trigger started that is still active (skip and buffer_one), since
	// when, and the fire waiting for it (buffer_one).
	ActiveRunID   string
	ActiveSince   *time.Time
	BufferedRunID string

	// LastFire is the outcome of the latest fire or webhook call.
	LastFire *Fire

	// WorkflowVersion, when not 0, is the version of the workflow the
	// trigger's runs run (pinned); 0 runs the latest at each fire.
	WorkflowVersion int

	// Version counts the changes of the configuration (not of the
	// markers): a schedule's fire carries the version it was set with,
	// and a fire of an older version is stale and ignored.
	Version   int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// The outcomes of a fire.
const (
	OutcomeStarted  = "started"
	OutcomeSkipped  = "skipped"  // a run of the trigger was active (skip, or buffer_one with one waiting)
	OutcomeBuffered = "buffered" // buffer_one: waits for the active run
	OutcomeFailed   = "failed"   // the run could not start; Error says why
)

// Fire is what became of a fire or a webhook call.
type Fire struct {
	At      time.Time  `json:"at"`
	RunID   string     `json:"runId,omitempty"`
	Outcome string     `json:"outcome"`
	Error   *FireError `json:"error,omitempty"`
}

// FireError is why a run could not start: the code and client-safe
// message of the RunStarter's error.
type FireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// TriggeredRun is a run a trigger asks the engine to start.
type TriggeredRun struct {
	UserID, WorkflowID string
	// Input is the run's input: a schedule trigger's input, a webhook
	// call's body.
	Input map[string]any
	// TriggerType is "schedule" or "webhook"; TriggerID the trigger. The
	// run records them as its trigger.
	TriggerType, TriggerID string
	// RunID is the id the run must have, chosen by the trigger so that a
	// repeated start (a retried fire, a repeated webhook call) starts
	// nothing new.
	RunID string
	// WorkflowVersion, when not 0, is the workflow's version the run
	// runs (the trigger's pin); 0: the latest.
	WorkflowVersion int
}

// RunStarter starts durable runs of workflows; the run engine implements
// it.
type RunStarter interface {
	// StartTriggered starts a durable run of req.WorkflowID for
	// req.UserID with req.Input, recording req's trigger, and returns the
	// run id (req.RunID). It validates the input against the workflow's
	// inputSchema (Invalid INVALID_INPUT) and applies the user's run rate
	// limit (RateLimited). When a run with id req.RunID already exists it
	// starts and counts nothing: it returns (req.RunID, nil) while that run
	// is active, and a Conflict with code CodeRunEnded once it has ended.
	// NotFound when the workflow is gone.
	StartTriggered(ctx context.Context, req TriggeredRun) (runID string, err error)
}

// ScheduleSpec is a schedule as a Scheduler keeps it.
type ScheduleSpec struct {
	TriggerID string
	// Version is the trigger's version; fires carry it back.
	Version    int
	Expression string
	Timezone   string
	// Start is when the expression was set (Trigger.ScheduleStart).
	Start   time.Time
	Enabled bool
}

// Scheduler keeps one schedule per schedule trigger and makes it fire:
// EventBridge Scheduler in AWS (a schedule whose target is
// TriggerFireFunction, with a FireEvent as its input), the Data table's
// due index locally (store.DueSchedules, read by Poller).
type Scheduler interface {
	// Put creates or replaces the schedule of spec.TriggerID (disabled
	// when spec.Enabled is false). Invalid, naming "schedule", when the
	// scheduler refuses the expression; Unavailable when it cannot be
	// reached.
	Put(ctx context.Context, spec ScheduleSpec) error
	// Delete removes the schedule of triggerID; one already gone is not an
	// error.
	Delete(ctx context.Context, triggerID string) error
}

// FireEvent is one fire of a schedule: the input of the EventBridge
// schedule's target, and what Poller hands Service.Fire locally.
type FireEvent struct {
	TriggerID string `json:"triggerId"`
	// Version is the trigger version the schedule was set with.
	Version int `json:"version"`
	// ScheduledTime is when the fire was due.
	ScheduledTime time.Time `json:"scheduledTime"`
}

// runNamespace is the UUID namespace of the fires' run ids.
var runNamespace = uuid.MustParse("6f1c2a3e-8d4b-5e7f-9a0b-1c2d3e4f5a6b")

// FireRunID returns the run id of the fire of triggerID scheduled at at: a
// UUID (version 5) of both, so that a fire delivered twice starts one run.
func FireRunID(triggerID string, at time.Time) string {
	return uuid.NewSHA1(runNamespace, []byte(triggerID+"@"+at.UTC().Format(time.RFC3339))).String()
}

// Delivery is a webhook call remembered for DeliveryTTL under one of the
// keys it is deduplicated by: each verified (t, v1) pair of its
// signature, and its Idempotency-Key when it has one.
type Delivery struct {
	TriggerID string
	// KeyHash is the SHA-256 (hex) of the key: "sig:<t>.<v1>" or
	// "key:<Idempotency-Key>".
	KeyHash string
	// BodyHash is the SHA-256 (hex) of the body.
	BodyHash string
	// RunID is the run the call starts, chosen before it is started.
	RunID     string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Store persists triggers, their overlap markers and webhook deliveries.
type Store interface {
	// WorkflowOwner returns the owner of workflow workflowID. NotFound
	// WORKFLOW_NOT_FOUND, also while it is being deleted.
	WorkflowOwner(ctx context.Context, workflowID string) (string, error)
	// CreateTrigger stores t and increments its owner's trigger count in
	// one transaction conditioned on the workflow existing, being
	// t.UserID's and not being deleted, and on the count being below max.
	// NotFound WORKFLOW_NOT_FOUND, Forbidden, Conflict TRIGGER_LIMIT.
	CreateTrigger(ctx context.Context, t Trigger, max int) error
	// Trigger returns trigger id, read consistently. NotFound
	// TRIGGER_NOT_FOUND.
	Trigger(ctx context.Context, id string) (Trigger, error)
	// WorkflowTriggers returns the triggers of workflowID, most recently
	// updated first.
	WorkflowTriggers(ctx context.Context, workflowID string) ([]Trigger, error)
	// UpdateTrigger writes next's configuration (enabled, schedule,
	// timezone, input, overlap, schedule start, nonces, updatedAt) and
	// next.Version, on condition that the stored version is readVersion;
	// the markers and the last fire are left as they are. NotFound
	// TRIGGER_NOT_FOUND when it is gone, Conflict CONCURRENT_UPDATE when
	// it changed.
	UpdateTrigger(ctx context.Context, next Trigger, readVersion int) error
	// DeleteTrigger deletes t and decrements its owner's count in one
	// transaction. NotFound TRIGGER_NOT_FOUND when it is already gone.
	DeleteTrigger(ctx context.Context, t Trigger) error

	// SetActive makes runID the trigger's active run, since at, on
	// condition that it has none or has runID already. false when another
	// run is active or the trigger is gone.
	SetActive(ctx context.Context, triggerID, runID string, at time.Time) (bool, error)
	// SetBuffered makes runID the trigger's waiting run, on condition that
	// another run is active and none or runID is waiting. false otherwise.
	SetBuffered(ctx context.Context, triggerID, runID string) (bool, error)
	// EndActive ends the active run runID: on condition that it is the
	// active run, the waiting run (if any) becomes the active one, since
	// at, and is returned as next. ended is false when runID was not the
	// active run (a repeated call, or a run started without a marker).
	EndActive(ctx context.Context, triggerID, runID string, at time.Time) (next string, ended bool, err error)
	// ClearActive removes the active run, on condition that it is runID.
	ClearActive(ctx context.Context, triggerID, runID string) error
	// RecordFire sets the trigger's last fire, if the trigger exists.
	RecordFire(ctx context.Context, triggerID string, f Fire) error

	// ClaimDeliveries stores ds (at least one) all at once, on condition
	// that none of their keys holds an unexpired delivery: held is nil
	// when it did; otherwise held has, for each of ds, the delivery that
	// holds its key (the zero Delivery, RunID "", where none does).
	ClaimDeliveries(ctx context.Context, ds []Delivery) (held []Delivery, err error)
}

// DueSchedule is a local schedule whose next fire is due (store.DueSchedules).
type DueSchedule struct {
	TriggerID  string
	Version    int
	Expression string
	Timezone   string
	Start      time.Time
	NextFireAt time.Time
}

// DueStore is the local scheduler's index of schedules by next fire.
type DueStore interface {
	// Due returns at most limit schedules whose next fire is at or before
	// now, earliest first.
	Due(ctx context.Context, now time.Time, limit int) ([]DueSchedule, error)
	// Advance moves d's next fire to next, or removes d when next is zero,
	// on condition that d is unchanged since Due read it: false when it
	// changed (another poller claimed the fire, or the schedule was put
	// again).
	Advance(ctx context.Context, d DueSchedule, next time.Time) (bool, error)
}
