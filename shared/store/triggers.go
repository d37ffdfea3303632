package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/schedule"
	"github.com/workflowchat/service/shared/trigger"
)

// Triggers stores workflow triggers in the Data table. It implements
// trigger.Store.
//
//   - The trigger: PK TRIGGER#<id>, SK TRIGGER, so that the webhook route
//     and a schedule's fire find it with one GetItem. Its configuration
//     changes only with a version condition; its overlap markers
//     (activeRunId, activeSince, bufferedRunId) only by conditional
//     updates naming the run; lastFire (JSON) records the latest fire.
//   - A reference to it in its workflow's item collection: PK WF#<wid>,
//     SK TRIGGER#<id>, written in the same transactions as the trigger,
//     so that a workflow's triggers are listed by one consistent Query
//     (and a BatchGetItem), and deleting the workflow's collection takes
//     the references with it.
//   - The user's trigger counter: PK USER#<uid>, SK COUNTER#TRIGGERS,
//     attribute n, changed in the same transactions as the trigger
//     (creation is conditioned on n < the limit).
//   - Webhook deliveries: PK TRIGGER#<id>, SK DELIVERY#<key hash>, with
//     the run id chosen for the call; expiresAt (epoch seconds) is the
//     table's TTL attribute, and the claim condition treats an expired
//     item as absent (TTL deletes lazily). Deleting a trigger leaves them
//     to expire: trigger ids are never reused.
type Triggers struct {
	db    *dynamo.DB
	table dynamo.Table
}

// NewTriggers returns the Triggers over the named Data table.
func NewTriggers(db *dynamo.DB, dataTable string) *Triggers {
	return &Triggers{db: db, table: db.Table(dataTable)}
}

const (
	triggerSK        = "TRIGGER"
	triggerRefPrefix = "TRIGGER#"
	deliveryPrefix   = "DELIVERY#"
)

func triggerPK(id string) string { return "TRIGGER#" + id }
func triggerCounterKey(userID string) (string, string) {
	return "USER#" + userID, "COUNTER#TRIGGERS"
}

type triggerItem struct {
	PK, SK            string
	Type              string     `dynamo:"type"`
	ID                string     `dynamo:"id"`
	UserID            string     `dynamo:"userId"`
	WorkflowID        string     `dynamo:"workflowId"`
	TriggerType       string     `dynamo:"triggerType"`
	Enabled           bool       `dynamo:"enabled"`
	Schedule          string     `dynamo:"schedule,omitempty"`
	Timezone          string     `dynamo:"timezone,omitempty"`
	Input             string     `dynamo:"input,omitempty"` // JSON object
	Overlap           string     `dynamo:"overlap,omitempty"`
	ScheduleStart     *time.Time `dynamo:"scheduleStart,omitempty"`
	SecretNonce       string     `dynamo:"secretNonce,omitempty"`
	PreviousNonce     string     `dynamo:"previousNonce,omitempty"`
	PreviousExpiresAt *time.Time `dynamo:"previousExpiresAt,omitempty"`
	ActiveRunID       string     `dynamo:"activeRunId,omitempty"`
	ActiveSince       *time.Time `dynamo:"activeSince,omitempty"`
	BufferedRunID     string     `dynamo:"bufferedRunId,omitempty"`
	LastFire          string     `dynamo:"lastFire,omitempty"` // JSON
	WorkflowVersion   int        `dynamo:"workflowVersion,omitempty"`
	Version           int        `dynamo:"version"`
	CreatedAt         time.Time  `dynamo:"createdAt"`
	UpdatedAt         time.Time  `dynamo:"updatedAt"`
}

// triggerRefItem is a trigger's reference in its workflow's collection.
type triggerRefItem struct {
	PK, SK    string
	Type      string `dynamo:"type"`
	TriggerID string `dynamo:"triggerId"`
}

