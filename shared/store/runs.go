package store

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/workflow"
)

// Runs stores workflow runs in the Data table, each in an item collection
// of its own, PK RUN#<runId>:
//   - SK RUN: the run item: status, steps and plan (JSON), attempt,
//     version (incremented by every write), trigger, input;
//   - the run's event log (joblog.go), kind workflow.RunKind, whose head
//     names the run item (target) and holds the run's lease;
//   - SK LIST: the run's list entry (runListItem): GSI1 (GSI1PK
//     WFRUNS#<workflowId>, GSI1SK <startedAt>#<runId>) lists a workflow's
//     runs and finds them when the workflow is deleted, and for a run
//     started in a chat GSI2 (GSI2PK CHATRUNS#<chatId>, GSI2SK
//     <startedAt>#<runId>) lists the chat's runs. The entry carries
//     those keys instead of the run item, so that a checkpoint,
//     which rewrites the run item with all its steps, writes no index
//     copy of it (a run item's index copies were two thirds of a
//     checkpoint's write units). Its attributes never change (the
//     run's id and its index keys, from its workflow, chat and start),
//     so it is written once, with the run, and deleted last, with it.
//     A run stored before it (its keys on the run item) is listed and
//     deleted the same way, and moves its keys to a list entry when
//     LoggedRun reads it with its log still active (moveListKeys),
//     before the runner's next checkpoint.
//
// So a run is read by id with one GetItem, with its log head in one
// transactional read, and a checkpoint writes the run item, the
// checkpoint's events and the lease renewal in one transaction. Deleting a
// chat or a workflow deletes its runs' collections. It implements
// runs.Store.
type Runs struct {
	db    *dynamo.DB
	table dynamo.Table
	blobs blob.Backend
}

// NewRuns returns a Runs over the named Data table.
func NewRuns(db *dynamo.DB, dataTable string) *Runs {
	return &Runs{db: db, table: db.Table(dataTable)}
}

// WithBlobs returns s deleting, with each run it deletes, the run's values
// kept in b (blob.PrefixRuns + "<runId>/"); nil b: none are kept.
func (s *Runs) WithBlobs(b blob.Backend) *Runs {
	c := *s
	c.blobs = b
	return &c
}

// runKind is the job kind of runs' logs (workflow.RunKind), named here so
// that the store can place a job by its kind (jobPK).
const runKind = workflow.RunKind

const (
	runSK     = "RUN"
	runListSK = "LIST"
)

func runPK(id string) string                   { return "RUN#" + id }
func workflowRunsGSI(workflowID string) string { return "WFRUNS#" + workflowID }
func chatRunsGSI(chatID string) string         { return "CHATRUNS#" + chatID }
func runIndexSK(r workflow.Run) string         { return r.StartedAt.UTC().Format(timeKey) + "#" + r.ID }

// runItem is a run item, and the shape the lists read a run's index entry
// in: its list entry (SK LIST: the keys and the id only) or, for a run
// stored before list entries, the run item itself (SK RUN, with the keys).
type runItem struct {
	PK, SK     string
	GSI1PK     string `dynamo:",omitempty"`
	GSI1SK     string `dynamo:",omitempty"`
	GSI2PK     string `dynamo:",omitempty"`
	GSI2SK     string `dynamo:",omitempty"`
	Type       string `dynamo:"type"`
	ID         string `dynamo:"id"`
	ChatID     string `dynamo:"chatId,omitempty"`
	WorkflowID string `dynamo:"workflowId"`
	UserID     string `dynamo:"userId"`
	Status     string `dynamo:"status"`
	// StepMap holds each step's JSON under stepKey(i), so that a
	// checkpoint rewrites only the steps that changed. Steps, the JSON
	// array of them all, is how runs were stored before; a write of
	// every step (stepsUpdate) replaces it with StepMap, and a reader
	// takes Steps when it is there (only an older writer sets it).
	StepMap     map[string]string `dynamo:"stepMap,omitempty"`
	Steps       string            `dynamo:"steps,omitempty"` // JSON
	Error       string            `dynamo:"error,omitempty"`
	StartedAt   time.Time         `dynamo:"startedAt"`
	CompletedAt *time.Time        `dynamo:"completedAt,omitempty"`
	Version     int               `dynamo:"version"`
	Attempt     int               `dynamo:"attempt,omitempty"`
	WFVersion   int               `dynamo:"workflowVersion,omitempty"`
	RetryOf     string            `dynamo:"retryOf,omitempty"`
	// RetryRoot is the first run of the retries' chain (a retry's);
	// LatestRetry, on a root, the last retry started in the chain
	// (CreateRetry).
	RetryRoot   string   `dynamo:"retryRoot,omitempty"`
	LatestRetry string   `dynamo:"latestRetry,omitempty"`
	Plan        string   `dynamo:"plan,omitempty"`    // JSON of the steps' snapshot
	PlanRef     string   `dynamo:"planRef,omitempty"` // or its key in the blob store
	Trigger     string   `dynamo:"trigger,omitempty"` // JSON
	Input       string   `dynamo:"input,omitempty"`   // JSON
	InputFiles  []string `dynamo:"inputFiles,omitempty,set"`
	// LogSeq is the last event of the run's log as the last checkpoint
	// wrote it (the head's lastSeq lags when that checkpoint left the
	// head alone: SaveCheckpoint).
	LogSeq      int64    `dynamo:"logSeq,omitempty"`
	ParentRunID string   `dynamo:"parentRunId,omitempty"`
	Depth       int      `dynamo:"depth,omitempty"`
	Lineage     []string `dynamo:"lineage,omitempty"` // a list: the root's workflow first
}

