package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
)

// The head of a streamed reply's event log is the chat's generation mark:
// a chat runs one generation at a time, so the chat item, which already
// names the generation holding it (generation, leaseUntil), also carries
// the live state of its log while it runs:
//   - logged: the generation is streamed (it has a log; a reply of POST
//     .../messages has none);
//   - genTarget: the SK of the reply's message (kept after the end, with
//     lastGeneration, so the last reply is found without a Query);
//   - logLease (Unix ms), reserved, lastSeq, stopRequested: as a log
//     head's (joblog.go), lastSeq and reserved those of the writes that
//     updated the chat; the slots hold the rest;
//   - GSI2PK ACTIVE#<shard> / GSI2SK <logLease>: the sparse index entry
//     through which the sweeper finds expired leases (GSI1 keeps listing
//     the user's chats).
//
// So a reply writes the chat item once at its start (the mark, with the
// messages' updatedAt), once per lease renewal and once at its end (the
// release), its messages once each at the start (one transaction: the
// user's and the streaming reply) and the reply once more at its end
// (final), and each event once, in the slots of joblog.go: no item is
// written twice in one transaction, and no head item exists beside the
// mark. The slots keep their 24 h TTL; the mark has none (it is removed
// at the end).
//
// The order of the end (the generator's, EndLoggedGeneration) is what
// makes it safe without a transaction: the reply message first,
// conditioned on it still streaming (the one arbiter between the
// generator, the sweeper and nothing else: a stop and a renewal are
// conditioned on the mark, which is still there), then the closing
// events (a follower that sees end finds the message saved), then the
// release. A crash between leaves the mark with its lease: the sweeper
// finds it and ends the log without touching the saved message
// (ReleaseGeneration). A reader reads the mark before the slots, so a
// released mark is never seen before the closing events it follows.
const (
	loggedAttr     = "logged"
	genTargetAttr  = "genTarget"
	lastGenAttr    = "lastGeneration"
	logLeaseAttr   = "logLease"
	reservedAttr   = "reserved"
	lastSeqAttr    = "lastSeq"
	stopAttr       = "stopRequested"
	replyIndex     = "GSI2"
	replyIndexPK   = "GSI2PK"
	replyIndexSK   = "GSI2SK"
	streamingGuard = "attribute_exists(PK) AND $ = ?"
)

// markCond is the condition on the chat item that generation id holds it
// with a log.
const markCond = "$ = ? AND $ = ?"

func markArgs(id string) []any { return []any{generationAttr, id, loggedAttr, true} }

// setMark sets on upd the live state of generation g's log (its lease
// g.Lease, its last event last) and the message it writes (target).
func setMark(upd *dynamo.Update, g chat.Generation, target string, last int64) *dynamo.Update {
	return upd.Set(loggedAttr, true).Set(genTargetAttr, target).Set(lastGenAttr, g.ID).
		Set(logLeaseAttr, g.Lease.Until.UnixMilli()).Set(reservedAttr, g.Lease.Reserved).Set(lastSeqAttr, last).
		Set(replyIndexPK, activeGSI(g.ID)).Set(replyIndexSK, leaseGSISK(g.Lease.Until)).Remove(stopAttr)
}

// releaseMark returns the update of chat pk's item that frees it of its
// generation (and its log's live state), keeping genTarget and
// lastGeneration.
func (s *Chats) releaseMark(pk string) *dynamo.Update {
	return s.table.Update("PK", pk).Range("SK", chatSK).
		Remove(generationAttr, leaseAttr, loggedAttr, logLeaseAttr, reservedAttr, lastSeqAttr, stopAttr, replyIndexPK, replyIndexSK)
}

// replyMark is the chat item as a reply's log reads it.
type replyMark struct {
	Generation     string `dynamo:"generation"`
	Logged         bool   `dynamo:"logged"`
	GenTarget      string `dynamo:"genTarget"`
	LastGeneration string `dynamo:"lastGeneration"`
	LogLease       int64  `dynamo:"logLease"`
	Reserved       int64  `dynamo:"reserved"`
	LastSeq        int64  `dynamo:"lastSeq"`
	StopRequested  bool   `dynamo:"stopRequested"`
}