type deliveryItem struct {
	PK, SK    string
	Type      string    `dynamo:"type"`
	RunID     string    `dynamo:"runId"`
	BodyHash  string    `dynamo:"bodyHash"`
	CreatedAt time.Time `dynamo:"createdAt"`
	ExpiresAt int64     `dynamo:"expiresAt"`
}

func encodeInput(in map[string]any) (string, error) {
	if in == nil {
		return "", nil
	}
	b, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("encode input: %w", err)
	}
	return string(b), nil
}

func newTriggerItem(t trigger.Trigger) (triggerItem, error) {
	in, err := encodeInput(t.Input)
	if err != nil {
		return triggerItem{}, err
	}
	it := triggerItem{PK: triggerPK(t.ID), SK: triggerSK, Type: "trigger", ID: t.ID, UserID: t.UserID, WorkflowID: t.WorkflowID,
		TriggerType: t.Type, Enabled: t.Enabled, Schedule: t.Schedule, Timezone: t.Timezone, Input: in, Overlap: t.Overlap,
		SecretNonce: t.SecretNonce, PreviousNonce: t.PreviousNonce, PreviousExpiresAt: t.PreviousExpiresAt,
		Version: t.Version, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, WorkflowVersion: t.WorkflowVersion}
	if !t.ScheduleStart.IsZero() {
		start := t.ScheduleStart
		it.ScheduleStart = &start
	}
	return it, nil
}

func (it triggerItem) trigger() (trigger.Trigger, error) {
	t := trigger.Trigger{ID: it.ID, UserID: it.UserID, WorkflowID: it.WorkflowID, Type: it.TriggerType, Enabled: it.Enabled,
		Schedule: it.Schedule, Timezone: it.Timezone, Overlap: it.Overlap, SecretNonce: it.SecretNonce,
		PreviousNonce: it.PreviousNonce, PreviousExpiresAt: it.PreviousExpiresAt, ActiveRunID: it.ActiveRunID,
		ActiveSince: it.ActiveSince, BufferedRunID: it.BufferedRunID, Version: it.Version, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		WorkflowVersion: it.WorkflowVersion}
	if it.ScheduleStart != nil {
		t.ScheduleStart = *it.ScheduleStart
	}
	if it.Input != "" {
		if err := decodeAttr(it.PK, it.SK, "input", it.Input, &t.Input); err != nil {
			return trigger.Trigger{}, err
		}
	}
	if it.LastFire != "" {
		t.LastFire = &trigger.Fire{}
		if err := decodeAttr(it.PK, it.SK, "lastFire", it.LastFire, t.LastFire); err != nil {
			return trigger.Trigger{}, err
		}
	}
	return t, nil
}

var (
	errTriggerNotFound  = errs.E("store.Triggers", errs.NotFound, trigger.CodeTriggerNotFound, "trigger not found")
	errTriggerWorkflow  = errs.E("store.Triggers", errs.NotFound, trigger.CodeWorkflowNotFound, "workflow not found")
	errTriggerForbidden = errs.E("store.Triggers", errs.Forbidden, "FORBIDDEN", "you do not have access to this workflow")
)

// WorkflowOwner returns the owner of workflowID: one GetItem of the
// workflow's item, projected. NotFound WORKFLOW_NOT_FOUND, also while it
// is being deleted.
func (s *Triggers) WorkflowOwner(ctx context.Context, workflowID string) (string, error) {
	const op = "store.WorkflowOwner"
	var it struct {
		UserID   string `dynamo:"userId"`
		Deleting bool   `dynamo:"deleting"`
	}
	err := s.table.Get("PK", workflowPK(workflowID)).Range("SK", dynamo.Equal, workflowSK).Project("userId", "deleting").One(ctx, &it)
	switch {
	case errors.Is(err, dynamo.ErrNotFound):
		return "", errs.Wrap(op, errTriggerWorkflow)
	case err != nil:
		return "", storeError(op, err)
	case it.Deleting:
		return "", errs.Wrap(op, errTriggerWorkflow)
	}
	return it.UserID, nil
}