// runListItem is a run's list entry (SK LIST): its id and its index
// keys, in GSI1 under its workflow and, for a run started in a chat, in
// GSI2 under the chat.
type runListItem struct {
	PK, SK string
	GSI1PK string
	GSI1SK string
	GSI2PK string `dynamo:",omitempty"`
	GSI2SK string `dynamo:",omitempty"`
	Type   string `dynamo:"type"`
	ID     string `dynamo:"id"`
}

func newRunListItem(r workflow.Run) runListItem {
	l := runListItem{PK: runPK(r.ID), SK: runListSK, GSI1PK: workflowRunsGSI(r.WorkflowID), GSI1SK: runIndexSK(r), Type: "runlist", ID: r.ID}
	if r.ChatID != "" {
		l.GSI2PK, l.GSI2SK = chatRunsGSI(r.ChatID), runIndexSK(r)
	}
	return l
}

func newRunItem(r workflow.Run) (runItem, error) {
	steps, err := stepMap(r.Steps, nil, nil)
	if err != nil {
		return runItem{}, err
	}
	it := runItem{
		PK: runPK(r.ID), SK: runSK, Type: "run",
		ID: r.ID, ChatID: r.ChatID, WorkflowID: r.WorkflowID, UserID: r.UserID, Status: r.Status, StepMap: steps,
		Error: r.Error, StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, Version: 1,
		Attempt: r.Attempt, WFVersion: r.WorkflowVersion, RetryOf: r.RetryOf, RetryRoot: r.RetryRoot, InputFiles: r.InputFiles,
		ParentRunID: r.ParentRunID, Depth: r.Depth, Lineage: r.Lineage,
	}
	for _, f := range []struct {
		dst *string
		v   any
		ok  bool
	}{{&it.Plan, r.Plan, r.Plan != nil}, {&it.Trigger, r.Trigger, r.Trigger != nil}, {&it.Input, r.Input, r.Input != nil}} {
		if !f.ok {
			continue
		}
		b, err := json.Marshal(f.v)
		if err != nil {
			return runItem{}, fmt.Errorf("encode run: %w", err)
		}
		*f.dst = string(b)
	}
	return it, nil
}

// stepKey is step i's key in a run item's stepMap.
func stepKey(i int) string { return fmt.Sprintf("s%03d", i) }

// stepMap is the stepMap of steps: encoded[i] when given (the writer's
// encoding), else step i encoded here with the values c holds.
func stepMap(steps []workflow.RunStep, encoded [][]byte, c *workflow.ValueJSON) (map[string]string, error) {
	m := make(map[string]string, len(steps))
	for i, s := range steps {
		if i < len(encoded) && encoded[i] != nil {
			m[stepKey(i)] = string(encoded[i])
			continue
		}
		b, err := workflow.EncodeStep(s, c)
		if err != nil {
			return nil, fmt.Errorf("encode run step %d: %w", i, err)
		}
		m[stepKey(i)] = string(b)
	}
	return m, nil
}

// decodeStepMap returns the steps of a run item's stepMap, in order.
func decodeStepMap(pk, sk string, m map[string]string) ([]workflow.RunStep, error) {
	steps := make([]workflow.RunStep, len(m))
	for i := range steps {
		data, ok := m[stepKey(i)]
		if !ok {
			return nil, errs.E("store.Runs", errs.Internal, "", "internal error").
				WithCause(fmt.Errorf("item %s %s: stepMap has %d steps but no %s", pk, sk, len(m), stepKey(i)))
		}
		if err := decodeAttr(pk, sk, "stepMap."+stepKey(i), data, &steps[i]); err != nil {
			return nil, err
		}
	}
	return steps, nil
}

