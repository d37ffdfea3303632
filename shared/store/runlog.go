package store

import (
	"context"
	"errors"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/eventlog"
	"github.com/workflowchat/service/shared/workflow"
)

// Durable runs: a run started asynchronously has, besides its run item,
// an event log of kind workflow.RunKind in its chat's collection (the
// same layout as a streamed reply's, see eventlog.go), whose head names
// the run item (target) and holds the run's lease. Every checkpoint
// writes the run item, the checkpoint's events and the lease renewal in
// one transaction.

func (s *Runs) logs() eventLogs { return eventLogs{db: s.db, table: s.table} }

// CreateLoggedRun stores the new run r with its event log, active with a
// lease until leaseUntil and no events yet, in one transaction with a
// check that its chat exists and is not being deleted. NotFound
// CHAT_NOT_FOUND, Conflict RUN_EXISTS.
func (s *Runs) CreateLoggedRun(ctx context.Context, r workflow.Run, leaseUntil time.Time) error {
	const op = "store.CreateLoggedRun"
	it, err := newRunItem(r)
	if err != nil {
		return errs.Wrap(op, err)
	}
	tx := s.db.WriteTx().
		Put(s.table.Put(it).If("attribute_not_exists(PK)")).
		Check(s.table.Check("PK", chatPK(r.ChatID)).Range("SK", chatSK).If(collectionWritable))
	if err := s.logs().start(tx, logStart{PK: chatPK(r.ChatID), Kind: workflow.RunKind, ID: r.ID, Status: r.Status,
		Target: it.SK, LeaseUntil: leaseUntil}); err != nil {
		return errs.Wrap(op, err)
	}
	err = tx.Run(ctx)
	switch {
	case failedCondition(err, 0), failedCondition(err, 2):
		return errs.E(op, errs.Conflict, "RUN_EXISTS", "a workflow run with this id exists")
	case isConditionFailure(err):
		return errs.Wrap(op, errChatNotFound)
	}
	return storeError(op, err)
}

// SaveCheckpoint writes c in one transaction: the run item (conditioned
// on its status and attempt), the events and the log head (conditioned on
// the log being active and the events following its last one). A failed
// condition is Conflict RUN_STATE_CHANGED: the run was cancelled, another
// attempt took it over, or the sweeper ended it.
func (s *Runs) SaveCheckpoint(ctx context.Context, c workflow.Checkpoint) error {
	const op = "store.SaveCheckpoint"
	r := c.Run
	u, err := s.runUpdate(r)
	if err != nil {
		return errs.Wrap(op, err)
	}
	u.If("attribute_exists(PK) AND 'status' = ? AND (attempt = ? OR (attribute_not_exists(attempt) AND ? = ?))",
		c.IfStatus, r.Attempt, r.Attempt, 1)
	tx := s.db.WriteTx().Update(u)
	now := time.Now()
	pk := chatPK(r.ChatID)
	switch {
	case c.End:
		err = s.logs().end(tx, pk, r.ID, r.Status, c.Events, c.ExpiredBefore, now)
	case len(c.Events) > 0:
		err = s.logs().appendTx(tx, pk, r.ID, c.Events, c.LeaseUntil, now)
	default:
		tx.Update(s.logs().renew(pk, r.ID, nil, c.LeaseUntil, now).If("active = ?", true))
	}
	if err != nil {
		return errs.Wrap(op, err)
	}
	err = tx.Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, workflow.CodeRunStateChanged, "the workflow run changed state")
	}
	return storeError(op, err)
}

// RenewRunLease renews the lease of run runID in chat chatID to until,
// while its log is active (a long step's heartbeat). Conflict NOT_ACTIVE
// when the run has ended.
func (s *Runs) RenewRunLease(ctx context.Context, chatID, runID string, until time.Time) error {
	return s.logs().append(ctx, chatPK(chatID), runID, nil, until, time.Now())
}