// CreateTrigger stores t, its reference in the workflow's collection and
// its owner's count + 1 in one transaction, conditioned on the workflow
// existing, being t.UserID's and not being deleted, and on the count being
// below max. A failed condition costs one read to say which: NotFound
// WORKFLOW_NOT_FOUND, Forbidden, or Conflict TRIGGER_LIMIT.
func (s *Triggers) CreateTrigger(ctx context.Context, t trigger.Trigger, max int) error {
	const op = "store.CreateTrigger"
	it, err := newTriggerItem(t)
	if err != nil {
		return errs.Wrap(op, err)
	}
	pk, sk := triggerCounterKey(t.UserID)
	err = s.db.WriteTx().
		Check(s.table.Check("PK", workflowPK(t.WorkflowID)).Range("SK", workflowSK).If(ownedBy+" AND attribute_not_exists(deleting)", t.UserID)).
		Put(s.table.Put(it).If("attribute_not_exists(PK)")).
		Put(s.table.Put(triggerRefItem{PK: workflowPK(t.WorkflowID), SK: triggerRefPrefix + t.ID, Type: "triggerRef", TriggerID: t.ID})).
		Update(s.table.Update("PK", pk).Range("SK", sk).Add("n", 1).Set("type", "counter").
			If("attribute_not_exists(n) OR n < ?", max)).
		Run(ctx)
	switch {
	case failedCondition(err, 0):
		owner, oerr := s.WorkflowOwner(ctx, t.WorkflowID)
		if oerr != nil {
			return errs.Wrap(op, oerr)
		}
		if owner != t.UserID {
			return errs.Wrap(op, errTriggerForbidden)
		}
		return errs.Wrap(op, errTriggerWorkflow)
	case failedCondition(err, 3):
		return errs.E(op, errs.Conflict, trigger.CodeTriggerLimit, fmt.Sprintf("a user has at most %d triggers; delete one first", max))
	case isConditionFailure(err):
		return errs.E(op, errs.Conflict, "TRIGGER_EXISTS", "a trigger with this id exists")
	}
	return storeError(op, err)
}

// Trigger returns trigger id, read consistently. NotFound
// TRIGGER_NOT_FOUND.
func (s *Triggers) Trigger(ctx context.Context, id string) (trigger.Trigger, error) {
	const op = "store.Trigger"
	var it triggerItem
	err := s.table.Get("PK", triggerPK(id)).Range("SK", dynamo.Equal, triggerSK).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return trigger.Trigger{}, errs.Wrap(op, errTriggerNotFound)
	}
	if err != nil {
		return trigger.Trigger{}, storeError(op, err)
	}
	t, err := it.trigger()
	return t, errs.Wrap(op, err)
}

// WorkflowTriggers returns the triggers of workflowID, most recently
// updated first: one consistent Query of the references in the workflow's
// collection, then one consistent BatchGetItem (a user has at most
// trigger.MaxPerUser triggers).
func (s *Triggers) WorkflowTriggers(ctx context.Context, workflowID string) ([]trigger.Trigger, error) {
	const op = "store.WorkflowTriggers"
	var refs []triggerRefItem
	err := s.table.Get("PK", workflowPK(workflowID)).Range("SK", dynamo.BeginsWith, triggerRefPrefix).Consistent(true).All(ctx, &refs)
	if err != nil {
		return nil, storeError(op, err)
	}
	out := []trigger.Trigger{}
	if len(refs) == 0 {
		return out, nil
	}
	keys := make([]dynamo.Keyed, 0, len(refs))
	for _, r := range refs {
		keys = append(keys, dynamo.Keys{triggerPK(r.TriggerID), triggerSK})
	}
	var items []triggerItem
	for len(keys) > 0 {
		n := min(len(keys), 100)
		var page []triggerItem
		if err := s.table.Batch("PK", "SK").Get(keys[:n]...).Consistent(true).All(ctx, &page); err != nil && !errors.Is(err, dynamo.ErrNotFound) {
			return nil, storeError(op, err)
		}
		items, keys = append(items, page...), keys[n:]
	}
	for _, it := range items {
		t, err := it.trigger()
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].UpdatedAt.Equal(out[j].UpdatedAt) {
			return out[i].UpdatedAt.After(out[j].UpdatedAt)
		}
		return out[i].ID > out[j].ID
	})
	return out, nil
}

