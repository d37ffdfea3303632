package trigger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/audit"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/schedule"
	"github.com/workflowchat/service/shared/webhook"
)

// MaxUpdateAttempts bounds the re-reads of an update that lost a race.
const MaxUpdateAttempts = 3

// Options are the dependencies of NewService. Now nil means time.Now;
// Logger nil means slog.Default(). Secrets nil leaves the webhook
// operations (creating a webhook trigger, rotating its secret, a call)
// unavailable: a function that only fires schedules or deletes triggers
// needs no signing key.
type Options struct {
	Store     Store
	Scheduler Scheduler
	Runs      RunStarter
	Secrets   *webhook.Secrets
	// PublicBaseURL is the service's public origin (PUBLIC_BASE_URL) that
	// webhook URLs are shown under; empty means each request's
	// (oauth.BaseURL).
	PublicBaseURL string
	Now           func() time.Time
	Logger        *slog.Logger
	// Audit records secret rotations; nil records none.
	Audit *audit.Log
	// Erasures tells which accounts are being deleted: their triggers
	// neither fire nor take webhook calls from then on, before the
	// erasure deletes them. Nil: the erasure alone ends them.
	Erasures auth.Erasures
}

// Service implements the trigger operations.
type Service struct {
	store     Store
	scheduler Scheduler
	runs      RunStarter
	secrets   *webhook.Secrets
	baseURL   string
	now       func() time.Time
	logger    *slog.Logger
	audit     *audit.Log
	erasures  auth.Erasures
}

// NewService returns a Service.
func NewService(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{store: o.Store, scheduler: o.Scheduler, runs: o.Runs, secrets: o.Secrets, baseURL: o.PublicBaseURL, now: o.Now,
		logger: o.Logger, audit: o.Audit, erasures: o.Erasures}
}

// ownerDeleted reports whether t's account is being deleted (false
// without Erasures).
func (s *Service) ownerDeleted(ctx context.Context, t Trigger) (bool, error) {
	if s.erasures == nil {
		return false, nil
	}
	return s.erasures.Deleted(ctx, t.UserID)
}

func (s *Service) clock() time.Time { return s.now().UTC() }

// needSecrets fails Internal when the service has no webhook secrets.
func (s *Service) needSecrets(op string) error {
	if s.secrets == nil {
		return errs.E(op, errs.Internal, "", "internal error").WithCause(errors.New("trigger: no webhook signing key in this function"))
	}
	return nil
}

// Created is a created trigger, or one whose secret was rotated: Secret is
// a webhook trigger's secret, shown this once.
type Created struct {
	Trigger Trigger
	Secret  string
}

// Create creates a trigger of the signed-in user's workflow workflowID
// from a validated req. Invalid (naming "schedule") for a schedule that
// never fires after now; NotFound WORKFLOW_NOT_FOUND; Forbidden; Conflict
// TRIGGER_LIMIT at MaxPerUser triggers; the scheduler's errors (the
// trigger is then not kept).
func (s *Service) Create(ctx context.Context, workflowID string, req CreateRequest) (Created, error) {
	const op = "trigger.Create"
	now := s.clock()
	t := Trigger{ID: uuid.NewString(), UserID: auth.UserID(ctx), WorkflowID: workflowID, Type: req.Type, Enabled: true,
		Version: 1, CreatedAt: now, UpdatedAt: now}
	if req.Enabled != nil {
		t.Enabled = *req.Enabled
	}
	if req.Version != nil {
		t.WorkflowVersion = *req.Version
	}
	var out Created
	switch req.Type {
	case TypeSchedule:
		t.Schedule, t.Timezone, t.Overlap, t.ScheduleStart = *req.Schedule, deref(req.Timezone), OverlapSkip, now
		if t.Timezone == "" {
			t.Timezone = schedule.DefaultTimezone
		}
		if req.Overlap != nil {
			t.Overlap = *req.Overlap
		}
		in, err := decodeInput(req.Input)
		if err != nil {
			return Created{}, errs.Wrap(op, err)
		}
		t.Input = in
		if _, err := s.nextFire(t, now); err != nil {
			return Created{}, errs.Wrap(op, err)
		}
	case TypeWebhook:
		if err := s.needSecrets(op); err != nil {
			return Created{}, err
		}
		nonce, err := webhook.NewNonce()
		if err != nil {
			return Created{}, errs.Wrap(op, err)
		}
		t.SecretNonce = nonce
		out.Secret = s.secrets.Secret(t.ID, nonce)
	}
	if err := s.store.CreateTrigger(ctx, t, MaxPerUser); err != nil {
		return Created{}, errs.Wrap(op, err)
	}
	if err := s.sync(ctx, t); err != nil {
		// Not kept: a trigger whose schedule does not exist would never
		// fire.
		if derr := s.store.DeleteTrigger(context.WithoutCancel(ctx), t); derr != nil {
			logging.FromContext(ctx).ErrorContext(ctx, "trigger: undo create after the scheduler failed", "triggerId", t.ID, "err", derr)
		}
		return Created{}, errs.Wrap(op, err)
	}
	out.Trigger = t
	return out, nil
}

