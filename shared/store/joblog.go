package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
)

// Event logs of jobs (package job: a streamed reply, a workflow run),
// in the item collection the job lives in (a reply in its chat's, CHAT#<chatId>;
// a run in its own, RUN#<runId>):
//   - STREAM#<id>#<slot, 12 digits>: one write's events (first, last,
//     prev, reserved, events as a JSON array), written once, at the slot
//     after the event they follow (prev+1: the first event's id, unless
//     an interruption skipped ids). Every write of events is one PutItem
//     conditioned on its slot being free, so a write that is not the next
//     one fails; the same slot holds, for a while, a heartbeat (type
//     logbeat: a write of no events, which the next write replaces) or a
//     stop (type logstop, put by a stop request: the writer's next write
//     there fails, and the job's end replaces it);
//   - STREAM#<id>#~: the head, which sorts after every slot: the job's
//     kind, status, lastSeq (the last event of the writes that updated
//     the head: the start, a renewal, the end; the slots hold the rest),
//     reserved (the highest id its process may have handed out),
//     leaseUntil (Unix ms), stopRequested, target (the SK of the item the
//     job produces) and, while the job is active, `active` and the sparse
//     GSI1 keys ACTIVE#<shard> / <leaseUntil>, through which the sweeper
//     finds expired leases with one Query per shard. A streamed reply has
//     no such item: its head is its chat's generation mark (replylog.go).
//
// So a write of events costs one write unit per KB of its own events,
// whatever the log already holds; the head (and its index entry) is
// written only when the job starts, renews its lease (job.Writer: when
// half of it has passed), is asked to stop and ends. One strongly
// consistent Query (SK from the slot that may hold the event after a
// sequence number to the head) returns what follows that number and
// whether more can come. Every item expires 24 h after its last write
// (expiresAt, the table's TTL attribute, also checked on read; DynamoDB's
// TTL runs on the wall clock, so these times are time.Now's, not an
// injected clock's).
const (
	logPrefix      = "STREAM#"
	logHeadSuffix  = "~"
	activeGSIShard = "ACTIVE#"
	// activeShards spreads active heads over GSI1 partitions (the first
	// hex digit of the work's id), so lease renewals of many concurrent
	// replies do not all land on one index partition.
	activeShards = 16
	// LogRetention is how long a log is kept after its last write.
	LogRetention = 24 * time.Hour
	// The types of a log's slot items.
	typeBatch = "log"
	typeBeat  = "logbeat"
	typeStop  = "logstop"
	// readBack is how many ids before the one a read wants the slot that
	// holds it may be: a write carries at most job.MaxBatch events, and
	// an interrupted job's closing events, in the slot after its last
	// written event, take ids after its reservation (at most job.Window
	// ahead).
	readBack = job.MaxBatch + job.Window + 1
	// maxStopClaims bounds a stop request's tries at the slot after the
	// log's last write (each lost try means the writer wrote meanwhile).
	maxStopClaims = 20
)

// logSK is the key of the slot of log id that holds the write after
// event prev, slot prev+1.
func logSK(id string, slot int64) string { return fmt.Sprintf("%s%s#%012d", logPrefix, id, slot) }
func logHeadSK(id string) string         { return logPrefix + id + "#" + logHeadSuffix }
func activeGSI(id string) string         { return activeGSIShard + strings.ToLower(id[:1]) }
func leaseGSISK(t time.Time) string      { return t.UTC().Format(timeKey) }

// logHead is the head item of a log.
type logHead struct {
	PK, SK        string
	GSI1PK        string `dynamo:",omitempty"`
	GSI1SK        string `dynamo:",omitempty"`
	Type          string `dynamo:"type"`
	Kind          string `dynamo:"kind"`
	ID            string `dynamo:"id"`
	Status        string `dynamo:"status"`
	Active        bool   `dynamo:"active,omitempty"`
	LastSeq       int64  `dynamo:"lastSeq"`
	Reserved      int64  `dynamo:"reserved,omitempty"`
	LeaseUntil    int64  `dynamo:"leaseUntil"`
	StopRequested bool   `dynamo:"stopRequested,omitempty"`
	Target        string `dynamo:"target"`
	ExpiresAt     int64  `dynamo:"expiresAt"`
}