// UpdateTrigger writes next's configuration and version on condition that
// the stored version is readVersion (and the trigger exists); the markers
// and the last fire are not touched. Conflict CONCURRENT_UPDATE when the
// condition fails (the caller re-reads: NotFound then if it is gone).
func (s *Triggers) UpdateTrigger(ctx context.Context, next trigger.Trigger, readVersion int) error {
	const op = "store.UpdateTrigger"
	in, err := encodeInput(next.Input)
	if err != nil {
		return errs.Wrap(op, err)
	}
	u := s.table.Update("PK", triggerPK(next.ID)).Range("SK", triggerSK).
		Set("enabled", next.Enabled).Set("schedule", next.Schedule).Set("timezone", next.Timezone).Set("input", in).
		Set("overlap", next.Overlap).Set("secretNonce", next.SecretNonce).Set("previousNonce", next.PreviousNonce).
		Set("previousExpiresAt", next.PreviousExpiresAt).Set("version", next.Version).Set("updatedAt", next.UpdatedAt).
		Set("workflowVersion", next.WorkflowVersion)
	if !next.ScheduleStart.IsZero() {
		u.Set("scheduleStart", next.ScheduleStart)
	}
	err = u.If("attribute_exists(PK) AND $ = ?", "version", readVersion).Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, trigger.CodeConcurrentUpdate, "the trigger changed concurrently").WithCause(err)
	}
	return storeError(op, err)
}

// DeleteTrigger deletes t and its reference and decrements its owner's
// count in one transaction conditioned on the trigger existing. NotFound
// TRIGGER_NOT_FOUND when it is already gone.
func (s *Triggers) DeleteTrigger(ctx context.Context, t trigger.Trigger) error {
	const op = "store.DeleteTrigger"
	pk, sk := triggerCounterKey(t.UserID)
	err := s.db.WriteTx().
		Delete(s.table.Delete("PK", triggerPK(t.ID)).Range("SK", triggerSK).If("attribute_exists(PK)")).
		Delete(s.table.Delete("PK", workflowPK(t.WorkflowID)).Range("SK", triggerRefPrefix+t.ID)).
		Update(s.table.Update("PK", pk).Range("SK", sk).Add("n", -1)).
		Run(ctx)
	if isConditionFailure(err) {
		return errs.Wrap(op, errTriggerNotFound)
	}
	return storeError(op, err)
}

// conditional runs u and reports whether its condition held.
func conditional(ctx context.Context, op string, u *dynamo.Update) (bool, error) {
	err := u.Run(ctx)
	if isConditionFailure(err) {
		return false, nil
	}
	if err != nil {
		return false, storeError(op, err)
	}
	return true, nil
}

// SetActive makes runID the active run since at, on condition that the
// trigger exists and has no active run or has runID.
func (s *Triggers) SetActive(ctx context.Context, triggerID, runID string, at time.Time) (bool, error) {
	return conditional(ctx, "store.SetActive", s.table.Update("PK", triggerPK(triggerID)).Range("SK", triggerSK).
		Set("activeRunId", runID).Set("activeSince", at).
		If("attribute_exists(PK) AND (attribute_not_exists(activeRunId) OR activeRunId = ?)", runID))
}