func (it runItem) run() (workflow.Run, error) {
	r := workflow.Run{ID: it.ID, ChatID: it.ChatID, WorkflowID: it.WorkflowID, UserID: it.UserID, Status: it.Status,
		Error: it.Error, StartedAt: it.StartedAt, CompletedAt: it.CompletedAt, Steps: []workflow.RunStep{},
		Attempt: max(it.Attempt, 1), WorkflowVersion: it.WFVersion, RetryOf: it.RetryOf, RetryRoot: it.RetryRoot, LatestRetry: it.LatestRetry, PlanRef: it.PlanRef,
		InputFiles: it.InputFiles, ParentRunID: it.ParentRunID, Depth: it.Depth, Lineage: it.Lineage}
	for _, f := range []struct {
		attr, data string
		dst        any
	}{{"steps", it.Steps, &r.Steps}, {"plan", it.Plan, &r.Plan}, {"trigger", it.Trigger, &r.Trigger}, {"input", it.Input, &r.Input}} {
		if f.data == "" {
			continue
		}
		if err := decodeAttr(it.PK, it.SK, f.attr, f.data, f.dst); err != nil {
			return workflow.Run{}, err
		}
	}
	if it.Steps == "" && len(it.StepMap) > 0 {
		steps, err := decodeStepMap(it.PK, it.SK, it.StepMap)
		if err != nil {
			return workflow.Run{}, err
		}
		r.Steps = steps
	}
	return r, nil
}

// PlanInlineBytes is the largest snapshot of a run's steps kept in its
// record when a blob store is configured (Runs.WithBlobs).
const PlanInlineBytes = 32 << 10

var errRunNotFound = errs.E("store.Runs", errs.NotFound, workflow.CodeRunNotFound, "workflow run not found")

func (s *Runs) logs() eventLogs { return eventLogs{db: s.db, table: s.table} }

// CreateRun stores the new run r with its event log, active with lease l
// and no events yet, and its list entry, in one transaction; a run in a
// chat also checks that the chat exists and is not being deleted.
// NotFound CHAT_NOT_FOUND,
// Conflict RUN_EXISTS.
func (s *Runs) CreateRun(ctx context.Context, r workflow.Run, l job.Lease) error {
	return s.createRun(ctx, "store.CreateRun", r, l, nil)
}

// CreateRetry stores retry run r as CreateRun does and, in the same
// transaction, records it as the latest retry of its chain, on the
// chain's root (r.RetryRoot, else the run it retries, r.RetryOf),
// conditioned on the root's latest retry being after, the one the caller
// read ("" for none): so that of retries started at once from the same
// reading, one is stored. NotFound CHAT_NOT_FOUND, RUN_NOT_FOUND (the
// root is gone), Conflict RUN_EXISTS, Conflict RUN_ACTIVE (another retry
// in the chain was started meanwhile).
func (s *Runs) CreateRetry(ctx context.Context, r workflow.Run, l job.Lease, after string) error {
	const op = "store.CreateRetry"
	if r.RetryOf == "" {
		return errs.E(op, errs.Internal, "", "internal error").WithCause(errors.New("a retry names no run it retries"))
	}
	return s.createRun(ctx, op, r, l, &after)
}

// createRun is CreateRun, and CreateRetry when retryAfter is set.
func (s *Runs) createRun(ctx context.Context, op string, r workflow.Run, l job.Lease, retryAfter *string) error {
	it, err := newRunItem(r)
	if err != nil {
		return errs.Wrap(op, err)
	}
	if r.PlanRef != "" {
		it.Plan, it.PlanRef = "", r.PlanRef // a retry's, kept by the retried run
	}
	if len(it.Plan) > PlanInlineBytes && s.blobs != nil {
		// A large workflow's snapshot (a definition may be 350 KiB) goes
		// to the blob store, so that the run's record keeps room for its
		// values.
		key := workflow.RunBlobPrefix(r.ID) + "plan.json"
		if _, err := blob.PutBytes(ctx, s.blobs, key, []byte(it.Plan), "application/json"); err != nil {
			return errs.Wrap(op, err)
		}
		it.Plan, it.PlanRef = "", key
	}
	tx := s.db.WriteTx().Put(s.table.Put(it).If("attribute_not_exists(PK)"))
	if err := s.logs().start(tx, logStart{PK: it.PK, Kind: workflow.RunKind, ID: r.ID, Status: r.Status, Target: it.SK, Lease: l}); err != nil {
		return errs.Wrap(op, err)
	}
	tx.Put(s.table.Put(newRunListItem(r)))
	if r.ChatID != "" {
		tx.Check(s.table.Check("PK", chatPK(r.ChatID)).Range("SK", chatSK).If(collectionWritable))
	}
	retried := 3 // the index of the retried run's update in tx
	if r.ChatID != "" {
		retried = 4
	}
	root := cmp.Or(r.RetryRoot, r.RetryOf)
	if retryAfter != nil {
		u := s.table.Update("PK", runPK(root)).Range("SK", runSK).Set("latestRetry", r.ID).Add("version", 1)
		if *retryAfter == "" {
			u.If("attribute_exists(PK) AND attribute_not_exists(latestRetry)")
		} else {
			u.If("attribute_exists(PK) AND latestRetry = ?", *retryAfter)
		}
		tx.Update(u)
	}
	err = tx.Run(ctx)
	switch {
	case failedCondition(err, 0), failedCondition(err, 1):
		return errs.E(op, errs.Conflict, workflow.CodeRunExists, "a workflow run with this id exists")
	case retryAfter != nil && failedCondition(err, retried):
		return s.retriedMeanwhile(ctx, op, root)
	case isConditionFailure(err):
		return errs.Wrap(op, errChatNotFound)
	}
	return storeError(op, err)
}