// holds reports whether the mark is generation id's with a log.
func (m replyMark) holds(id string) bool { return m.Logged && m.Generation == id }

// target returns the SK of generation id's message when the mark knows it.
func (m replyMark) target(id string) (string, bool) {
	if m.GenTarget != "" && (m.Generation == id || m.LastGeneration == id) {
		return m.GenTarget, true
	}
	return "", false
}

// replyLogs reads and writes the logs of streamed replies: the slots
// (eventLogs) and the chat item as their head.
type replyLogs struct {
	eventLogs
}

// mark reads chat pk's item with one strongly consistent GetItem.
// NotFound (errLogNotFound) when the chat is gone.
func (l replyLogs) mark(ctx context.Context, pk string) (replyMark, error) {
	var m replyMark
	err := l.table.Get("PK", pk).Range("SK", dynamo.Equal, chatSK).Consistent(true).One(ctx, &m)
	if errors.Is(err, dynamo.ErrNotFound) {
		return replyMark{}, errLogNotFound
	}
	return m, storeError("store.replyMark", err)
}

// head returns the job.Head of reply id from mark m and what its slots
// add (lastSeq, reserved).
func (m replyMark) head(id string, lastSeq, reserved int64) job.Head {
	h := job.Head{Kind: chat.GenerationKind, LastSeq: lastSeq, Reserved: reserved}
	if m.holds(id) {
		h.Active, h.StopRequested = true, m.StopRequested
		h.LastSeq, h.Reserved = max(h.LastSeq, m.LastSeq), max(h.Reserved, m.Reserved)
		h.LeaseUntil = time.UnixMilli(m.LogLease).UTC()
	}
	return h
}

// append writes recs to reply id's log (eventLogs.append), renewing the
// lease on the chat's mark, conditioned on the mark being id's with no
// stop requested.
func (l replyLogs) append(ctx context.Context, pk, id string, recs []job.Record, ls job.Lease, now time.Time) error {
	var renew *dynamo.Update
	if !ls.Until.IsZero() {
		renew = l.table.Update("PK", pk).Range("SK", chatSK).Set(logLeaseAttr, ls.Until.UnixMilli()).Set(replyIndexSK, leaseGSISK(ls.Until))
		if ls.Reserved > 0 {
			renew.Set(reservedAttr, ls.Reserved)
		}
		if ls.Last > 0 {
			renew.Set(lastSeqAttr, ls.Last)
		}
		renew.If(markCond+" AND attribute_not_exists($)", append(markArgs(id), stopAttr)...)
	}
	return l.appendAfter(ctx, "store.appendReplyLog", pk, id, recs, ls, renew, now, l.why)
}

// why explains a failed write to reply id's log: Conflict STOP_REQUESTED,
// Conflict NOT_ACTIVE, NotFound when the chat is gone.
func (l replyLogs) why(ctx context.Context, op, pk, id string) error {
	m, err := l.mark(ctx, pk)
	switch {
	case err != nil:
		return errs.Wrap(op, err)
	case m.holds(id) && m.StopRequested:
		return errs.E(op, errs.Conflict, job.CodeStopRequested, "a stop was requested")
	case !m.holds(id):
		return errs.E(op, errs.Conflict, job.CodeNotActive, "the work is no longer active")
	}
	return errs.E(op, errs.Conflict, job.CodeNotActive, "the log moved on without this writer")
}

// slotsRead is what a Query of a log's slots found.
type slotsRead struct {
	recs              []job.Record
	lastSeq, reserved int64
	found             bool // a live slot (or a head item) was in range
	target            string
}