// logBatch is the item of one slot: a write's events (type log), a
// heartbeat (logbeat) or a stop (logstop), which carry no events.
type logBatch struct {
	PK, SK    string
	Type      string `dynamo:"type"`
	First     int64  `dynamo:"first,omitempty"`
	Last      int64  `dynamo:"last,omitempty"`
	Prev      int64  `dynamo:"prev"`
	Reserved  int64  `dynamo:"reserved,omitempty"`
	Events    string `dynamo:"events,omitempty"` // JSON array of the events' JSON
	ExpiresAt int64  `dynamo:"expiresAt"`
}

func newLogBatch(pk, id string, recs []job.Record, reserved int64, now time.Time) (logBatch, error) {
	data := make([]json.RawMessage, len(recs))
	for i, r := range recs {
		if r.Seq != recs[0].Seq+int64(i) {
			return logBatch{}, fmt.Errorf("events %d..%d are not consecutive", recs[0].Seq, r.Seq)
		}
		data[i] = r.Data
	}
	if recs[0].Prev >= recs[0].Seq || recs[0].Prev < 0 {
		return logBatch{}, fmt.Errorf("event %d cannot follow event %d", recs[0].Seq, recs[0].Prev)
	}
	b, err := json.Marshal(data)
	if err != nil {
		return logBatch{}, err
	}
	last := recs[len(recs)-1].Seq
	return logBatch{PK: pk, SK: logSK(id, prevOf(recs)+1), Type: typeBatch, First: recs[0].Seq, Last: last, Prev: recs[0].Prev,
		Reserved: max(reserved, last), Events: string(b), ExpiresAt: now.Add(LogRetention).Unix()}, nil
}

// newLogMark is the heartbeat or stop (typ) in the slot after event prev.
func newLogMark(pk, id, typ string, prev, reserved int64, now time.Time) logBatch {
	return logBatch{PK: pk, SK: logSK(id, prev+1), Type: typ, Prev: prev, Reserved: reserved, ExpiresAt: now.Add(LogRetention).Unix()}
}

func (b logBatch) records() ([]job.Record, error) {
	var data []json.RawMessage
	if err := decodeAttr(b.PK, b.SK, "events", b.Events, &data); err != nil {
		return nil, err
	}
	prev := b.Prev
	if prev == 0 {
		prev = b.First - 1 // a batch written before prev was stored
	}
	return job.Chain(prev, b.First, data...), nil
}

// prevOf returns the id recs follow in a log.
func prevOf(recs []job.Record) int64 { return recs[0].Prev }

// slotFree is the condition of a write into a slot that only a heartbeat
// may hold; slotEndable of the job's end, which also replaces a stop.
const (
	slotFree    = "attribute_not_exists(PK) OR $ = ?"
	slotEndable = "attribute_not_exists(PK) OR $ IN (?, ?)"
)

// eventLogs reads and writes the logs of one table.
type eventLogs struct {
	db    *dynamo.DB
	table dynamo.Table
}

// logStart is the start of a log: the head, active with its lease, and
// the first batch.
type logStart struct {
	PK, Kind, ID, Status, Target string
	First                        []job.Record
	Lease                        job.Lease
}

// start adds to tx the creation of a log (conditioned on its absence).
func (l eventLogs) start(tx *dynamo.WriteTx, s logStart) error {
	h := logHead{PK: s.PK, SK: logHeadSK(s.ID), GSI1PK: activeGSI(s.ID), GSI1SK: leaseGSISK(s.Lease.Until), Type: "loghead",
		Kind: s.Kind, ID: s.ID, Status: s.Status, Active: true, LeaseUntil: s.Lease.Until.UnixMilli(), Reserved: s.Lease.Reserved,
		Target: s.Target, ExpiresAt: time.Now().Add(LogRetention).Unix()}
	if len(s.First) > 0 {
		b, err := newLogBatch(s.PK, s.ID, s.First, s.Lease.Reserved, time.Now())
		if err != nil {
			return err
		}
		tx.Put(l.table.Put(b))
		h.LastSeq = b.Last
	}
	tx.Put(l.table.Put(h).If("attribute_not_exists(PK)"))
	return nil
}