// retriedMeanwhile explains a retry of run id whose condition on it
// failed: NotFound RUN_NOT_FOUND when the run is gone, else Conflict
// RUN_ACTIVE (another retry of it was started since it was read); the
// store's error when the run cannot be read.
func (s *Runs) retriedMeanwhile(ctx context.Context, op, id string) error {
	if _, err := s.Run(ctx, id); err != nil {
		return errs.Wrap(op, err) // NotFound, or the store's error
	}
	return errs.E(op, errs.Conflict, workflow.CodeRunActive, "another retry of this workflow run was started meanwhile")
}

// runUpdate returns the update of r's item that writes its status, steps
// (see stepsUpdate), error and completedAt and increments its version,
// without condition.
func (s *Runs) runUpdate(r workflow.Run, c workflow.Checkpoint) (*dynamo.Update, error) {
	u := s.table.Update("PK", runPK(r.ID)).Range("SK", runSK).
		Set("status", r.Status).Add("version", 1)
	if err := stepsUpdate(u, r.Steps, c); err != nil {
		return nil, err
	}
	if r.Error != "" {
		u.Set("error", r.Error)
	} else {
		u.Remove("error")
	}
	switch {
	case r.CompletedAt != nil && c.IfStatus == workflow.RunCancelled:
		// A runner recording what it did by the time it found its run
		// cancelled: the run ended when the cancel recorded it.
		u.SetExpr("$ = if_not_exists($, ?)", "completedAt", "completedAt", *r.CompletedAt)
	case r.CompletedAt != nil:
		u.Set("completedAt", *r.CompletedAt)
	default:
		u.Remove("completedAt")
	}
	return u, nil
}

// stepsUpdate adds to u the write of steps: with c.Partial, of the steps
// c.Changed names alone (one member of stepMap each: the request carries
// what changed, not the whole run); otherwise of every step, as stepMap,
// removing the older steps attribute (a run stored before stepMap thus
// moves to it at its writer's first checkpoint).
func stepsUpdate(u *dynamo.Update, steps []workflow.RunStep, c workflow.Checkpoint) error {
	if c.Partial {
		for _, i := range c.Changed {
			if i < 0 || i >= len(steps) {
				return fmt.Errorf("encode run steps: changed step %d of %d", i, len(steps))
			}
			b := []byte(nil)
			if i < len(c.StepsJSON) {
				b = c.StepsJSON[i]
			}
			if b == nil {
				var err error
				if b, err = workflow.EncodeStep(steps[i], c.Values); err != nil {
					return fmt.Errorf("encode run step %d: %w", i, err)
				}
			}
			u.Set("stepMap."+stepKey(i), string(b))
		}
		return nil
	}
	if len(steps) == 0 {
		u.Set("steps", "[]").Remove("stepMap")
		return nil
	}
	m, err := stepMap(steps, c.StepsJSON, c.Values)
	if err != nil {
		return err
	}
	u.Set("stepMap", m).Remove("steps")
	return nil
}

// attemptIs is the condition that the run item exists, its status is the
// first value and its attempt the second (a run stored before attempts
// were counted is attempt 1).
const attemptIs = "attribute_exists(PK) AND 'status' = ? AND (attempt = ? OR (attribute_not_exists(attempt) AND ? = ?))"

