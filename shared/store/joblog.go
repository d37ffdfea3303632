package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
)

// Event logs of jobs (package job: a streamed reply, a workflow run),
// in the item collection the job lives in (a reply in its chat's, CHAT#<chatId>;
// a run in its own, RUN#<runId>):
//   - STREAM#<id>#<last seq, 12 digits>: one batch of events (first, last,
//     prev: the id before first, events as a JSON array), written at once;
//   - STREAM#<id>#~: the head, which sorts after every batch: the job's
//     kind, status, lastSeq, reserved (the highest id its process may
//     have handed out), leaseUntil (Unix ms), stopRequested, target (the
//     SK of the item the job produces) and, while the job is active,
//     `active` and the sparse GSI1 keys ACTIVE#<shard> / <leaseUntil>,
//     through which the sweeper finds expired leases with one Query per
//     shard.
//
// So one strongly consistent Query (SK from the batch after a sequence
// number to the head) returns what follows that number and whether more
// can come. Every item expires 24 h after its last write (expiresAt, the
// table's TTL attribute, also checked on read; DynamoDB's TTL runs on the
// wall clock, so these times are time.Now's, not an injected clock's).
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
)

func logSK(id string, last int64) string { return fmt.Sprintf("%s%s#%012d", logPrefix, id, last) }
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

// logBatch is one batch of events.
type logBatch struct {
	PK, SK    string
	Type      string `dynamo:"type"`
	ID        string `dynamo:"id"`
	First     int64  `dynamo:"first"`
	Last      int64  `dynamo:"last"`
	Prev      int64  `dynamo:"prev"`
	Events    string `dynamo:"events"` // JSON array of the events' JSON
	ExpiresAt int64  `dynamo:"expiresAt"`
}

func newLogBatch(pk, id string, recs []job.Record, now time.Time) (logBatch, error) {
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
	return logBatch{PK: pk, SK: logSK(id, last), Type: "log", ID: id, First: recs[0].Seq, Last: last, Prev: recs[0].Prev,
		Events: string(b), ExpiresAt: now.Add(LogRetention).Unix()}, nil
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
		b, err := newLogBatch(s.PK, s.ID, s.First, time.Now())
		if err != nil {
			return err
		}
		tx.Put(l.table.Put(b))
		h.LastSeq = b.Last
	}
	tx.Put(l.table.Put(h).If("attribute_not_exists(PK)"))
	return nil
}

// activeCond is the condition for writing to an active log whose last
// event is the one given as its value, with no stop requested.
const activeCond = "active = ? AND attribute_not_exists(stopRequested) AND lastSeq = ?"

// renew returns the update of log id's head that renews its lease to l
// and, with recs, moves lastSeq to their last.
func (l eventLogs) renew(pk, id string, recs []job.Record, ls job.Lease, now time.Time) *dynamo.Update {
	u := l.table.Update("PK", pk).Range("SK", logHeadSK(id)).
		Set("leaseUntil", ls.Until.UnixMilli()).Set("GSI1SK", leaseGSISK(ls.Until)).Set("expiresAt", now.Add(LogRetention).Unix())
	if ls.Reserved > 0 {
		u.Set("reserved", ls.Reserved)
	}
	if len(recs) > 0 {
		u.Set("lastSeq", recs[len(recs)-1].Seq)
	}
	return u
}

// append writes recs to log id under pk and renews its lease to ls, in
// one transaction (one update with no recs) conditioned on the log being
// active, no stop requested and recs following its last event. A failed
// condition is Conflict STOP_REQUESTED or NOT_ACTIVE (job codes).
func (l eventLogs) append(ctx context.Context, pk, id string, recs []job.Record, ls job.Lease, now time.Time) error {
	const op = "store.appendLog"
	var err error
	if len(recs) == 0 {
		err = l.renew(pk, id, nil, ls, now).If("active = ? AND attribute_not_exists(stopRequested)", true).Run(ctx)
	} else {
		tx := l.db.WriteTx()
		if berr := l.appendTx(tx, pk, id, recs, ls, now); berr != nil {
			return errs.Wrap(op, berr)
		}
		err = tx.Run(ctx)
	}
	if isConditionFailure(err) {
		return l.why(ctx, op, pk, id)
	}
	return storeError(op, err)
}