// readSlots returns the events after seq in the slots of log id from
// slot from to the head's key, with one strongly consistent Query, and
// the highest last and reserved of the live slots.
func (l eventLogs) readSlots(ctx context.Context, pk, id string, from, after int64, now time.Time) (slotsRead, *logHead, error) {
	const op = "store.readLog"
	var raw []dynamo.Item
	err := l.table.Get("PK", pk).Range("SK", dynamo.Between, logSK(id, max(0, from)), logHeadSK(id)).Consistent(true).All(ctx, &raw)
	if err != nil {
		return slotsRead{}, nil, storeError(op, err)
	}
	var (
		out  slotsRead
		head *logHead
	)
	for _, it := range raw {
		typ, err := itemType(it)
		if err != nil {
			return slotsRead{}, nil, errs.Wrap(op, err)
		}
		switch typ {
		case "loghead":
			var h logHead
			if err := dynamo.UnmarshalItem(it, &h); err != nil {
				return slotsRead{}, nil, errs.Wrap(op, err)
			}
			head = &h
		case typeBatch, typeBeat, typeStop:
			var b logBatch
			if err := dynamo.UnmarshalItem(it, &b); err != nil {
				return slotsRead{}, nil, errs.Wrap(op, err)
			}
			if b.ExpiresAt < now.Unix() {
				continue // TTL deletion is lazy
			}
			out.found = true
			out.reserved = max(out.reserved, b.Reserved)
			if typ != typeBatch {
				continue
			}
			out.lastSeq = max(out.lastSeq, b.Last)
			rs, err := b.records()
			if err != nil {
				return slotsRead{}, nil, errs.Wrap(op, err)
			}
			for _, r := range rs {
				if r.Seq > after {
					out.recs = append(out.recs, r)
				}
			}
		}
	}
	return out, head, nil
}

// read returns reply id's events after seq and its head: the mark first
// (one GetItem), then the slots (one Query), so that a mark already
// released comes with the closing events written before the release.
// NotFound (errLogNotFound) when the chat is gone, or the mark is not
// id's and no live slot of id's log remains.
func (l replyLogs) read(ctx context.Context, pk, id string, after int64, now time.Time) ([]job.Record, job.Head, error) {
	m, err := l.mark(ctx, pk)
	if err != nil {
		return nil, job.Head{}, err
	}
	sr, _, err := l.readSlots(ctx, pk, id, after+1-readBack, after, now)
	if err != nil {
		return nil, job.Head{}, err
	}
	if !sr.found && !m.holds(id) {
		// An id far past the log's end reads nothing in range: look for
		// the log's last write before calling it gone.
		last, lerr := l.lastSlot(ctx, pk, id, now)
		if lerr != nil {
			return nil, job.Head{}, lerr
		}
		if last == nil {
			return nil, job.Head{}, errLogNotFound
		}
		sr.lastSeq, sr.reserved = last.Last, last.Reserved
	}
	return sr.recs, m.head(id, sr.lastSeq, sr.reserved), nil
}

// lastSlot returns the live slot of log id that holds its last write (a
// batch), with the highest reservation of the slots after it, from one
// strongly consistent Query read backwards (a page holds a heartbeat or
// stop and the last write; more pages only when it does not); nil when
// there is none.
func (l eventLogs) lastSlot(ctx context.Context, pk, id string, now time.Time) (*logBatch, error) {
	const op = "store.lastSlot"
	it := l.table.Get("PK", pk).Range("SK", dynamo.Between, logSK(id, 0), logHeadSK(id)).Order(dynamo.Descending).
		Consistent(true).SearchLimit(3).Iter()
	var (
		item     dynamo.Item
		reserved int64
		seen     bool
	)
	for it.Next(ctx, &item) {
		typ, err := itemType(item)
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
		if typ != typeBatch && typ != typeBeat && typ != typeStop {
			continue
		}
		var b logBatch
		if err := dynamo.UnmarshalItem(item, &b); err != nil {
			return nil, errs.Wrap(op, err)
		}
		if b.ExpiresAt < now.Unix() {
			break // the log expired: older slots did too
		}
		seen = true
		reserved = max(reserved, b.Reserved)
		if typ == typeBatch {
			b.Reserved = max(b.Reserved, reserved)
			return &b, nil
		}
	}
	if err := it.Err(); err != nil {
		return nil, storeError(op, err)
	}
	if seen {
		return &logBatch{Reserved: reserved}, nil
	}
	return nil, nil
}