// nextFire returns when t fires next after now; Invalid naming "schedule"
// when it never does.
func (s *Service) nextFire(t Trigger, now time.Time) (time.Time, error) {
	sch, err := schedule.Parse(t.Schedule, t.Timezone)
	if err != nil {
		return time.Time{}, err
	}
	next, ok := sch.Next(t.ScheduleStart, now)
	if !ok {
		return time.Time{}, errs.Fields("trigger.nextFire", errs.FieldError{Field: "schedule", Message: "never fires after now"})
	}
	return next, nil
}

// sync puts t's schedule to the scheduler, or removes it when t is not a
// schedule that fires again.
func (s *Service) sync(ctx context.Context, t Trigger) error {
	if t.Type != TypeSchedule {
		return nil
	}
	if _, err := s.nextFire(t, s.clock()); err != nil {
		return s.scheduler.Delete(ctx, t.ID)
	}
	return s.scheduler.Put(ctx, ScheduleSpec{TriggerID: t.ID, Version: t.Version, Expression: t.Schedule, Timezone: t.Timezone,
		Start: t.ScheduleStart, Enabled: t.Enabled})
}

// Get returns trigger triggerID of workflow workflowID. NotFound
// TRIGGER_NOT_FOUND (also for a trigger of another workflow), then
// Forbidden.
func (s *Service) Get(ctx context.Context, workflowID, triggerID string) (Trigger, error) {
	const op = "trigger.Get"
	t, err := s.store.Trigger(ctx, triggerID)
	if err != nil {
		return Trigger{}, errs.Wrap(op, err)
	}
	if t.WorkflowID != workflowID {
		return Trigger{}, errs.E(op, errs.NotFound, CodeTriggerNotFound, "trigger not found")
	}
	if err := auth.Authorize(ctx, op, t.UserID); err != nil {
		return Trigger{}, err
	}
	return t, nil
}

// List returns the triggers of workflowID, most recently updated first.
// NotFound WORKFLOW_NOT_FOUND, then Forbidden.
func (s *Service) List(ctx context.Context, workflowID string) ([]Trigger, error) {
	const op = "trigger.List"
	owner, err := s.store.WorkflowOwner(ctx, workflowID)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, owner); err != nil {
		return nil, err
	}
	ts, err := s.store.WorkflowTriggers(ctx, workflowID)
	return ts, errs.Wrap(op, err)
}