// SaveCheckpoint writes c in one transaction: the run item (conditioned
// on its status and attempt, and holding the log's last event, logSeq),
// the events (conditioned on their slot being free: they follow the log's
// last write, and no stop or end took the slot) and, when c renews the
// lease or ends the log, the log head (conditioned on the log being
// active). A checkpoint of events that leaves the lease as it is (most
// step transitions: the lease is renewed every third of it) leaves the
// head alone too, two items instead of three: the run's condition already
// fails once the run is cancelled, taken over or ended (each of which
// writes the run item), and a reader of the log takes its last event from
// the slots or from the run item (LoggedRun), not from the head's
// lastSeq. A failed condition is Conflict RUN_STATE_CHANGED: the run was
// cancelled, another attempt took it over, or the sweeper ended it.
func (s *Runs) SaveCheckpoint(ctx context.Context, c workflow.Checkpoint) error {
	const op = "store.SaveCheckpoint"
	r := c.Run
	u, err := s.runUpdate(r, c)
	if err != nil {
		return errs.Wrap(op, err)
	}
	if n := len(c.Events); n > 0 {
		u.Set("logSeq", c.Events[n-1].Seq)
	}
	u.If(attemptIs, c.IfStatus, r.Attempt, r.Attempt, 1)
	tx := s.db.WriteTx().Update(u)
	now := time.Now()
	pk := runPK(r.ID)
	switch {
	case c.End:
		err = s.logs().end(tx, pk, r.ID, r.Status, c.Events, c.ExpiredBefore, now)
	case len(c.Events) > 0 && c.LeaseUntil.IsZero():
		err = s.logs().putSlots(tx, pk, r.ID, c.Events, 0, slotFree, now)
	case len(c.Events) > 0:
		err = s.logs().appendTx(tx, pk, r.ID, c.Events, job.Lease{Until: c.LeaseUntil}, now)
	default:
		tx.Update(s.logs().renew(pk, r.ID, nil, job.Lease{Until: c.LeaseUntil}, now).If("active = ?", true))
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

// LoggedRun returns run runID and the head of its log, from one strongly
// consistent transactional read of both. A run stored before list entries
// whose log is still active (a run its runner goes on with) moves its
// index keys to its list entry first (moveListKeys: one more call, once
// per such run), so that its checkpoints write no index copy. NotFound
// RUN_NOT_FOUND.
func (s *Runs) LoggedRun(ctx context.Context, runID string) (workflow.Run, job.Head, error) {
	const op = "store.LoggedRun"
	var (
		it runItem
		h  logHead
	)
	err := s.db.GetTx().
		GetOne(s.table.Get("PK", runPK(runID)).Range("SK", dynamo.Equal, runSK), &it).
		GetOne(s.table.Get("PK", runPK(runID)).Range("SK", dynamo.Equal, logHeadSK(runID)), &h).
		Run(ctx)
	if errors.Is(err, dynamo.ErrNotFound) || (err == nil && (it.ID == "" || h.ID == "")) {
		return workflow.Run{}, job.Head{}, errs.Wrap(op, errRunNotFound)
	}
	if err != nil {
		return workflow.Run{}, job.Head{}, storeError(op, err)
	}
	r, err := it.run()
	if err != nil {
		return workflow.Run{}, job.Head{}, errs.Wrap(op, err)
	}
	h.LastSeq = max(h.LastSeq, it.LogSeq) // a checkpoint may have left the head behind
	if it.GSI1PK != "" && h.Active {
		// A failed move loses nothing (the old shape stays listed):
		// the next read tries again.
		_ = s.moveListKeys(ctx, it)
	}
	return r, h.job(), nil
}

// moveListKeys converts run item it, stored with its index keys, to the
// current shape in one transaction: the keys, as they are, go to the
// run's list entry and leave the run item (conditioned on it still
// holding them: a run deleted or converted meanwhile is left alone). The
// run's place in its lists, and so every cursor, stays the same. It fails
// with the transaction's error.
func (s *Runs) moveListKeys(ctx context.Context, it runItem) error {
	l := runListItem{PK: it.PK, SK: runListSK, GSI1PK: it.GSI1PK, GSI1SK: it.GSI1SK, GSI2PK: it.GSI2PK, GSI2SK: it.GSI2SK, Type: "runlist", ID: it.ID}
	u := s.table.Update("PK", it.PK).Range("SK", runSK).Remove("GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK").Add("version", 1).
		If("GSI1PK = ? AND GSI1SK = ?", it.GSI1PK, it.GSI1SK)
	return s.db.WriteTx().Update(u).Put(s.table.Put(l)).Run(ctx)
}

// ClaimRun takes over run r whose lease ended before expiredBefore for
// its next attempt: in one transaction, the run's attempt becomes
// r.Attempt+1 (conditioned on it being r.Attempt and the run active) and
// the lease is renewed to until (conditioned on it having ended before
// expiredBefore). Conflict RUN_STATE_CHANGED when another sweeper or the
// run itself moved first.
func (s *Runs) ClaimRun(ctx context.Context, r workflow.Run, expiredBefore, until time.Time) error {
	const op = "store.ClaimRun"
	pk := runPK(r.ID)
	u := s.table.Update("PK", pk).Range("SK", runSK).Set("attempt", r.Attempt+1).Add("version", 1).
		If("attribute_exists(PK) AND 'status' IN (?, ?) AND (attempt = ? OR (attribute_not_exists(attempt) AND ? = ?))",
			workflow.RunPending, workflow.RunRunning, r.Attempt, r.Attempt, 1)
	err := s.db.WriteTx().Update(u).
		Update(s.logs().renew(pk, r.ID, nil, job.Lease{Until: until}, time.Now()).If("active = ? AND leaseUntil < ?", true, expiredBefore.UnixMilli())).
		Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, workflow.CodeRunStateChanged, "the workflow run changed state")
	}
	return storeError(op, err)
}