// activeCond is the condition for renewing the lease of an active log
// with no stop requested.
const activeCond = "active = ? AND attribute_not_exists(stopRequested)"

// renew returns the update of log id's head that renews its lease to l
// (a zero ls.Until leaves the lease, and the head's index entry, as they
// are) and, with recs, moves lastSeq to their last (else to ls.Last, when
// set).
func (l eventLogs) renew(pk, id string, recs []job.Record, ls job.Lease, now time.Time) *dynamo.Update {
	u := l.table.Update("PK", pk).Range("SK", logHeadSK(id)).Set("expiresAt", now.Add(LogRetention).Unix())
	if !ls.Until.IsZero() {
		u.Set("leaseUntil", ls.Until.UnixMilli()).Set("GSI1SK", leaseGSISK(ls.Until))
	}
	if ls.Reserved > 0 {
		u.Set("reserved", ls.Reserved)
	}
	switch {
	case len(recs) > 0:
		u.Set("lastSeq", recs[len(recs)-1].Seq)
	case ls.Last > 0:
		u.Set("lastSeq", ls.Last)
	}
	return u
}

// append writes recs to log id under pk, in the slot after the event they
// follow, with one PutItem conditioned on the slot being free (a
// heartbeat of the writer's may hold it); with no recs, a heartbeat in the
// slot after ls.Last, on the same condition. When ls.Until is set, the
// lease is renewed first, with one UpdateItem conditioned on the log being
// active with no stop requested. So every write fails once a stop was
// requested (the stop took the slot) or the job ended (its end took it):
// Conflict STOP_REQUESTED or NOT_ACTIVE (job codes).
func (l eventLogs) append(ctx context.Context, pk, id string, recs []job.Record, ls job.Lease, now time.Time) error {
	var renew *dynamo.Update
	if !ls.Until.IsZero() {
		renew = l.renew(pk, id, nil, ls, now).If(activeCond, true)
	}
	return l.appendAfter(ctx, "store.appendLog", pk, id, recs, ls, renew, now, l.why)
}

// appendAfter runs renew, when not nil, then writes recs (or, with none
// and no renewal, a heartbeat) as append does; a failed condition is
// explained by why, unless the slot holds this very write.
func (l eventLogs) appendAfter(ctx context.Context, op, pk, id string, recs []job.Record, ls job.Lease, renew *dynamo.Update, now time.Time,
	why func(ctx context.Context, op, pk, id string) error) error {
	var err error
	if renew != nil {
		err = renew.Run(ctx)
	}
	switch {
	case err != nil:
	case len(recs) > 0:
		b, berr := newLogBatch(pk, id, recs, ls.Reserved, now)
		if berr != nil {
			return errs.Wrap(op, berr)
		}
		err = l.table.Put(b).If(slotFree, "type", typeBeat).Run(ctx)
	case renew == nil:
		err = l.table.Put(newLogMark(pk, id, typeBeat, ls.Last, ls.Reserved, now)).If(slotFree, "type", typeBeat).Run(ctx)
	}
	if isConditionFailure(err) {
		if len(recs) > 0 && l.holds(ctx, pk, id, recs) {
			// This very write, applied though its answer was lost: the
			// SDK's retry of it found its slot taken by itself.
			return nil
		}
		return why(ctx, op, pk, id)
	}
	return storeError(op, err)
}

// holds reports whether the slot recs go in already holds exactly recs
// (one strongly consistent GetItem): only their writer hands out their
// ids, so the write that put them there was its own. A failed read
// reports false.
func (l eventLogs) holds(ctx context.Context, pk, id string, recs []job.Record) bool {
	var b logBatch
	err := l.table.Get("PK", pk).Range("SK", dynamo.Equal, logSK(id, prevOf(recs)+1)).Consistent(true).One(ctx, &b)
	return err == nil && b.Type == typeBatch && b.First == recs[0].Seq && b.Last == recs[len(recs)-1].Seq
}