// Update changes trigger triggerID as a validated req says: the schedule's
// start moves to now when the expression or zone changes. NotFound,
// Forbidden, Invalid for fields the trigger's type does not have or a
// schedule that never fires, the scheduler's errors (Invalid naming
// "schedule" for an expression it refuses): the change is then undone,
// so that the stored trigger stays the one its schedule fires.
func (s *Service) Update(ctx context.Context, workflowID, triggerID string, req UpdateRequest) (Trigger, error) {
	const op = "trigger.Update"
	in, err := decodeInput(req.Input)
	if err != nil {
		return Trigger{}, errs.Wrap(op, err)
	}
	var prev Trigger
	next, err := s.update(ctx, op, workflowID, triggerID, func(t Trigger, now time.Time) (Trigger, error) {
		prev = t
		if err := req.validateFor(t); err != nil {
			return t, err
		}
		if req.Enabled != nil {
			t.Enabled = *req.Enabled
		}
		if req.Version != nil {
			t.WorkflowVersion = req.pinned()
		}
		if req.Schedule != nil || req.Timezone != nil {
			if req.Schedule != nil {
				t.Schedule = *req.Schedule
			}
			if req.Timezone != nil {
				t.Timezone = *req.Timezone
				if t.Timezone == "" {
					t.Timezone = schedule.DefaultTimezone
				}
			}
			t.ScheduleStart = now
		}
		if req.Overlap != nil {
			t.Overlap = *req.Overlap
		}
		if req.Input != nil {
			t.Input = in
		}
		if t.Type == TypeSchedule && t.Enabled {
			if _, err := s.nextFire(t, now); err != nil {
				return t, err
			}
		}
		return t, nil
	})
	if err != nil {
		return Trigger{}, err
	}
	if err := s.sync(ctx, next); err != nil {
		// Undone: kept, the change would show a schedule that never fires
		// (the scheduler still holds the previous version's, whose fires
		// are ignored once the version moved). The previous configuration
		// and version go back on condition that nothing changed since; the
		// markers and the last fire are not touched.
		if uerr := s.store.UpdateTrigger(context.WithoutCancel(ctx), prev, next.Version); uerr != nil {
			logging.FromContext(ctx).ErrorContext(ctx, "trigger: undo update after the scheduler failed", "triggerId", next.ID, "err", uerr)
		}
		return Trigger{}, errs.Wrap(op, err)
	}
	return next, nil
}

// update reads trigger triggerID (NotFound, Forbidden), applies change and
// writes the result conditioned on the version read, re-reading on a lost
// race at most MaxUpdateAttempts times.
func (s *Service) update(ctx context.Context, op, workflowID, triggerID string, change func(Trigger, time.Time) (Trigger, error)) (Trigger, error) {
	var err error
	for range MaxUpdateAttempts {
		var t Trigger
		if t, err = s.Get(ctx, workflowID, triggerID); err != nil {
			return Trigger{}, errs.Wrap(op, err)
		}
		now := s.clock()
		next, cerr := change(t, now)
		if cerr != nil {
			return Trigger{}, errs.Wrap(op, cerr)
		}
		next.Version, next.UpdatedAt = t.Version+1, now
		err = s.store.UpdateTrigger(ctx, next, t.Version)
		if errs.CodeOf(err) != CodeConcurrentUpdate {
			return next, errs.Wrap(op, err)
		}
	}
	return Trigger{}, errs.Wrap(op, err)
}

// RotateSecret gives webhook trigger triggerID a new secret, returned this
// once; the previous one stays valid for req's grace period. NotFound,
// Forbidden, Invalid NOT_A_WEBHOOK_TRIGGER.
func (s *Service) RotateSecret(ctx context.Context, workflowID, triggerID string, req RotateRequest) (Created, error) {
	const op = "trigger.RotateSecret"
	if err := s.needSecrets(op); err != nil {
		return Created{}, err
	}
	nonce, err := webhook.NewNonce()
	if err != nil {
		return Created{}, errs.Wrap(op, err)
	}
	t, err := s.update(ctx, op, workflowID, triggerID, func(t Trigger, now time.Time) (Trigger, error) {
		if t.Type != TypeWebhook {
			return t, errs.E(op, errs.Invalid, CodeNotWebhook, "only webhook triggers have a secret")
		}
		t.PreviousNonce, t.PreviousExpiresAt = "", nil
		if g := req.PreviousSecretValidSeconds; g != nil && *g > 0 {
			until := now.Add(time.Duration(*g) * time.Second)
			t.PreviousNonce, t.PreviousExpiresAt = t.SecretNonce, &until
		}
		t.SecretNonce = nonce
		return t, nil
	})
	if err != nil {
		return Created{}, err
	}
	s.audit.Record(ctx, auth.UserID(ctx), audit.TriggerSecretRotated, map[string]any{"workflowId": workflowID, "triggerId": t.ID})
	return Created{Trigger: t, Secret: s.secrets.Secret(t.ID, nonce)}, nil
}

// Delete deletes trigger triggerID: its schedule first, so that a failure
// part-way leaves a trigger that deleting again finishes. NotFound,
// Forbidden.
func (s *Service) Delete(ctx context.Context, workflowID, triggerID string) error {
	const op = "trigger.Delete"
	t, err := s.Get(ctx, workflowID, triggerID)
	if err != nil {
		return errs.Wrap(op, err)
	}
	return errs.Wrap(op, s.remove(ctx, t))
}