// SetBuffered makes runID the waiting run, on condition that another run
// is active and none or runID is waiting.
func (s *Triggers) SetBuffered(ctx context.Context, triggerID, runID string) (bool, error) {
	return conditional(ctx, "store.SetBuffered", s.table.Update("PK", triggerPK(triggerID)).Range("SK", triggerSK).
		Set("bufferedRunId", runID).
		If("attribute_exists(activeRunId) AND activeRunId <> ? AND (attribute_not_exists(bufferedRunId) OR bufferedRunId = ?)", runID, runID))
}

// EndActive ends the active run runID: the waiting run, if any, becomes
// the active one since at (returned as next), else the marker goes. Each
// step is one conditional update naming runID; a waiting run added
// between the two is seen by the next round.
func (s *Triggers) EndActive(ctx context.Context, triggerID, runID string, at time.Time) (string, bool, error) {
	const op = "store.EndActive"
	for range 3 {
		var after struct {
			ActiveRunID string `dynamo:"activeRunId"`
		}
		err := s.table.Update("PK", triggerPK(triggerID)).Range("SK", triggerSK).
			SetExpr("activeRunId = bufferedRunId").Set("activeSince", at).Remove("bufferedRunId").
			If("activeRunId = ? AND attribute_exists(bufferedRunId)", runID).Value(ctx, &after)
		if err == nil {
			return after.ActiveRunID, true, nil
		}
		if !isConditionFailure(err) {
			return "", false, storeError(op, err)
		}
		ok, err := conditional(ctx, op, s.table.Update("PK", triggerPK(triggerID)).Range("SK", triggerSK).
			Remove("activeRunId", "activeSince").
			If("activeRunId = ? AND attribute_not_exists(bufferedRunId)", runID))
		if err != nil || ok {
			return "", ok, err
		}
		// Neither held: runID is not the active run, or a waiting run
		// came between the two updates.
		var cur struct {
			ActiveRunID string `dynamo:"activeRunId"`
		}
		err = s.table.Get("PK", triggerPK(triggerID)).Range("SK", dynamo.Equal, triggerSK).Project("activeRunId").Consistent(true).One(ctx, &cur)
		if errors.Is(err, dynamo.ErrNotFound) || err == nil && cur.ActiveRunID != runID {
			return "", false, nil
		}
		if err != nil {
			return "", false, storeError(op, err)
		}
	}
	return "", false, errs.E(op, errs.Unavailable, "STORAGE_UNAVAILABLE", "the trigger's marker kept changing; retry")
}

// ClearActive removes the active run and any waiting one, on condition
// that the active run is runID.
func (s *Triggers) ClearActive(ctx context.Context, triggerID, runID string) error {
	_, err := conditional(ctx, "store.ClearActive", s.table.Update("PK", triggerPK(triggerID)).Range("SK", triggerSK).
		Remove("activeRunId", "activeSince", "bufferedRunId").If("activeRunId = ?", runID))
	return err
}

// RecordFire sets the trigger's last fire, if the trigger exists.
func (s *Triggers) RecordFire(ctx context.Context, triggerID string, f trigger.Fire) error {
	b, err := json.Marshal(f)
	if err != nil {
		return errs.Wrap("store.RecordFire", err)
	}
	_, err = conditional(ctx, "store.RecordFire", s.table.Update("PK", triggerPK(triggerID)).Range("SK", triggerSK).
		Set("lastFire", string(b)).If("attribute_exists(PK)"))
	return err
}