// appendTx adds to tx the write of recs (at least one) to log id under pk
// and the renewal of its lease to ls, conditioned on the log being active
// with no stop requested and on recs' slot being free. recs go in items
// as the end's do (see end).
func (l eventLogs) appendTx(tx *dynamo.WriteTx, pk, id string, recs []job.Record, ls job.Lease, now time.Time) error {
	if err := l.putSlots(tx, pk, id, recs, ls.Reserved, slotFree, now); err != nil {
		return err
	}
	tx.Update(l.renew(pk, id, recs, ls, now).If(activeCond, true))
	return nil
}

// putSlots adds to tx the Puts of recs in items of at most job.MaxBatch
// events and job.MaxBatchBytes of events (a larger event alone), each in
// the slot after the event before it: the first conditioned on cond (the
// slot free, a heartbeat allowed, and with slotEndable a stop), the
// others on their slot being empty.
func (l eventLogs) putSlots(tx *dynamo.WriteTx, pk, id string, recs []job.Record, reserved int64, cond string, now time.Time) error {
	for i, part := range splitBySize(recs, job.MaxBatch, job.MaxBatchBytes) {
		b, err := newLogBatch(pk, id, part, reserved, now)
		if err != nil {
			return err
		}
		put := l.table.Put(b)
		switch {
		case i > 0:
			put.If("attribute_not_exists(PK)")
		case cond == slotEndable:
			put.If(cond, "type", typeBeat, typeStop)
		default:
			put.If(cond, "type", typeBeat)
		}
		tx.Put(put)
	}
	return nil
}

// why explains a failed write to log id: Conflict STOP_REQUESTED,
// Conflict NOT_ACTIVE, NotFound when the log is gone.
func (l eventLogs) why(ctx context.Context, op, pk, id string) error {
	h, err := l.head(ctx, pk, id)
	switch {
	case err != nil:
		return errs.Wrap(op, err)
	case h.StopRequested && h.Active:
		return errs.E(op, errs.Conflict, job.CodeStopRequested, "a stop was requested")
	case !h.Active:
		return errs.E(op, errs.Conflict, job.CodeNotActive, "the work is no longer active")
	}
	return errs.E(op, errs.Conflict, job.CodeNotActive, "the log moved on without this writer")
}

// errLogNotFound is the error of a missing log.
var errLogNotFound = errs.E("store.eventLogs", errs.NotFound, "LOG_NOT_FOUND", "no such event log")

// head returns log id's head item as stored, with one strongly consistent
// GetItem (its lastSeq and reserved may lag the slots: see latest).
func (l eventLogs) head(ctx context.Context, pk, id string) (logHead, error) {
	var h logHead
	err := l.table.Get("PK", pk).Range("SK", dynamo.Equal, logHeadSK(id)).Consistent(true).One(ctx, &h)
	if errors.Is(err, dynamo.ErrNotFound) {
		return logHead{}, errLogNotFound
	}
	return h, storeError("store.logHead", err)
}

// latest returns log id's head with lastSeq and reserved brought up to
// its last written slot, from one strongly consistent Query read backwards
// from the head (a page holds the head, a heartbeat or stop, and the last
// write; more pages only when it does not). NotFound (errLogNotFound) when
// there is no log.
func (l eventLogs) latest(ctx context.Context, pk, id string) (logHead, error) {
	const op = "store.latestLog"
	it := l.table.Get("PK", pk).Range("SK", dynamo.Between, logSK(id, 0), logHeadSK(id)).Order(dynamo.Descending).
		Consistent(true).SearchLimit(3).Iter()
	var (
		head *logHead
		item dynamo.Item
	)
	for it.Next(ctx, &item) {
		typ, err := itemType(item)
		if err != nil {
			return logHead{}, errs.Wrap(op, err)
		}
		if typ == "loghead" {
			var h logHead
			if err := dynamo.UnmarshalItem(item, &h); err != nil {
				return logHead{}, errs.Wrap(op, err)
			}
			head = &h
			continue
		}
		if head == nil {
			break // no head: no log
		}
		var b logBatch
		if err := dynamo.UnmarshalItem(item, &b); err != nil {
			return logHead{}, errs.Wrap(op, err)
		}
		head.Reserved = max(head.Reserved, b.Reserved)
		if b.Type == typeBatch {
			head.LastSeq = max(head.LastSeq, b.Last)
			break
		}
	}
	if err := it.Err(); err != nil {
		return logHead{}, storeError(op, err)
	}
	if head == nil {
		return logHead{}, errLogNotFound
	}
	return *head, nil
}