func (s *Service) remove(ctx context.Context, t Trigger) error {
	if t.Type == TypeSchedule {
		if err := s.scheduler.Delete(ctx, t.ID); err != nil {
			return err
		}
	}
	err := s.store.DeleteTrigger(ctx, t)
	if errs.Is(err, errs.NotFound) {
		return nil // deleted meanwhile
	}
	return err
}

// DeleteWorkflowTriggers deletes every trigger of workflowID, with their
// schedules. The workflow's delete calls it once the owner is checked
// and the workflow is marked deleting (no trigger can be created then).
func (s *Service) DeleteWorkflowTriggers(ctx context.Context, workflowID string) error {
	const op = "trigger.DeleteWorkflowTriggers"
	ts, err := s.store.WorkflowTriggers(ctx, workflowID)
	if err != nil {
		return errs.Wrap(op, err)
	}
	for _, t := range ts {
		if err := s.remove(ctx, t); err != nil {
			return errs.Wrap(op, err)
		}
	}
	return nil
}

// Fire handles one fire of a schedule (EventBridge Scheduler's invocation
// of TriggerFireFunction, or Poller): it applies the trigger's overlap
// policy with conditional writes on the trigger's markers, starts the run
// (id FireRunID of the trigger and the scheduled time) and records the
// outcome as the trigger's last fire. A fire of a trigger that is gone,
// disabled or not a schedule, of an older version of it (the schedule
// was changed since), or of a deleted account's, does nothing. It returns the outcome ("" when it
// did nothing), and an error only when retrying may help (storage or the
// engine unavailable): the outcome is then not final, and a retry of the
// same event starts no second run.
func (s *Service) Fire(ctx context.Context, ev FireEvent) (string, error) {
	const op = "trigger.Fire"
	log := s.logger.With("triggerId", ev.TriggerID, "scheduledTime", ev.ScheduledTime)
	t, err := s.store.Trigger(ctx, ev.TriggerID)
	switch {
	case errs.Is(err, errs.NotFound):
		log.InfoContext(ctx, "fire of a deleted trigger ignored")
		return "", nil
	case err != nil:
		return "", errs.Wrap(op, err)
	case t.Type != TypeSchedule || !t.Enabled:
		log.InfoContext(ctx, "fire of a disabled trigger ignored")
		return "", nil
	case ev.Version != t.Version:
		log.InfoContext(ctx, "fire of an older version of the trigger ignored", "version", ev.Version, "current", t.Version)
		return "", nil
	}
	if deleted, err := s.ownerDeleted(ctx, t); err != nil || deleted {
		if err != nil {
			return "", errs.Wrap(op, err)
		}
		log.InfoContext(ctx, "fire of a deleted account's trigger ignored")
		return "", nil
	}
	if ev.ScheduledTime.IsZero() {
		ev.ScheduledTime = s.clock().Truncate(time.Minute)
	}
	runID := FireRunID(t.ID, ev.ScheduledTime)
	if t.Overlap == OverlapAllow {
		return s.start(ctx, t, runID, false)
	}
	// Each attempt is one conditional write; a lost race (the active run
	// ended between two writes) tries again.
	for range MaxUpdateAttempts {
		ok, err := s.store.SetActive(ctx, t.ID, runID, s.clock())
		if err != nil {
			return "", errs.Wrap(op, err)
		}
		if ok {
			return s.start(ctx, t, runID, true)
		}
		cur, err := s.store.Trigger(ctx, t.ID)
		switch {
		case errs.Is(err, errs.NotFound):
			return "", nil
		case err != nil:
			return "", errs.Wrap(op, err)
		case cur.ActiveRunID == "":
			continue
		}
		// Another run holds the marker. It may be one whose start was
		// interrupted (the marker written, the run never started):
		// starting it again is harmless (the engine starts an existing
		// run id once) and recovers it; one that has ended without the
		// engine's RunEnded reaching us is ended here.
		if s.reassert(ctx, cur) {
			continue
		}
		if t.Overlap == OverlapBufferOne {
			ok, err := s.store.SetBuffered(ctx, t.ID, runID)
			if err != nil {
				return "", errs.Wrap(op, err)
			}
			if ok {
				s.record(ctx, t.ID, Fire{At: s.clock(), RunID: runID, Outcome: OutcomeBuffered})
				return OutcomeBuffered, nil
			}
			if cur, err = s.store.Trigger(ctx, t.ID); err == nil && cur.ActiveRunID == "" {
				continue // the active run ended meanwhile
			}
		}
		break
	}
	s.record(ctx, t.ID, Fire{At: s.clock(), Outcome: OutcomeSkipped})
	return OutcomeSkipped, nil
}