// Run returns run runID with one strongly consistent GetItem. NotFound
// RUN_NOT_FOUND. It checks no owner: callers do.
func (s *Runs) Run(ctx context.Context, runID string) (workflow.Run, error) {
	const op = "store.Run"
	var it runItem
	err := s.table.Get("PK", runPK(runID)).Range("SK", dynamo.Equal, runSK).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return workflow.Run{}, errs.Wrap(op, errRunNotFound)
	}
	if err != nil {
		return workflow.Run{}, storeError(op, err)
	}
	r, err := it.run()
	return r, errs.Wrap(op, err)
}

// CancelRun cancels run r (as read) at now: one transaction of the
// update conditioned on the run still having r's status, which sets it
// cancelled and its unfinished steps cancelled, and of the status on its
// log's head. Conflict RUN_STATE_CHANGED when it moved on meanwhile (the
// caller reads it again). A runner holding the run notices within
// seconds while a step runs (its heartbeat reads the head), else at its
// next checkpoint, whose condition fails.
func (s *Runs) CancelRun(ctx context.Context, r workflow.Run, now time.Time) (workflow.Run, error) {
	const op = "store.CancelRun"
	prev := r.Status
	workflow.CancelRun(&r, now)
	u, err := s.runUpdate(r, workflow.Checkpoint{})
	if err != nil {
		return workflow.Run{}, errs.Wrap(op, err)
	}
	// The log's head says so too: a runner holding the run reads it
	// while a step runs and stops the step (runs.Runner's heartbeat).
	head := s.table.Update("PK", runPK(r.ID)).Range("SK", logHeadSK(r.ID)).Set("status", r.Status).If("attribute_exists(PK)")
	err = s.db.WriteTx().Update(u.If("attribute_exists(PK) AND 'status' = ?", prev)).Update(head).Run(ctx)
	if isConditionFailure(err) {
		return workflow.Run{}, errs.E(op, errs.Conflict, workflow.CodeRunStateChanged, "the workflow run changed state")
	}
	if err != nil {
		return workflow.Run{}, storeError(op, err)
	}
	return r, nil
}

// ChatOwner returns the owner of chat chatID with one GetItem. NotFound
// CHAT_NOT_FOUND.
func (s *Runs) ChatOwner(ctx context.Context, chatID string) (string, error) {
	const op = "store.ChatOwner"
	var it chatItem
	err := s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.Equal, chatSK).Project("userId").One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return "", errs.Wrap(op, errChatNotFound)
	}
	if err != nil {
		return "", storeError(op, err)
	}
	return it.UserID, nil
}

// maxCursorLen bounds a decoded runs cursor: an index sort key is far
// shorter.
const maxCursorLen = 128

var errBadRunsCursor = badCursor("store.RunsPage")

// ChatRunsPage returns up to limit runs of chat chatID, oldest first,
// after the run the cursor names (empty: from the first), and the cursor
// of the next page, empty on the last: one Query of GSI2 (eventually
// consistent) of at most limit+1 list entries and one DynamoDB page
// (1 MB), then the runs those entries name, strongly consistent, with a
// BatchGetItem per 25 of them, while the page's runs stay under about
// 1 MB (runsPageBytes). It does not check the chat: callers check its
// owner first (ChatOwner). Invalid INVALID_PAGINATION for a cursor that
// is not one it returned.
func (s *Runs) ChatRunsPage(ctx context.Context, chatID string, limit int, cursor string) ([]workflow.Run, string, error) {
	return s.page(ctx, "store.ChatRunsPage", "GSI2", "GSI2PK", chatRunsGSI(chatID), "GSI2SK", limit, cursor, dynamo.Ascending)
}

// WorkflowRunsPage returns up to limit runs of workflow workflowID,
// newest first, after the run the cursor names, as ChatRunsPage does with
// GSI1. It does not check the workflow's owner.
func (s *Runs) WorkflowRunsPage(ctx context.Context, workflowID string, limit int, cursor string) ([]workflow.Run, string, error) {
	return s.page(ctx, "store.WorkflowRunsPage", "GSI1", "GSI1PK", workflowRunsGSI(workflowID), "GSI1SK", limit, cursor, dynamo.Descending)
}