func itemType(it dynamo.Item) (string, error) {
	var typ struct {
		Type string `dynamo:"type"`
	}
	err := dynamo.UnmarshalItem(it, &typ)
	return typ.Type, err
}

// end adds to tx the end of log id: recs appended, status set, lastSeq
// moved to recs' last, the log no longer active (out of the sweeper's
// index), conditioned on it being active, on recs' slot being free (a
// heartbeat or a stop may hold it: nothing was written after the event
// recs follow) and, when expiredBefore is not zero, on its lease having
// ended before then (the sweeper's end). recs go in items of at most
// job.MaxBatch events and job.MaxBatchBytes of events (a larger event
// alone), so that no item passes DynamoDB's 400 KB (a job.Writer hands
// back up to job.MaxPendingBytes) and a read finds each where it looks.
func (l eventLogs) end(tx *dynamo.WriteTx, pk, id, status string, recs []job.Record, expiredBefore, now time.Time) error {
	u := l.table.Update("PK", pk).Range("SK", logHeadSK(id)).Set("status", status).
		Remove("active", "GSI1PK", "GSI1SK").Set("expiresAt", now.Add(LogRetention).Unix())
	if len(recs) > 0 {
		if err := l.putSlots(tx, pk, id, recs, 0, slotEndable, now); err != nil {
			return err
		}
		u.Set("lastSeq", recs[len(recs)-1].Seq)
	}
	cond, args := "active = ?", []any{true}
	if !expiredBefore.IsZero() {
		cond, args = cond+" AND leaseUntil < ?", append(args, expiredBefore.UnixMilli())
	}
	tx.Update(u.If(cond, args...))
	return nil
}

// splitBySize cuts recs into runs of at most n events whose data take at
// most size bytes together; an event larger than size is a run of its own.
func splitBySize(recs []job.Record, n, size int) [][]job.Record {
	var out [][]job.Record
	start, bytes := 0, 0
	for i, r := range recs {
		if i > start && (bytes+len(r.Data) > size || i-start >= n) {
			out = append(out, recs[start:i])
			start, bytes = i, 0
		}
		bytes += len(r.Data)
	}
	return append(out, recs[start:])
}

// read returns the events of log id after seq, in order, and its head
// (lastSeq and reserved brought up to its slots), from one strongly
// consistent Query: from the slot readBack ids before the event wanted to
// the head. NotFound (errLogNotFound) when there is no log or it expired.
func (l eventLogs) read(ctx context.Context, pk, id string, after int64, now time.Time) ([]job.Record, logHead, error) {
	const op = "store.readLog"
	var raw []dynamo.Item
	err := l.table.Get("PK", pk).Range("SK", dynamo.Between, logSK(id, max(0, after+1-readBack)), logHeadSK(id)).Consistent(true).All(ctx, &raw)
	if err != nil {
		return nil, logHead{}, storeError(op, err)
	}
	var (
		recs              []job.Record
		head              *logHead
		lastSeq, reserved int64
	)
	for _, it := range raw {
		typ, err := itemType(it)
		if err != nil {
			return nil, logHead{}, errs.Wrap(op, err)
		}
		switch typ {
		case "loghead":
			var h logHead
			if err := dynamo.UnmarshalItem(it, &h); err != nil {
				return nil, logHead{}, errs.Wrap(op, err)
			}
			head = &h
		case typeBatch, typeBeat, typeStop:
			var b logBatch
			if err := dynamo.UnmarshalItem(it, &b); err != nil {
				return nil, logHead{}, errs.Wrap(op, err)
			}
			if b.ExpiresAt < now.Unix() {
				continue // TTL deletion is lazy
			}
			reserved = max(reserved, b.Reserved)
			if typ != typeBatch {
				continue
			}
			lastSeq = max(lastSeq, b.Last)
			rs, err := b.records()
			if err != nil {
				return nil, logHead{}, errs.Wrap(op, err)
			}
			for _, r := range rs {
				if r.Seq > after {
					recs = append(recs, r)
				}
			}
		}
	}
	if head == nil || head.ExpiresAt < now.Unix() {
		return nil, logHead{}, errs.Wrap(op, errLogNotFound)
	}
	head.LastSeq, head.Reserved = max(head.LastSeq, lastSeq), max(head.Reserved, reserved)
	return recs, *head, nil
}