// reassert starts t's active run again (a no-op for a run that exists),
// and ends the marker when the engine says the run has ended; it reports
// whether it did.
func (s *Service) reassert(ctx context.Context, t Trigger) bool {
	_, err := s.runs.StartTriggered(auth.ActingFor(ctx, t.UserID), s.triggered(t, t.ActiveRunID))
	if errs.CodeOf(err) != CodeRunEnded {
		return false
	}
	if err := s.RunEnded(ctx, t.ID, t.ActiveRunID); err != nil {
		s.logger.WarnContext(ctx, "trigger: end a stale marker", "triggerId", t.ID, "runId", t.ActiveRunID, "err", err)
		return false
	}
	return true
}

func (s *Service) triggered(t Trigger, runID string) TriggeredRun {
	return TriggeredRun{UserID: t.UserID, WorkflowID: t.WorkflowID, Input: maps.Clone(t.Input), TriggerType: TypeSchedule, TriggerID: t.ID, RunID: runID,
		WorkflowVersion: t.WorkflowVersion}
}

// start starts run runID of schedule trigger t and records the outcome;
// with marked (runID holds the trigger's marker), a failed start ends the
// marker as the run's end would.
func (s *Service) start(ctx context.Context, t Trigger, runID string, marked bool) (string, error) {
	_, err := s.runs.StartTriggered(auth.ActingFor(ctx, t.UserID), s.triggered(t, runID))
	if err == nil {
		s.record(ctx, t.ID, Fire{At: s.clock(), RunID: runID, Outcome: OutcomeStarted})
		return OutcomeStarted, nil
	}
	s.record(ctx, t.ID, failedFire(s.clock(), runID, err))
	if marked {
		// The run that did not start ends here: its marker goes, and a
		// waiting fire starts.
		if rerr := s.RunEnded(ctx, t.ID, runID); rerr != nil {
			s.logger.ErrorContext(ctx, "trigger: release the marker of a run that did not start", "triggerId", t.ID, "runId", runID, "err", rerr)
		}
	}
	if retryable(err) {
		return OutcomeFailed, errs.Wrap("trigger.start", err)
	}
	s.logger.InfoContext(ctx, "triggered run refused", "triggerId", t.ID, "runId", runID, "code", errs.CodeOf(err))
	return OutcomeFailed, nil
}

func failedFire(at time.Time, runID string, err error) Fire {
	return Fire{At: at, RunID: runID, Outcome: OutcomeFailed,
		Error: &FireError{Code: errs.CodeOf(err), Message: errs.MessageOf(err, "the run could not start")}}
}

// retryable reports whether a failed start may succeed if tried again.
func retryable(err error) bool {
	switch errs.KindOf(err) {
	case errs.Unavailable, errs.Timeout, errs.Internal:
		return true
	}
	return false
}

func (s *Service) record(ctx context.Context, triggerID string, f Fire) {
	if err := s.store.RecordFire(context.WithoutCancel(ctx), triggerID, f); err != nil {
		s.logger.WarnContext(ctx, "trigger: record the last fire", "triggerId", triggerID, "err", err)
	}
}

// RunEnded is the run engine's call at the end of every run a schedule
// trigger started (TriggeredRun.TriggerType "schedule"), whatever its
// outcome: it releases the trigger's marker on condition that it still
// names runID and, with buffer_one, starts the fire that was waiting. A
// call for a run that holds no marker (a repeated call, an overlap-allow
// run, a deleted trigger) does nothing, so the engine may call it more
// than once. It fails only when storage fails (the engine should retry).
func (s *Service) RunEnded(ctx context.Context, triggerID, runID string) error {
	const op = "trigger.RunEnded"
	next, ended, err := s.store.EndActive(ctx, triggerID, runID, s.clock())
	if err != nil || !ended || next == "" {
		return errs.Wrap(op, err)
	}
	t, err := s.store.Trigger(ctx, triggerID)
	switch {
	case errs.Is(err, errs.NotFound):
		return nil
	case err != nil:
		return errs.Wrap(op, err)
	case !t.Enabled:
		return errs.Wrap(op, s.store.ClearActive(ctx, triggerID, next))
	}
	_, err = s.start(ctx, t, next, true)
	return errs.Wrap(op, err)
}