// ClaimDeliveries stores ds, the deliveries of one webhook call, on
// condition that none of their keys holds an unexpired delivery: one
// conditional PutItem, or one transaction of them for several, so that
// either all are stored or none is. held is nil when they were stored;
// otherwise, read consistently, it has for each of ds the delivery that
// holds its key (the zero Delivery where none does).
func (s *Triggers) ClaimDeliveries(ctx context.Context, ds []trigger.Delivery) ([]trigger.Delivery, error) {
	const op = "store.ClaimDeliveries"
	if len(ds) == 0 {
		return nil, errs.E(op, errs.Internal, "INTERNAL", "no delivery to claim")
	}
	for range 2 {
		var err error
		if len(ds) == 1 {
			err = s.claimPut(ds[0]).Run(ctx)
		} else {
			tx := s.db.WriteTx()
			for _, d := range ds {
				tx.Put(s.claimPut(d))
			}
			err = tx.Run(ctx)
		}
		if err == nil {
			return nil, nil
		}
		if !isConditionFailure(err) {
			return nil, storeError(op, err)
		}
		held := make([]trigger.Delivery, len(ds))
		found := false
		for i, d := range ds {
			var old deliveryItem
			err := s.table.Get("PK", triggerPK(d.TriggerID)).Range("SK", dynamo.Equal, deliveryPrefix+d.KeyHash).Consistent(true).One(ctx, &old)
			if errors.Is(err, dynamo.ErrNotFound) || err == nil && old.ExpiresAt <= d.CreatedAt.Unix() {
				continue
			}
			if err != nil {
				return nil, storeError(op, err)
			}
			held[i] = trigger.Delivery{TriggerID: d.TriggerID, KeyHash: d.KeyHash, BodyHash: old.BodyHash, RunID: old.RunID,
				CreatedAt: old.CreatedAt, ExpiresAt: time.Unix(old.ExpiresAt, 0)}
			found = true
		}
		if found {
			return held, nil
		}
		// The holder expired or was deleted in between: claim again.
	}
	return nil, errs.E(op, errs.Unavailable, "STORAGE_UNAVAILABLE", "storage is temporarily unavailable; retry shortly")
}

// claimPut is the conditional Put of delivery d: its key holds no
// delivery, or an expired one.
func (s *Triggers) claimPut(d trigger.Delivery) *dynamo.Put {
	it := deliveryItem{PK: triggerPK(d.TriggerID), SK: deliveryPrefix + d.KeyHash, Type: "delivery",
		RunID: d.RunID, BodyHash: d.BodyHash, CreatedAt: d.CreatedAt, ExpiresAt: d.ExpiresAt.Unix()}
	return s.table.Put(it).If("attribute_not_exists(PK) OR expiresAt <= ?", d.CreatedAt.Unix())
}

// DueSchedules is the local scheduler (the dev server and tests): it
// implements trigger.Scheduler and trigger.DueStore in the Data table.
// Each enabled schedule that fires again is one item, PK TRIGGER#<id>,
// SK DUE, holding the schedule as EventBridge Scheduler would (the
// expression, zone, start and the trigger version), and indexed sparsely
// by its next fire in GSI1 (GSI1PK TRIGGERS#DUE, GSI1SK <nextFireAt>#<id>):
// finding the due schedules is one Query. A disabled schedule, or one that
// never fires again, has no item. In AWS, EventBridge Scheduler keeps the
// schedules instead and nothing reads this index.
type DueSchedules struct {
	table dynamo.Table
	now   func() time.Time
}

// NewDueSchedules returns the local scheduler over the named Data table;
// now (nil: time.Now) decides a new schedule's first fire.
func NewDueSchedules(db *dynamo.DB, dataTable string, now func() time.Time) *DueSchedules {
	if now == nil {
		now = time.Now
	}
	return &DueSchedules{table: db.Table(dataTable), now: now}
}

const (
	dueSK    = "DUE"
	dueGSIPK = "TRIGGERS#DUE"
)

type dueItem struct {
	PK, SK         string
	GSI1PK, GSI1SK string
	Type           string    `dynamo:"type"`
	TriggerID      string    `dynamo:"triggerId"`
	Version        int       `dynamo:"version"`
	Expression     string    `dynamo:"expression"`
	Timezone       string    `dynamo:"timezone"`
	Start          time.Time `dynamo:"start"`
	NextFireAt     string    `dynamo:"nextFireAt"` // timeKey
}