// requestStop marks log id's work to stop and takes the slot after its
// last write, in one transaction conditioned on the work being active and
// the slot free (a heartbeat may hold it): the writer's next write, to
// that slot, fails with STOP_REQUESTED (its lease renewals too, on the
// mark). A slot the writer filled meanwhile makes it try the next one.
// NotFound when there is no log, Conflict NOT_ACTIVE when the work has
// ended.
func (l eventLogs) requestStop(ctx context.Context, pk, id string) error {
	return l.claimStop(ctx, "store.requestStop", pk, id, func(ctx context.Context) (job.Head, error) {
		h, err := l.latest(ctx, pk, id)
		return h.job(), err
	}, func() *dynamo.Update {
		return l.table.Update("PK", pk).Range("SK", logHeadSK(id)).Set("stopRequested", true).If("attribute_exists(PK) AND active = ?", true)
	})
}

// claimStop is requestStop with the job's head read by head and the stop
// flagged by the update flag returns.
func (l eventLogs) claimStop(ctx context.Context, op, pk, id string, head func(context.Context) (job.Head, error), flag func() *dynamo.Update) error {
	notActive := errs.E(op, errs.Conflict, job.CodeNotActive, "the work has already ended")
	for range maxStopClaims {
		h, err := head(ctx)
		if err != nil {
			return errs.Wrap(op, err)
		}
		switch {
		case !h.Active:
			return notActive
		case h.StopRequested:
			return nil // the mark went with the flag, in one transaction
		}
		err = l.db.WriteTx().Update(flag()).
			Put(l.table.Put(newLogMark(pk, id, typeStop, h.LastSeq, h.Reserved, time.Now())).If(slotFree, "type", typeBeat)).
			Run(ctx)
		if !isConditionFailure(err) {
			return storeError(op, err)
		}
	}
	return errs.E(op, errs.Unavailable, "", "the work writes too fast to be stopped; try again")
}

// Jobs is the job.Store of the Data table: the logs of replies (in their
// chat's collection) and of workflow runs (in their own).
type Jobs struct {
	db    *dynamo.DB
	table dynamo.Table
}

// NewJobs returns the Jobs of the named Data table.
func NewJobs(db *dynamo.DB, dataTable string) *Jobs {
	return &Jobs{db: db, table: db.Table(dataTable)}
}

var _ job.Store = (*Jobs)(nil)

func (s *Jobs) logs() eventLogs { return eventLogs{db: s.db, table: s.table} }

// jobPK returns the partition key of the collection ref lives in: a reply
// (job kind "generation") in its chat's, a run (kind "run") in its own.
func jobPK(ref job.Ref) string {
	switch ref.Kind {
	case runKind:
		return runPK(ref.ID)
	case knowledgeJobKind:
		return kbPK(ref.Collection)
	}
	return chatPK(ref.Collection)
}

// collectionOf is the inverse of jobPK for a head: the Collection of its
// job.Ref.
func collectionOf(pk string) string {
	if c, ok := strings.CutPrefix(pk, "CHAT#"); ok {
		return c
	}
	if c, ok := strings.CutPrefix(pk, "KB#"); ok {
		return c
	}
	return strings.TrimPrefix(pk, "RUN#")
}