// HookRequest is a webhook call: POST /hooks/{triggerId}.
type HookRequest struct {
	TriggerID string
	// Signature is the X-Signature header.
	Signature string
	// IdempotencyKey is the Idempotency-Key header ("" when absent). The
	// verified signature deduplicates whether or not there is one; a key
	// deduplicates further (a call re-signed later with the same key).
	IdempotencyKey string
	// Body is the raw body, at most MaxWebhookBody bytes.
	Body []byte
}

// Hooked is the outcome of a webhook call: the run it started, or the run
// an earlier call with the same key started (Repeat).
type Hooked struct {
	RunID  string
	Repeat bool
}

// Hook handles a webhook call: the trigger (NotFound TRIGGER_NOT_FOUND
// when unknown, disabled or not a webhook), the signature (Unauthenticated
// INVALID_SIGNATURE, SIGNATURE_EXPIRED), the trigger's account (NotFound
// TRIGGER_NOT_FOUND once it is being deleted), the body (Invalid INVALID_JSON
// unless a JSON object), the idempotency key (Invalid
// INVALID_IDEMPOTENCY_KEY; Conflict IDEMPOTENCY_KEY_REUSED when the key
// came with another body), then the run, whose id is stored under each
// verified (t, v1) pair and the key (claim) before the run is started:
// a call whose signature or key was seen within DeliveryTTL starts
// the same run id again, which starts nothing new once it exists and
// starts it if the first call died before it did. The RunStarter's errors
// (INVALID_INPUT, RATE_LIMITED, ...) are returned and recorded as the
// trigger's last fire.
func (s *Service) Hook(ctx context.Context, req HookRequest) (Hooked, error) {
	const op = "trigger.Hook"
	if err := s.needSecrets(op); err != nil {
		return Hooked{}, err
	}
	now := s.clock()
	t, err := s.store.Trigger(ctx, req.TriggerID)
	if err != nil || t.Type != TypeWebhook || !t.Enabled {
		if err == nil || errs.Is(err, errs.NotFound) {
			return Hooked{}, errs.E(op, errs.NotFound, CodeTriggerNotFound, "no enabled webhook trigger has this id")
		}
		return Hooked{}, errs.Wrap(op, err)
	}
	secrets := []string{s.secrets.Secret(t.ID, t.SecretNonce)}
	if t.PreviousNonce != "" && t.PreviousExpiresAt != nil && now.Before(*t.PreviousExpiresAt) {
		secrets = append(secrets, s.secrets.Secret(t.ID, t.PreviousNonce))
	}
	verified, err := webhook.Verify(req.Signature, req.Body, now, secrets...)
	if err != nil {
		return Hooked{}, errs.Wrap(op, err)
	}
	// Read once the call is known to be the owner's integration's.
	if deleted, err := s.ownerDeleted(ctx, t); err != nil || deleted {
		if err != nil {
			return Hooked{}, errs.Wrap(op, err)
		}
		return Hooked{}, errs.E(op, errs.NotFound, CodeTriggerNotFound, "no enabled webhook trigger has this id")
	}
	var input map[string]any
	if err := httpapi.UnmarshalStrict(req.Body, &input); err != nil {
		return Hooked{}, errs.Wrap(op, err)
	}
	key, err := idempotencyKey(req.IdempotencyKey)
	if err != nil {
		return Hooked{}, errs.Wrap(op, err)
	}
	bodyHash := sha256.Sum256(req.Body)
	runID := uuid.NewString()
	delivery := func(k string) Delivery {
		return Delivery{TriggerID: t.ID, KeyHash: k, BodyHash: hex.EncodeToString(bodyHash[:]), RunID: runID,
			CreatedAt: now, ExpiresAt: now.Add(DeliveryTTL)}
	}
	ds := make([]Delivery, 0, len(verified.Matched)+1)
	for _, v1 := range verified.Matched {
		ds = append(ds, delivery(hashKey("sig:"+strconv.FormatInt(verified.Time.Unix(), 10)+"."+v1)))
	}
	if key != "" {
		ds = append(ds, delivery(key))
	}
	out, err := s.claim(ctx, ds, len(verified.Matched))
	if err != nil {
		return Hooked{}, errs.Wrap(op, err)
	}
	_, err = s.runs.StartTriggered(auth.ActingFor(ctx, t.UserID), TriggeredRun{UserID: t.UserID, WorkflowID: t.WorkflowID, Input: input,
		TriggerType: TypeWebhook, TriggerID: t.ID, RunID: out.RunID, WorkflowVersion: t.WorkflowVersion})
	if errs.CodeOf(err) == CodeRunEnded {
		err = nil // a repeat of a call whose run has already finished
	}
	if err != nil {
		s.record(ctx, t.ID, failedFire(s.clock(), out.RunID, err))
		return Hooked{}, errs.Wrap(op, err)
	}
	if !out.Repeat {
		s.record(ctx, t.ID, Fire{At: s.clock(), RunID: out.RunID, Outcome: OutcomeStarted})
	}
	return out, nil
}