// runsPageBytes bounds a page of runs, as DynamoDB's 1 MB bounded a
// Query of the runs themselves: the page ends at the run that reaches it
// (a page holds at least one run), and the next one starts after it.
const runsPageBytes = 1 << 20

// size is about the bytes DynamoDB counts for run item it: its values
// and, roughly, its attribute names and numbers.
func (it runItem) size() int {
	n := 256 + len(it.PK) + len(it.SK) + len(it.GSI1PK) + len(it.GSI1SK) + len(it.GSI2PK) + len(it.GSI2SK) + len(it.Type) +
		len(it.ID) + len(it.ChatID) + len(it.WorkflowID) + len(it.UserID) + len(it.Status) + len(it.Steps) + len(it.Error) +
		len(it.RetryOf) + len(it.RetryRoot) + len(it.LatestRetry) + len(it.Plan) + len(it.PlanRef) + len(it.Trigger) + len(it.Input) + len(it.ParentRunID)
	for _, v := range slices.Concat(it.InputFiles, it.Lineage) {
		n += len(v) + 3
	}
	for k, v := range it.StepMap {
		n += len(k) + len(v) + 3
	}
	return n
}

// page reads a page of the index (index, hashAttr = hash), whose entries
// are runs' list entries or, for runs stored before those, the run items
// themselves (complete, as the index projects every attribute): the first
// are read from the table, the second used as they are. The cursor is the
// last listed entry's index sort key (<startedAt>#<runId>, one per run
// whatever its shape), and the next page's Query starts after it with its
// key condition, so a run converted between two pages is not listed
// twice; an entry met twice in one page (a run converted while the index
// caught up) is listed once.
func (s *Runs) page(ctx context.Context, op, index, hashAttr, hash, rangeAttr string, limit int, cursor string, order dynamo.Order) ([]workflow.Run, string, error) {
	q := s.table.Get(hashAttr, hash).Index(index).SearchLimit(limit + 1).Order(order)
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		sk, runID, ok := strings.Cut(string(raw), "#")
		if err != nil || len(raw) > maxCursorLen || !ok || len(runID) != 36 || sk == "" {
			return nil, "", errBadRunsCursor
		}
		after := dynamo.Greater
		if order == dynamo.Descending {
			after = dynamo.Less
		}
		q = q.Range(rangeAttr, after, string(raw))
	}
	var entries []runItem
	lek, err := q.AllWithLastEvaluatedKey(ctx, &entries)
	if err != nil {
		return nil, "", storeError(op, err)
	}
	key := func(it runItem) string {
		if index == "GSI2" {
			return it.GSI2SK
		}
		return it.GSI1SK
	}
	// More follow when the Query found one past the limit, or when
	// DynamoDB's 1 MB page ended first.
	more := len(entries) > limit || lek != nil
	entries = entries[:min(len(entries), limit)]
	seen := make(map[string]bool, len(entries))
	entries = slices.DeleteFunc(entries, func(it runItem) bool {
		dup := seen[it.ID]
		seen[it.ID] = true
		return dup
	})
	var (
		runs  = make([]workflow.Run, 0, len(entries))
		bytes int
		next  string
	)
	err = inBatches(ctx, op, len(entries), func(ctx context.Context, from, to int) error {
		if next != "" {
			return nil // the page is full
		}
		items, err := s.listedRuns(ctx, entries[from:to])
		if err != nil {
			return err
		}
		for i, e := range entries[from:to] {
			it, ok := items[e.ID]
			if !ok {
				continue // deleted since the index listed it
			}
			r, err := it.run()
			if err != nil {
				return err
			}
			runs, bytes = append(runs, r), bytes+it.size()
			if bytes >= runsPageBytes && from+i < len(entries)-1 {
				next = base64.RawURLEncoding.EncodeToString([]byte(key(e)))
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	if next == "" && more && len(entries) > 0 {
		next = base64.RawURLEncoding.EncodeToString([]byte(key(entries[len(entries)-1])))
	}
	return runs, next, nil
}

// listedRuns returns the run items of index entries, by run id: the
// entries that are run items (stored before list entries) as they are,
// the others' runs with one strongly consistent BatchGetItem (none when
// every entry is a run item). A run deleted since is missing.
func (s *Runs) listedRuns(ctx context.Context, entries []runItem) (map[string]runItem, error) {
	out := make(map[string]runItem, len(entries))
	var keys []dynamo.Keyed
	for _, e := range entries {
		if e.SK == runSK {
			out[e.ID] = e
			continue
		}
		keys = append(keys, dynamo.Keys{runPK(e.ID), runSK})
	}
	if len(keys) == 0 {
		return out, nil
	}
	var items []runItem
	err := s.table.Batch("PK", "SK").Get(keys...).Consistent(true).All(ctx, &items)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return nil, err
	}
	for _, it := range items {
		out[it.ID] = it
	}
	return out, nil
}

// deleteRuns deletes the collections of the runs whose index entries
// (index, hash) lists, list entries and run items of the old shape alike:
// each run's values, its log and elements, its run item, and its list
// entry last, through which a retry after a failure part-way finds the
// run again (a run of the old shape: through its run item, deleted last
// but for an entry it may have gained meanwhile).
func (s *Runs) deleteRuns(ctx context.Context, op, index, hashAttr, hash string) error {
	var keys []struct {
		ID string `dynamo:"id"`
	}
	if err := s.table.Get(hashAttr, hash).Index(index).Project("id").All(ctx, &keys); err != nil {
		return storeError(op, err)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.ID] {
			continue // a run listed by both shapes while it converted
		}
		seen[k.ID] = true
		if s.blobs != nil {
			if _, err := s.blobs.DeletePrefix(ctx, workflow.RunBlobPrefix(k.ID)); err != nil {
				return errs.Wrap(op, err)
			}
		}
		if err := deleteCollection(ctx, s.table, runPK(k.ID), runSK, runListSK); err != nil {
			return errs.Wrap(op, err)
		}
		for _, sk := range []string{runSK, runListSK} {
			if err := s.table.Delete("PK", runPK(k.ID)).Range("SK", sk).Run(ctx); err != nil {
				return storeError(op, err)
			}
		}
	}
	return nil
}

// elementItem is the output of one element of a forEach step, recorded as
// it finishes: its own item in the run's partition, so that a
// checkpoint per element writes one small item, not the whole run.
type elementItem struct {
	PK, SK string
	Type   string `dynamo:"type"`
	Output string `dynamo:"output"` // JSON
}

func elementSK(stepID string, j int) string { return fmt.Sprintf("ELEM#%s#%05d", stepID, j) }

// SaveElement records output (JSON) of element j of step stepID of run
// runID with one PutItem (a repeat overwrites: an element's output is a
// fact). NotFound RUN_NOT_FOUND when the run is gone.
func (s *Runs) SaveElement(ctx context.Context, runID, stepID string, j int, output []byte) error {
	const op = "store.SaveElement"
	err := s.table.Put(elementItem{PK: runPK(runID), SK: elementSK(stepID, j), Type: "element", Output: string(output)}).Run(ctx)
	return storeError(op, err)
}

// Elements returns the recorded outputs (JSON) of the elements of step
// stepID of run runID, by element index, with one strongly consistent
// Query (a page per 1 MB).
func (s *Runs) Elements(ctx context.Context, runID, stepID string) (map[int][]byte, error) {
	const op = "store.Elements"
	var items []elementItem
	prefix := "ELEM#" + stepID + "#"
	if err := s.table.Get("PK", runPK(runID)).Range("SK", dynamo.BeginsWith, prefix).Consistent(true).All(ctx, &items); err != nil {
		return nil, storeError(op, err)
	}
	out := make(map[int][]byte, len(items))
	for _, it := range items {
		var j int
		if _, err := fmt.Sscanf(strings.TrimPrefix(it.SK, prefix), "%d", &j); err != nil {
			return nil, errs.E(op, errs.Internal, "", "internal error").WithCause(fmt.Errorf("element item %s: %w", it.SK, err))
		}
		out[j] = []byte(it.Output)
	}
	return out, nil
}

// CountElements returns how many elements of step stepID of run runID
// have a recorded output, with one Query that counts.
func (s *Runs) CountElements(ctx context.Context, runID, stepID string) (int, error) {
	n, err := s.table.Get("PK", runPK(runID)).Range("SK", dynamo.BeginsWith, "ELEM#"+stepID+"#").Count(ctx)
	return int(n), storeError("store.CountElements", err)
}

// DeleteWorkflowRuns deletes every run of workflow workflowID, found with
// a Query of GSI1, with its log.
func (s *Runs) DeleteWorkflowRuns(ctx context.Context, workflowID string) error {
	return s.deleteRuns(ctx, "store.DeleteWorkflowRuns", "GSI1", "GSI1PK", workflowRunsGSI(workflowID))
}

// DeleteChatRuns deletes every run of chat chatID, found with a Query of
// GSI2, with its log.
func (s *Runs) DeleteChatRuns(ctx context.Context, chatID string) error {
	return s.deleteRuns(ctx, "store.DeleteChatRuns", "GSI2", "GSI2PK", chatRunsGSI(chatID))
}