func dueGSISK(next time.Time, id string) string { return next.UTC().Format(timeKey) + "#" + id }

// Put stores spec's schedule with its first fire after now; a disabled
// schedule or one that never fires again is removed instead. Invalid,
// naming "schedule" or "timezone", for an expression that does not parse.
func (s *DueSchedules) Put(ctx context.Context, spec trigger.ScheduleSpec) error {
	const op = "store.DueSchedules.Put"
	sch, err := schedule.Parse(spec.Expression, spec.Timezone)
	if err != nil {
		return errs.Wrap(op, err)
	}
	next, ok := sch.Next(spec.Start, s.now())
	if !spec.Enabled || !ok {
		return s.Delete(ctx, spec.TriggerID)
	}
	err = s.table.Put(dueItem{PK: triggerPK(spec.TriggerID), SK: dueSK, GSI1PK: dueGSIPK, GSI1SK: dueGSISK(next, spec.TriggerID),
		Type: "dueSchedule", TriggerID: spec.TriggerID, Version: spec.Version, Expression: spec.Expression, Timezone: sch.Timezone(),
		Start: spec.Start, NextFireAt: next.UTC().Format(timeKey)}).Run(ctx)
	return storeError(op, err)
}

// Delete removes triggerID's schedule.
func (s *DueSchedules) Delete(ctx context.Context, triggerID string) error {
	return storeError("store.DueSchedules.Delete", s.table.Delete("PK", triggerPK(triggerID)).Range("SK", dueSK).Run(ctx))
}

// Due returns at most limit schedules due at now, earliest first: one
// Query of GSI1.
func (s *DueSchedules) Due(ctx context.Context, now time.Time, limit int) ([]trigger.DueSchedule, error) {
	const op = "store.DueSchedules.Due"
	var items []dueItem
	err := s.table.Get("GSI1PK", dueGSIPK).Index("GSI1").Range("GSI1SK", dynamo.LessOrEqual, now.UTC().Format(timeKey)+"#~").
		Limit(limit).All(ctx, &items)
	if err != nil {
		return nil, storeError(op, err)
	}
	out := make([]trigger.DueSchedule, 0, len(items))
	for _, it := range items {
		next, err := time.Parse(timeKey, it.NextFireAt)
		if err != nil {
			return nil, errs.E(op, errs.Internal, "", "internal error").WithCause(fmt.Errorf("item PK=%q SK=DUE: nextFireAt %q: %w", it.PK, it.NextFireAt, err))
		}
		out = append(out, trigger.DueSchedule{TriggerID: it.TriggerID, Version: it.Version, Expression: it.Expression,
			Timezone: it.Timezone, Start: it.Start, NextFireAt: next})
	}
	return out, nil
}

// Advance moves d's next fire to next (removes d when next is zero), on
// condition that its next fire and version are still those Due read.
func (s *DueSchedules) Advance(ctx context.Context, d trigger.DueSchedule, next time.Time) (bool, error) {
	const op = "store.DueSchedules.Advance"
	cond, read := "$ = ? AND $ = ?", []any{"nextFireAt", d.NextFireAt.UTC().Format(timeKey), "version", d.Version}
	var err error
	if next.IsZero() {
		err = s.table.Delete("PK", triggerPK(d.TriggerID)).Range("SK", dueSK).If(cond, read...).Run(ctx)
	} else {
		err = s.table.Update("PK", triggerPK(d.TriggerID)).Range("SK", dueSK).
			Set("nextFireAt", next.UTC().Format(timeKey)).Set("GSI1SK", dueGSISK(next, d.TriggerID)).If(cond, read...).Run(ctx)
	}
	if isConditionFailure(err) {
		return false, nil
	}
	if err != nil {
		return false, storeError(op, err)
	}
	return true, nil
}