// claim records a webhook call's deliveries ds, its nsig verified
// signature pairs first and then its Idempotency-Key if any, all naming
// a new run, and returns the run the call names. When none of their keys
// is held, that is the new run. Otherwise it is a repeat: of the run a
// held signature names (a signature decides over any key, so that a
// captured call replayed with a new Idempotency-Key starts nothing), else
// of the run the held key names (Conflict IDEMPOTENCY_KEY_REUSED, and
// nothing recorded, when the key came with another body). The signatures
// not yet held are then recorded under that run, each with a conditional
// write, so that a replay of this call names it too whatever key it
// carries; one that a concurrent call claimed in between decides instead.
func (s *Service) claim(ctx context.Context, ds []Delivery, nsig int) (Hooked, error) {
	const op = "trigger.claim"
	held, err := s.store.ClaimDeliveries(ctx, ds)
	if err != nil || held == nil {
		return Hooked{RunID: ds[0].RunID}, errs.Wrap(op, err)
	}
	runID := ""
	for _, h := range held[:nsig] {
		if h.RunID != "" {
			runID = h.RunID
			break
		}
	}
	if runID == "" { // only the key is held
		k := held[nsig]
		if k.BodyHash != ds[nsig].BodyHash {
			return Hooked{}, errs.E(op, errs.Conflict, CodeIdempotencyKeyReused,
				"this Idempotency-Key was used with another body in the last 24 hours; use a new key for a new call")
		}
		runID = k.RunID
	}
	for i, h := range held[:nsig] {
		if h.RunID != "" {
			continue
		}
		d := ds[i]
		d.RunID = runID
		again, err := s.store.ClaimDeliveries(ctx, []Delivery{d})
		if err != nil {
			return Hooked{}, errs.Wrap(op, err)
		}
		if again != nil {
			runID = again[0].RunID
		}
	}
	return Hooked{RunID: runID, Repeat: true}, nil
}

// idempotencyKey returns the hash of the delivery key of an
// Idempotency-Key header, "" when there is none. Invalid
// INVALID_IDEMPOTENCY_KEY when it is too long or not printable ASCII
// without spaces.
func idempotencyKey(header string) (string, error) {
	const op = "trigger.idempotencyKey"
	if header == "" {
		return "", nil
	}
	if len(header) > MaxIdempotencyKey {
		return "", errs.E(op, errs.Invalid, CodeInvalidIdempotencyKey, "Idempotency-Key must be at most 255 characters")
	}
	for _, r := range header {
		if r < 0x21 || r > 0x7e {
			return "", errs.E(op, errs.Invalid, CodeInvalidIdempotencyKey, "Idempotency-Key must be printable ASCII without spaces")
		}
	}
	return hashKey("key:" + header), nil
}

// hashKey is the SHA-256 (hex) a delivery key is stored under.
func hashKey(k string) string {
	h := sha256.Sum256([]byte(k))
	return hex.EncodeToString(h[:])
}

// NextFireAt returns when schedule trigger t fires next after now; nil
// for a webhook, a disabled trigger or a schedule that never fires again.
func NextFireAt(t Trigger, now time.Time) *time.Time {
	if t.Type != TypeSchedule || !t.Enabled {
		return nil
	}
	sch, err := schedule.Parse(t.Schedule, t.Timezone)
	if err != nil {
		return nil
	}
	next, ok := sch.Next(t.ScheduleStart, now)
	if !ok {
		return nil
	}
	next = next.UTC()
	return &next
}