// LoggedRun returns durable run runID of chat chatID, the sequence
// number of its log's last event, whether its log is active and when its
// lease ends, from two strongly consistent reads (the log head, then the
// run item it names). NotFound RUN_NOT_FOUND when the run has no log.
func (s *Runs) LoggedRun(ctx context.Context, chatID, runID string) (workflow.Run, workflow.LogState, error) {
	const op = "store.LoggedRun"
	h, err := s.logs().head(ctx, chatPK(chatID), runID)
	if errs.Is(err, errs.NotFound) {
		return workflow.Run{}, workflow.LogState{}, errs.Wrap(op, errRunNotFound)
	}
	if err != nil {
		return workflow.Run{}, workflow.LogState{}, errs.Wrap(op, err)
	}
	var it runItem
	err = s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.Equal, h.Target).Consistent(true).One(ctx, &it)
	if err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return workflow.Run{}, workflow.LogState{}, errs.Wrap(op, errRunNotFound)
		}
		return workflow.Run{}, workflow.LogState{}, storeError(op, err)
	}
	r, err := it.run()
	if err != nil {
		return workflow.Run{}, workflow.LogState{}, errs.Wrap(op, err)
	}
	return r, workflow.LogState{LastSeq: h.LastSeq, Active: h.Active, LeaseUntil: time.UnixMilli(h.LeaseUntil).UTC()}, nil
}

// ClaimRun takes over durable run r whose lease ended before
// expiredBefore for its next attempt: in one transaction, the run's
// attempt becomes r.Attempt+1 (conditioned on it being r.Attempt and the
// run active) and the lease is renewed to until (conditioned on it having
// ended before expiredBefore). Conflict RUN_STATE_CHANGED when another
// sweeper or the run itself moved first.
func (s *Runs) ClaimRun(ctx context.Context, r workflow.Run, expiredBefore, until time.Time) error {
	const op = "store.ClaimRun"
	pk := chatPK(r.ChatID)
	u := s.table.Update("PK", pk).Range("SK", runSK(r)).Set("attempt", r.Attempt+1).Add("version", 1).
		If("attribute_exists(PK) AND 'status' IN (?, ?) AND (attempt = ? OR (attribute_not_exists(attempt) AND ? = ?))",
			workflow.RunPending, workflow.RunRunning, r.Attempt, r.Attempt, 1)
	err := s.db.WriteTx().Update(u).
		Update(s.logs().renew(pk, r.ID, nil, until, time.Now()).If("active = ? AND leaseUntil < ?", true, expiredBefore.UnixMilli())).
		Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, workflow.CodeRunStateChanged, "the workflow run changed state")
	}
	return storeError(op, err)
}

// RunEvents returns the logged events of durable run runID of chat chatID
// after seq, and whether more can come, from one strongly consistent
// Query. NotFound RUN_NOT_FOUND when the run has no log (it was not
// started asynchronously, or its log expired).
func (s *Runs) RunEvents(ctx context.Context, chatID, runID string, after int64) ([]eventlog.Record, bool, error) {
	recs, h, err := s.logs().read(ctx, chatPK(chatID), runID, after, time.Now())
	if errs.Is(err, errs.NotFound) {
		return nil, false, errs.Wrap("store.RunEvents", errRunNotFound)
	}
	return recs, h.Active, err
}

// Run returns run runID of chat chatID, from one Query of the chat's runs
// filtered on the id (it reads every run of the chat, not its messages).
// NotFound RUN_NOT_FOUND. It does not check the chat: callers check its
// owner first (ChatOwner).
func (s *Runs) Run(ctx context.Context, chatID, runID string) (workflow.Run, error) {
	const op = "store.Run"
	var items []runItem
	err := s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.BeginsWith, runSKPrefix).
		Filter("id = ?", runID).Consistent(true).All(ctx, &items)
	if err != nil {
		return workflow.Run{}, storeError(op, err)
	}
	if len(items) == 0 {
		return workflow.Run{}, errs.Wrap(op, errRunNotFound)
	}
	r, err := items[0].run()
	return r, errs.Wrap(op, err)
}