// appendTx adds to tx the write of recs (at least one) to log id under pk
// and the renewal of its lease to ls, conditioned as append's.
func (l eventLogs) appendTx(tx *dynamo.WriteTx, pk, id string, recs []job.Record, ls job.Lease, now time.Time) error {
	b, err := newLogBatch(pk, id, recs, now)
	if err != nil {
		return err
	}
	tx.Put(l.table.Put(b)).Update(l.renew(pk, id, recs, ls, now).If(activeCond, true, prevOf(recs)))
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

func (l eventLogs) head(ctx context.Context, pk, id string) (logHead, error) {
	var h logHead
	err := l.table.Get("PK", pk).Range("SK", dynamo.Equal, logHeadSK(id)).Consistent(true).One(ctx, &h)
	if errors.Is(err, dynamo.ErrNotFound) {
		return logHead{}, errLogNotFound
	}
	return h, storeError("store.logHead", err)
}

// end adds to tx the end of log id: recs appended, status set, the log no
// longer active (out of the sweeper's index), conditioned on it being
// active with recs following its last event (the first's Prev) and, when
// expiredBefore is not zero, on its lease having ended before then (the
// sweeper's end). recs go in batches of at most job.MaxBatchBytes of
// events (a larger event alone), so that no batch item passes DynamoDB's
// 400 KB: a job.Writer hands back up to job.MaxPendingBytes.
func (l eventLogs) end(tx *dynamo.WriteTx, pk, id, status string, recs []job.Record, expiredBefore, now time.Time) error {
	u := l.table.Update("PK", pk).Range("SK", logHeadSK(id)).Set("status", status).
		Remove("active", "GSI1PK", "GSI1SK").Set("expiresAt", now.Add(LogRetention).Unix())
	prev := int64(0)
	if len(recs) > 0 {
		for _, part := range splitBySize(recs, job.MaxBatchBytes) {
			b, err := newLogBatch(pk, id, part, now)
			if err != nil {
				return err
			}
			tx.Put(l.table.Put(b))
		}
		u.Set("lastSeq", recs[len(recs)-1].Seq)
		prev = prevOf(recs)
	}
	cond, args := "active = ?", []any{true}
	if len(recs) > 0 {
		cond, args = cond+" AND lastSeq = ?", append(args, prev)
	}
	if !expiredBefore.IsZero() {
		cond, args = cond+" AND leaseUntil < ?", append(args, expiredBefore.UnixMilli())
	}
	tx.Update(u.If(cond, args...))
	return nil
}

// splitBySize cuts recs into runs whose data take at most max bytes
// together; an event larger than max is a run of its own.
func splitBySize(recs []job.Record, max int) [][]job.Record {
	var out [][]job.Record
	start, size := 0, 0
	for i, r := range recs {
		if i > start && size+len(r.Data) > max {
			out = append(out, recs[start:i])
			start, size = i, 0
		}
		size += len(r.Data)
	}
	return append(out, recs[start:])
}

// read returns the events of log id after seq, in order, and its head, from
// one strongly consistent Query. NotFound (errLogNotFound) when there is
// no log or it expired.
func (l eventLogs) read(ctx context.Context, pk, id string, after int64, now time.Time) ([]job.Record, logHead, error) {
	const op = "store.readLog"
	var raw []dynamo.Item
	err := l.table.Get("PK", pk).Range("SK", dynamo.Between, logSK(id, after+1), logHeadSK(id)).Consistent(true).All(ctx, &raw)
	if err != nil {
		return nil, logHead{}, storeError(op, err)
	}
	var (
		recs []job.Record
		head *logHead
	)
	for _, it := range raw {
		var typ struct {
			Type string `dynamo:"type"`
		}
		if err := dynamo.UnmarshalItem(it, &typ); err != nil {
			return nil, logHead{}, errs.Wrap(op, err)
		}
		switch typ.Type {
		case "loghead":
			var h logHead
			if err := dynamo.UnmarshalItem(it, &h); err != nil {
				return nil, logHead{}, errs.Wrap(op, err)
			}
			head = &h
		case "log":
			var b logBatch
			if err := dynamo.UnmarshalItem(it, &b); err != nil {
				return nil, logHead{}, errs.Wrap(op, err)
			}
			if b.ExpiresAt < now.Unix() {
				continue // TTL deletion is lazy
			}
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
	return recs, *head, nil
}

// requestStop marks log id's work to stop: its next write fails with
// STOP_REQUESTED. NotFound when there is no log, Conflict NOT_ACTIVE when
// the work has ended.
func (l eventLogs) requestStop(ctx context.Context, pk, id string) error {
	const op = "store.requestStop"
	err := l.table.Update("PK", pk).Range("SK", logHeadSK(id)).Set("stopRequested", true).
		If("attribute_exists(PK) AND active = ?", true).Run(ctx)
	if isConditionFailure(err) {
		if _, herr := l.head(ctx, pk, id); herr != nil {
			return errs.Wrap(op, herr)
		}
		return errs.E(op, errs.Conflict, job.CodeNotActive, "the work has already ended")
	}
	return storeError(op, err)
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
	if ref.Kind == runKind {
		return runPK(ref.ID)
	}
	return chatPK(ref.Collection)
}

// collectionOf is the inverse of jobPK for a head: the Collection of its
// job.Ref.
func collectionOf(pk string) string {
	if c, ok := strings.CutPrefix(pk, "CHAT#"); ok {
		return c
	}
	return strings.TrimPrefix(pk, "RUN#")
}

// Append writes recs to ref's log and renews its lease (see
// eventLogs.append): Conflict STOP_REQUESTED or NOT_ACTIVE when the job
// must end, NotFound when its log is gone.
func (s *Jobs) Append(ctx context.Context, ref job.Ref, recs []job.Record, l job.Lease) error {
	return s.logs().append(ctx, jobPK(ref), ref.ID, recs, l, time.Now())
}

// Read returns ref's events after seq and its head, from one strongly
// consistent Query. NotFound LOG_NOT_FOUND when there is no log or it
// expired.
func (s *Jobs) Read(ctx context.Context, ref job.Ref, after int64) ([]job.Record, job.Head, error) {
	recs, h, err := s.logs().read(ctx, jobPK(ref), ref.ID, after, time.Now())
	if err != nil {
		return nil, job.Head{}, err
	}
	return recs, h.job(), nil
}

// Head returns ref's head with one strongly consistent GetItem. NotFound
// LOG_NOT_FOUND when there is no log or it expired.
func (s *Jobs) Head(ctx context.Context, ref job.Ref) (job.Head, error) {
	h, err := s.logs().head(ctx, jobPK(ref), ref.ID)
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
	return out, nil
}