// head returns reply id's head: the mark (one GetItem) and its last write
// (eventLogs.lastSlot). NotFound (errLogNotFound) as read.
func (l replyLogs) head(ctx context.Context, pk, id string) (job.Head, error) {
	m, err := l.mark(ctx, pk)
	if err != nil {
		return job.Head{}, err
	}
	last, err := l.lastSlot(ctx, pk, id, time.Now())
	if err != nil {
		return job.Head{}, err
	}
	if last == nil {
		if !m.holds(id) {
			return job.Head{}, errLogNotFound
		}
		last = &logBatch{}
	}
	return m.head(id, last.Last, last.Reserved), nil
}

// requestStop marks reply id to stop and takes the slot after its last
// write, in one transaction conditioned on the mark being id's and the
// slot free (see eventLogs.requestStop).
func (l replyLogs) requestStop(ctx context.Context, pk, id string) error {
	return l.claimStop(ctx, "store.requestReplyStop", pk, id, func(ctx context.Context) (job.Head, error) { return l.head(ctx, pk, id) },
		func() *dynamo.Update {
			return l.table.Update("PK", pk).Range("SK", chatSK).Set(stopAttr, true).If(markCond, markArgs(id)...)
		})
}

// expired returns up to limit replies whose log lease ended before now,
// from one Query of GSI2 per shard.
func (l replyLogs) expired(ctx context.Context, now time.Time, limit int) ([]job.Expired, error) {
	const op = "store.expiredReplies"
	var out []job.Expired
	for i := 0; i < activeShards && len(out) < limit; i++ {
		var marks []struct {
			PK string
			replyMark
		}
		err := l.table.Get(replyIndexPK, fmt.Sprintf("%s%x", activeGSIShard, i)).Index(replyIndex).
			Range(replyIndexSK, dynamo.Less, leaseGSISK(now)).Limit(limit-len(out)).All(ctx, &marks)
		if err != nil {
			return nil, storeError(op, err)
		}
		for _, m := range marks {
			out = append(out, job.Expired{Ref: job.Ref{Kind: chat.GenerationKind, Collection: collectionOf(m.PK), ID: m.Generation},
				LeaseUntil: time.UnixMilli(m.LogLease).UTC()})
		}
	}
	return out, nil
}

// putEnd writes recs, the closing events of reply id's log, after the
// event they follow with one PutItem per item (see putSlots), the first
// conditioned on its slot being free or holding a heartbeat or a stop.
// When that slot holds an earlier write of the reply's own (applied
// though its writer saw it fail), the events it holds are taken as
// written and the rest go after it. Conflict NOT_ACTIVE when another
// write took the slot.
func (l replyLogs) putEnd(ctx context.Context, pk, id string, recs []job.Record, now time.Time) error {
	const op = "store.endReplyLog"
	for len(recs) > 0 {
		parts := splitBySize(recs, job.MaxBatch, job.MaxBatchBytes)
		b, err := newLogBatch(pk, id, parts[0], 0, now)
		if err != nil {
			return errs.Wrap(op, err)
		}
		err = l.table.Put(b).If(slotEndable, "type", typeBeat, typeStop).Run(ctx)
		if isConditionFailure(err) {
			last, lerr := l.lastSlot(ctx, pk, id, now)
			if lerr != nil {
				return errs.Wrap(op, lerr)
			}
			rest, ok := []job.Record(nil), false
			if last != nil {
				rest, ok = unwritten(recs, last.Last)
			}
			if !ok {
				return errs.E(op, errs.Conflict, job.CodeNotActive, "the log moved on without this writer")
			}
			recs = rest
			continue
		}
		if err != nil {
			return storeError(op, err)
		}
		recs = recs[len(parts[0]):]
	}
	return nil
}