// Append writes recs to ref's log and renews its lease (see
// eventLogs.append): Conflict STOP_REQUESTED or NOT_ACTIVE when the job
// must end, NotFound when its log is gone.
func (s *Jobs) Append(ctx context.Context, ref job.Ref, recs []job.Record, l job.Lease) error {
	if isReply(ref) {
		return s.replies().append(ctx, jobPK(ref), ref.ID, recs, l, time.Now())
	}
	return s.logs().append(ctx, jobPK(ref), ref.ID, recs, l, time.Now())
}

// Read returns ref's events after seq and its head, from one strongly
// consistent Query. NotFound LOG_NOT_FOUND when there is no log or it
// expired.
func (s *Jobs) Read(ctx context.Context, ref job.Ref, after int64) ([]job.Record, job.Head, error) {
	if isReply(ref) {
		recs, h, err := s.replies().read(ctx, jobPK(ref), ref.ID, after, time.Now())
		return recs, h, errs.Wrap("store.Jobs.Read", err)
	}
	recs, h, err := s.logs().read(ctx, jobPK(ref), ref.ID, after, time.Now())
	if err != nil {
		return nil, job.Head{}, err
	}
	return recs, h.job(), nil
}

// Head returns ref's head, its last event and reservation those of its
// last write: for a reply, with one strongly consistent Query
// (eventLogs.latest); for a run, whose every write of events updates the
// head in the same transaction, with one strongly consistent GetItem (the
// runner reads no more than its run's items). NotFound LOG_NOT_FOUND when
// there is no log or it expired.
func (s *Jobs) Head(ctx context.Context, ref job.Ref) (job.Head, error) {
	if isReply(ref) {
		h, err := s.replies().head(ctx, jobPK(ref), ref.ID)
		return h, errs.Wrap("store.Jobs.Head", err)
	}
	get := s.logs().latest
	if ref.Kind == runKind {
		get = s.logs().head
	}
	h, err := get(ctx, jobPK(ref), ref.ID)
	if err == nil && h.ExpiresAt < time.Now().Unix() {
		err = errLogNotFound
	}
	if err != nil {
		return job.Head{}, errs.Wrap("store.Jobs.Head", err)
	}
	return h.job(), nil
}

// RequestStop marks ref's job to stop (see eventLogs.requestStop).
func (s *Jobs) RequestStop(ctx context.Context, ref job.Ref) error {
	if isReply(ref) {
		return s.replies().requestStop(ctx, jobPK(ref), ref.ID)
	}
	return s.logs().requestStop(ctx, jobPK(ref), ref.ID)
}

func (h logHead) job() job.Head {
	return job.Head{Kind: h.Kind, Status: h.Status, Active: h.Active, LastSeq: h.LastSeq, Reserved: h.Reserved,
		LeaseUntil: time.UnixMilli(h.LeaseUntil).UTC(), StopRequested: h.StopRequested}
}

// Expired returns up to limit active jobs whose lease ended before now,
// from one Query of GSI1 per shard of the sparse index of active heads
// (the index is eventually consistent: the caller's end write re-checks
// the lease).
func (s *Jobs) Expired(ctx context.Context, now time.Time, limit int) ([]job.Expired, error) {
	const op = "store.Expired"
	var out []job.Expired
	for i := 0; i < activeShards && len(out) < limit; i++ {
		var heads []logHead
		err := s.table.Get("GSI1PK", fmt.Sprintf("%s%x", activeGSIShard, i)).Index("GSI1").
			Range("GSI1SK", dynamo.Less, leaseGSISK(now)).Limit(limit-len(out)).All(ctx, &heads)
		if err != nil {
			return nil, storeError(op, err)
		}
		for _, h := range heads {
			out = append(out, job.Expired{Ref: job.Ref{Kind: h.Kind, Collection: collectionOf(h.PK), ID: h.ID},
				LeaseUntil: time.UnixMilli(h.LeaseUntil).UTC()})
		}
	}
	if len(out) < limit {
		replies, err := s.replies().expired(ctx, now, limit-len(out))
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
		out = append(out, replies...)
	}
	return out, nil
}

// isReply reports whether ref is a streamed reply, whose log's head is its
// chat's mark (replylog.go).
func isReply(ref job.Ref) bool { return ref.Kind == chat.GenerationKind }

func (s *Jobs) replies() replyLogs { return replyLogs{s.logs()} }
