package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/tracing"
	"github.com/workflowchat/service/shared/usage"
	"github.com/workflowchat/service/shared/usertools"
	"github.com/workflowchat/service/shared/workflow"
)

// PingInterval is the silence after which the stream sends ": ping".
const PingInterval = 15 * time.Second

// Bounds of a streamed reply's life.
const (
	// MaxGeneration bounds a reply generated after its client left, where
	// the host sets no deadline of its own (in AWS the function timeout
	// bounds it).
	MaxGeneration = 10 * time.Minute
	// saveMargin is kept before the host's deadline to save the reply.
	saveMargin = 15 * time.Second
	// saveTimeout bounds the final write of a reply.
	saveTimeout = 10 * time.Second
	// StopWait is how long a stop request waits for the generator to save
	// the stopped reply before answering with the message as it is.
	StopWait = 3 * time.Second
)

// Turn is a streamed exchange that passed every check and whose user
// message is stored: what remains is to generate the reply.
type Turn struct {
	Chat    Chat
	History []Message
	User    Message
	// Attachments are the user message's attachments as the model reads
	// them.
	Attachments []model.Attachment
	// Passages are what the chat's knowledge bases gave for User: the
	// model reads them, the reply cites them.
	Passages []Passage
	ModelID  string
	// ReplyID is the id of the assistant message, announced in start.
	ReplyID string
	// Reply is the assistant message as stored at the start (streaming).
	Reply Message
	// Workflow, when not nil, is the workflow the reply runs (the
	// request's workflowId) instead of a model reply: a durable run whose
	// events the reply renders.
	Workflow *workflow.Workflow
	// ToolIDs narrow the remote tools offered to the model (the message's
	// toolIds; a reply continued after an approval offers them all).
	ToolIDs []string
	// Continue, when not nil, is the state of a reply paused for a tool
	// approval that this turn continues (Reply is the message as paused,
	// Decision the user's); its events follow the log's event FirstSeq-1.
	Continue *Pending
	Decision string
	// FirstSeq is the seq of the first event the reply logs (1 for a new
	// reply: its start, written with the first events that follow it),
	// and Reserved the highest id its log reserved (job.Lease).
	FirstSeq, Reserved int64
	// Held is the budget reservation of a new reply's first model call,
	// made before the stream started.
	Held *usage.Reservation
}

// eventID returns the SSE id of event seq of reply id.
func eventID(id string, seq int64) string { return job.ID{Stream: id, Seq: seq}.String() }

// replyRef is the job of reply id in chat chatID.
func replyRef(chatID, id string) job.Ref {
	return job.Ref{Kind: GenerationKind, Collection: chatID, ID: id}
}

// newLease returns the lease of a reply's log whose last event is last,
// starting at now.
func (s *Service) newLease(now time.Time, last int64) job.Lease {
	return job.Lease{Until: now.Add(s.lease), Reserved: job.Options{}.Reservation(last)}
}

// StartStream checks a stream request and stores its user message, so
// that every error it returns can still be a plain JSON response: Invalid
// (INVALID_MODEL, WORKFLOWS_UNAVAILABLE when no Runs is
// configured), NotFound, Forbidden, Conflict GENERATION_ACTIVE when the
// chat is already generating a reply. With a workflowId, the workflow must
// be the caller's (NotFound WORKFLOW_NOT_FOUND, then Forbidden), checked
// after the chat; without one, RateLimited BUDGET_EXCEEDED when the user's
// monthly token budget has no room for the reply's first model call,
// whose reservation the Turn holds. Then the message's attachments, which
// fail as Attachments.ForMessage does. The user message, the assistant message (status
// streaming) and the reply's event log with its start event are stored in
// one transaction; RunStream ends the generation.
func (s *Service) StartStream(ctx context.Context, id string, req StreamRequest) (*Turn, error) {
	const op = "chat.StartStream"
	if _, err := s.models.Lookup(req.ModelID); err != nil {
		return nil, errs.Wrap(op, err)
	}
	var run *workflow.Workflow
	return startFresh(op, func() (exchange, error) { return s.newExchange(ctx, op, id, req.MessageRequest, false) },
		func(ex exchange) (*Turn, error) {
			if req.WorkflowID != nil && run == nil {
				if s.runs == nil {
					return nil, errs.E(op, errs.Invalid, "WORKFLOWS_UNAVAILABLE", "running workflows from the stream is not available")
				}
				wf, err := s.runs.CheckStart(ctx, *req.WorkflowID)
				if err != nil {
					return nil, errs.Wrap(op, err)
				}
				run = &wf
			}
			return s.startTurn(ctx, op, ex, run)
		})
}

// StartRegenerate checks a streamed regenerate of reply messageID of chat
// chatID (see Regenerate) and stores the new reply (status streaming)
// with its event log, in one transaction: the chat's current leaf stays
// where it is until the reply ends, and moves to it then unless it
// failed (RunStream). Errors: Regenerate's checks, and StartStream's
// budget and GENERATION_ACTIVE.
func (s *Service) StartRegenerate(ctx context.Context, chatID, messageID string, req RegenerateRequest) (*Turn, error) {
	const op = "chat.StartRegenerate"
	return startFresh(op, func() (exchange, error) { return s.regenExchange(ctx, op, chatID, messageID, req) },
		func(ex exchange) (*Turn, error) { return s.startTurn(ctx, op, ex, nil) })
}

// startTurn reserves the budget of ex's first model call (without a run)
// and stores ex's user message (when fresh), the reply (status streaming)
// and its empty event log with the generation, in one transaction.
func (s *Service) startTurn(ctx context.Context, op string, ex exchange, run *workflow.Workflow) (*Turn, error) {
	c, user := ex.chat, ex.user
	var (
		held *usage.Reservation
		err  error
	)
	if run == nil {
		if held, err = s.reserveReply(usertools.WithOnly(ctx, ex.toolIDs), c.UserID, ex.modelID, systemWith(ex.passages), toModelMessages(ex.history, user, ex.atts)); err != nil {
			return nil, errs.Wrap(op, err)
		}
	}
	now := s.clock()
	gen := Generation{ID: uuid.NewString(), Now: now, Until: now.Add(StreamLease), Lease: s.newLease(now, 1), Guard: true}
	parent := user.ID
	reply := Message{ID: gen.ID, ChatID: c.ID, Role: model.RoleAssistant, ModelID: ex.modelID, ReplyTo: user.ID, ParentID: &parent,
		Status: StatusStreaming, CreatedAt: now, Citations: citations(ex.passages)}
	stored := Message{} // a regenerated reply's user message is stored
	if ex.fresh {
		// The reply sorts right after its user message.
		reply.CreatedAt, stored = user.CreatedAt.Add(time.Microsecond), user
	} else {
		reply.DeferLeaf = true
	}
	// The log starts empty: its start event goes with the first write of
	// the events after it (RunStream), out of this transaction, which
	// would double its cost.
	if err := s.store.StartLoggedGeneration(ctx, c, gen, nil, stored, reply); err != nil {
		s.usage.Release(ctx, held)
		return nil, errs.Wrap(op, err)
	}
	return &Turn{Chat: c, History: ex.history, User: user, Attachments: ex.atts, Passages: ex.passages, ModelID: ex.modelID, ReplyID: gen.ID, Reply: reply, Workflow: run, ToolIDs: ex.toolIDs,
		FirstSeq: 1, Reserved: gen.Lease.Reserved, Held: held}, nil
}

// Detach returns the context a reply is generated in: ctx's values
// without its cancellation (a client that leaves does not stop the reply),
// ending saveMargin before ctx's deadline (the host's, e.g. the function
// timeout), or MaxGeneration from now when ctx has none.
func Detach(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Now().Add(MaxGeneration + saveMargin)
	}
	return context.WithDeadline(context.WithoutCancel(ctx), d.Add(-saveMargin))
}

// RunStream generates t's reply, handing every event to live as it is
// produced (with its SSE id): start, content, tool_call and tool_result
// events, then end with its reason (with a workflow: a tool_call and
// tool_result per step of its run, then the summary as content). Every
// event is appended to the reply's event log in batches, which renews the
// reply's lease and lets any instance resume the stream; an event may
// reach live before it is written, but only with an id the log reserved,
// so no id is ever reused. live cannot stop the reply: ctx should be
// detached from the client (Detach). The reply ends completed; stopped
// when a stop was requested (its next log write fails); failed with an
// error event when the model, the tools or the log fail. The assistant
// message is stored with the concatenated deltas, also when stopped or
// failed. No event is longer than MaxEventBytes (boundEvents). It returns
// the stored message, and the error that ended it early.
func (s *Service) RunStream(ctx context.Context, t *Turn, live func(Event)) (Message, error) {
	ctx, span := tracing.StartJob(ctx, "reply", t.ReplyID)
	defer span.End()
	genCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ref := replyRef(t.Chat.ID, t.ReplyID)
	w := job.NewWriter(ctx, max(t.FirstSeq, 1), t.Reserved, func(ctx context.Context, recs []job.Record, l job.Lease) error {
		return s.jobs.Append(ctx, ref, recs, l)
	}, job.Options{Lease: s.lease, Now: s.now})
	if t.Continue == nil && t.FirstSeq <= 1 {
		start := Event{Type: EventStart, MessageID: t.ReplyID}
		data, err := json.Marshal(start)
		if err != nil {
			_, _, _ = w.Close()
			return Message{}, errs.Wrap("chat.RunStream", err)
		}
		start.ID = eventID(t.ReplyID, w.Add(data))
		live(start)
	}
	go func() {
		select {
		case <-w.Done():
			cancel(w.Err())
		case <-genCtx.Done():
		}
	}()
	emit := boundEvents(func(e Event) error {
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if len(data) > MaxEventBytes { // boundEvents keeps every event under it
			return errs.E("chat.RunStream", errs.Internal, "", fmt.Sprintf("a %s event of %d bytes is over the bound of %d", e.Type, len(data), MaxEventBytes))
		}
		e.ID = eventID(t.ReplyID, w.Add(data))
		live(e)
		return nil
	})
	var (
		msg    Message
		genErr error
	)
	switch {
	case t.Continue != nil:
		msg, genErr = s.generate(genCtx, t.Reply, *t.Continue, t.Decision, nil, emit)
	case t.Workflow != nil:
		msg, genErr = s.renderRun(genCtx, t, emit)
	default:
		msg, genErr = s.reply(usertools.WithOnly(genCtx, t.ToolIDs), t.History, t.User, t.Attachments, t.Passages, t.ModelID, t.ReplyID, t.Held, emit)
	}
	pending, next, werr := w.Close()
	msg.CreatedAt, msg.ParentID, msg.DeferLeaf = t.Reply.CreatedAt, t.Reply.ParentID, t.Reply.DeferLeaf

	if errs.CodeOf(werr) == job.CodeNotActive && s.stillActive(ctx, ref) {
		// Nothing ended the reply: the log moved on by this writer's own
		// write, applied though its answer was lost (a retry of it then
		// found the log past it). The end below writes what is missing.
		werr = errs.E("chat.RunStream", errs.Unavailable, "STORAGE_UNAVAILABLE",
			"storage is temporarily unavailable; the reply was cut").WithCause(werr)
	}
	var final []Event
	switch {
	case errs.CodeOf(werr) == job.CodeNotActive:
		// The sweeper ended the reply (its lease ran out): what it
		// logged is the reply's end.
		s.forward(ctx, t, w.Written(), live)
		return msg, errs.Wrap("chat.RunStream", werr)
	case errs.CodeOf(werr) == job.CodeStopRequested:
		msg.Status, genErr = StatusStopped, nil
		final = []Event{endEvent(t.ReplyID, ReasonStopped, msg.Citations)}
	case werr == nil && errors.Is(genErr, errAwaitingApproval):
		// The paused state goes to the blob store when the item cannot
		// hold it; if it cannot be written, the reply fails (below).
		pctx, cancelPending := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		genErr = s.keepPending(pctx, &msg)
		cancelPending()
		if genErr == nil {
			msg.Status = StatusAwaitingApproval
			final = []Event{endEvent(t.ReplyID, ReasonAwaitingApproval, msg.Citations)}
			break
		}
		msg.Pending = nil
		fallthrough
	case werr != nil || genErr != nil:
		switch {
		case ctx.Err() != nil:
			// The generation's deadline (Detach) passed: the model call
			// or the log write it cut is not the cause.
			genErr = errs.E("chat.RunStream", errs.Unavailable, "GENERATION_TIMEOUT", "the reply took too long and was cut").
				WithCause(errors.Join(genErr, werr))
		case werr != nil:
			genErr = werr
		}
		msg.Status = StatusFailed
		final = []Event{
			{Type: EventError, Error: errs.CodeOf(genErr), Message: errs.MessageOf(genErr, "the reply failed")},
			endEvent(t.ReplyID, ReasonInterrupted, msg.Citations),
		}
	default:
		msg.Status = StatusCompleted
		final = []Event{endEvent(t.ReplyID, ReasonCompleted, msg.Citations)}
	}
	recs, final, err := numbered(pending, next-1, next, t.ReplyID, final)
	if err == nil {
		saveCtx, cancelSave := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		err = s.store.EndLoggedGeneration(saveCtx, t.Chat, msg, recs, time.Time{})
		cancelSave()
	}
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			// The chat was deleted meanwhile (its reply went with it): a
			// user's doing, not a failure. What this reply wrote after the
			// delete listed the chat's items goes too.
			s.dropLeftovers(ctx, t.Chat.ID, msg)
			logging.FromContext(ctx).InfoContext(ctx, "the reply's chat was deleted while it streamed", "chatId", t.Chat.ID, "messageId", t.ReplyID)
		} else {
			logging.FromContext(ctx).ErrorContext(ctx, "save the reply", "chatId", t.Chat.ID, "messageId", t.ReplyID, "err", err.Error())
		}
		// The lease will run out and the sweeper end the reply from its
		// log, with events numbered after every id handed out. Tell the
		// client now, with events that carry no id (they are not logged):
		// a client that resumes gets the sweeper's end.
		if genErr == nil {
			genErr = errs.Wrap("chat.RunStream", err)
		}
		live(Event{Type: EventError, Error: errs.CodeOf(err), Message: errs.MessageOf(err, "the reply could not be saved")})
		live(endEvent(t.ReplyID, ReasonInterrupted, msg.Citations))
		return msg, genErr
	}
	for _, e := range final {
		live(e)
	}
	if msg.Status == StatusCompleted && t.Continue == nil {
		// After the end went out: the client does not wait for it.
		s.autoTitle(ctx, t.Chat, t.User, msg, t.ModelID)
	}
	return msg, genErr
}

// endEvent is the end event of reply id for reason: it carries the
// reply's citations, as its message stores them, so that a client has
// them with the end of the stream (and a client that resumes or replays
// the log, from the logged end).
func endEvent(id, reason string, cs []Citation) Event {
	return Event{Type: EventEnd, MessageID: id, Reason: reason, Citations: cs}
}

// numbered appends events to the pending records, numbering them from
// next (the first follows the event prev), and returns the records and
// the events with their ids.
func numbered(pending []job.Record, prev, next int64, id string, events []Event) ([]job.Record, []Event, error) {
	data := make([]json.RawMessage, len(events))
	for i := range events {
		b, err := json.Marshal(events[i])
		if err != nil {
			return nil, nil, err
		}
		data[i] = b
		events[i].ID = eventID(id, next+int64(i))
	}
	if len(pending) > 0 {
		prev = pending[len(pending)-1].Seq
	}
	return append(pending, job.Chain(prev, next, data...)...), events, nil
}

// stillActive reports whether the reply's log ref is still active (no
// one ended it); false when it cannot be read.
func (s *Service) stillActive(ctx context.Context, ref job.Ref) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	h, err := s.jobs.Head(rctx, ref)
	return err == nil && h.Active
}

// forward hands live the events logged after seq by whoever ended t's
// reply.
func (s *Service) forward(ctx context.Context, t *Turn, seq int64, live func(Event)) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	recs, _, err := s.jobs.Read(rctx, replyRef(t.Chat.ID, t.ReplyID), seq)
	if err != nil {
		logWarn(ctx, "read the end of an interrupted reply", "err", err.Error())
		return
	}
	for _, r := range recs {
		if e, err := decodeEvent(t.ReplyID, r); err == nil {
			live(e)
		}
	}
}

func decodeEvent(id string, r job.Record) (Event, error) {
	var e Event
	if err := json.Unmarshal(r.Data, &e); err != nil {
		return Event{}, errs.Wrap("chat.decodeEvent", err)
	}
	e.ID = eventID(id, r.Seq)
	return e, nil
}

// Resumed is what a resume of a chat's stream continues: a reply paused
// for a tool approval whose call was decided (Continuation: the caller
// generates it with RunStream), or a reply to follow.
type Resumed struct {
	Continuation *Turn
	Follower     *job.Follower
}

// Resume checks a resume request on chat chatID: after the event last, or
// with last nil from the start of the chat's active reply. When the chat's
// reply paused for a tool approval was decided, it starts the reply's
// continuation and returns it. It returns nil when last is nil and no
// reply is active. Errors: NotFound CHAT_NOT_FOUND, Forbidden (another
// user's chat), NotFound GENERATION_NOT_FOUND (no streamed reply
// last.Stream in this chat, or its log expired).
func (s *Service) Resume(ctx context.Context, chatID string, last *job.ID) (*Resumed, error) {
	const op = "chat.Resume"
	c, err := s.store.Chat(ctx, chatID)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, c.UserID); err != nil {
		return nil, err
	}
	if c.Decided != "" {
		t, err := s.continueDecided(ctx, c)
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
		if t != nil {
			return &Resumed{Continuation: t}, nil
		}
	}
	var (
		id    string
		after int64
	)
	if last != nil {
		id, after = last.Stream, last.Seq
	} else {
		if c.Generation == "" || !c.GenerationUntil.After(s.clock()) {
			return nil, nil
		}
		id = c.Generation
	}
	f, err := job.NewFollower(ctx, s.jobs, replyRef(chatID, id), after, isEnd)
	switch {
	case last == nil && errs.Is(err, errs.NotFound):
		return nil, nil // a reply that is not streamed (POST .../messages)
	case errs.Is(err, errs.NotFound):
		return nil, errs.Wrap(op, errGenerationNotFound)
	case err != nil:
		return nil, errs.Wrap(op, err)
	}
	return &Resumed{Follower: f}, nil
}

var (
	errGenerationNotFound  = errs.E("chat", errs.NotFound, CodeGenerationNotFound, "no reply with this id in this chat")
	errGenerationNotActive = errs.E("chat", errs.Conflict, CodeGenerationNotActive, "the reply has already finished")
)

// isEnd reports whether r is a reply's last event: an end event, but not
// the end of a pause for a tool approval (the reply may go on in the same
// log; a follower of a paused reply finishes when the log is no longer
// active and nothing follows).
func isEnd(r job.Record) bool {
	var e struct {
		Type   string `json:"type"`
		Reason string `json:"reason"`
	}
	return json.Unmarshal(r.Data, &e) == nil && e.Type == EventEnd && e.Reason != ReasonAwaitingApproval
}

// Stop asks reply messageID of chat chatID to stop, waits up to StopWait
// for its generator (on whichever instance) to save it, and returns the
// message as stored then (status stopped, or still streaming when the
// generator did not answer in time). A reply rendering a workflow run
// cancels the run. Errors: NotFound CHAT_NOT_FOUND, Forbidden, NotFound
// GENERATION_NOT_FOUND, Conflict GENERATION_NOT_ACTIVE when the reply has
// finished.
func (s *Service) Stop(ctx context.Context, chatID, messageID string) (Message, error) {
	const op = "chat.Stop"
	c, err := s.store.Chat(ctx, chatID)
	if err != nil {
		return Message{}, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, c.UserID); err != nil {
		return Message{}, err
	}
	switch err := s.jobs.RequestStop(ctx, replyRef(chatID, messageID)); {
	case errs.Is(err, errs.NotFound):
		return Message{}, errs.Wrap(op, errGenerationNotFound)
	case errs.Is(err, errs.Conflict):
		return Message{}, errs.Wrap(op, errGenerationNotActive)
	case err != nil:
		return Message{}, errs.Wrap(op, err)
	}
	deadline := time.Now().Add(StopWait)
	for {
		m, active, err := s.store.GeneratedMessage(ctx, chatID, messageID)
		if err != nil || !active || time.Now().After(deadline) {
			if err == nil {
				err = s.withURLs(ctx, &m)
			}
			return m, errs.Wrap(op, err)
		}
		select {
		case <-ctx.Done():
			return m, errs.Wrap(op, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// GenerationKind is the job kind of a streamed reply (package job).
const GenerationKind = "generation"

// InterruptExpired is the sweeper's handler (job.Handler) of
// GenerationKind: Interrupt for the expired reply.
func (s *Service) InterruptExpired(ctx context.Context, e job.Expired) error {
	return s.Interrupt(ctx, e.Collection, e.ID)
}

// Interrupt ends reply id of chat chatID whose lease ran out (its
// generator died): the message keeps what the log holds and is saved
// failed, and error INTERRUPTED (carrying the content as saved) and end
// (reason interrupted) are logged so that followers finish. The closing
// events are numbered after every id the generator may have handed out,
// so a client never holds an id they reuse. It is the sweeper's handler
// for generations and does nothing when the reply has ended, renewed its
// lease meanwhile, or its chat is gone. It fails on storage errors.
func (s *Service) Interrupt(ctx context.Context, chatID, id string) error {
	const op = "chat.Interrupt"
	now := s.clock()
	c, err := s.store.Chat(ctx, chatID)
	if errs.Is(err, errs.NotFound) {
		return nil
	}
	if err != nil {
		return errs.Wrap(op, err)
	}
	msg, active, err := s.store.GeneratedMessage(ctx, chatID, id)
	if errs.Is(err, errs.NotFound) && c.Generation == id {
		// Its process died between the chat's mark and the messages.
		return ignoreConflict(errs.Wrap(op, s.store.ReleaseGeneration(ctx, c, id, nil, now)))
	}
	if errs.Is(err, errs.NotFound) || (err == nil && !active) {
		return nil
	}
	if err != nil {
		return errs.Wrap(op, err)
	}
	recs, head, err := s.jobs.Read(ctx, replyRef(chatID, id), 0)
	if err != nil {
		return errs.Wrap(op, err)
	}
	if msg.Status != StatusStreaming {
		// Its generator died after saving the message, before the end of
		// its log (or the release): the log ends with the content as
		// saved, unless its end is there already.
		var final []job.Record
		if n := len(recs); n == 0 || !isAnyEnd(recs[n-1]) {
			if final, _, err = numbered(nil, head.LastSeq, head.Closing(), id, []Event{
				interruptedEvent(msg.Content),
				endEvent(id, ReasonInterrupted, msg.Citations),
			}); err != nil {
				return errs.Wrap(op, err)
			}
		}
		return ignoreConflict(errs.Wrap(op, s.store.ReleaseGeneration(ctx, c, id, final, now)))
	}
	// The message as stored holds what came before the current
	// generation (a reply continued after a tool approval: what it held
	// when paused); the log's events after its last pause are the rest.
	// A tool call's whole result, when the event says it was cut, is at
	// the key its place in the message gives (ResultKey).
	before, calls := msg.ToolCalls, []ToolCall(nil)
	var content strings.Builder
	for _, r := range recs {
		e, err := decodeEvent(id, r)
		if err != nil {
			return errs.Wrap(op, err)
		}
		switch e.Type {
		case EventContent:
			content.WriteString(e.Delta)
		case EventToolCall:
			calls = append(calls, ToolCall{ToolName: e.ToolName, ToolArgs: e.ToolArgs, Truncated: e.Truncated})
		case EventToolResult:
			if n := len(calls); n > 0 && calls[n-1].Result == nil {
				c := &calls[n-1]
				c.Result, c.Truncated, c.ResultSize = e.Result, c.Truncated || e.Truncated, e.ResultSize
				if e.ResultSize > 0 { // kept whole (keepResult)
					c.ResultKey = ResultKey(chatID, id, len(before)+n-1)
				}
			}
		case EventEnd:
			if e.Reason == ReasonAwaitingApproval { // the stored message holds all this
				content.Reset()
				calls = nil
			}
		}
	}
	for i := range calls {
		if calls[i].Result == nil {
			calls[i].Result = errorResult("interrupted")
		}
	}
	msg.ToolCalls = append(before, calls...)
	msg.Content, msg.Status = msg.Content+content.String(), StatusFailed
	bound(&msg)
	final, _, err := numbered(nil, head.LastSeq, head.Closing(), id, []Event{
		interruptedEvent(msg.Content),
		endEvent(id, ReasonInterrupted, msg.Citations),
	})
	if err != nil {
		return errs.Wrap(op, err)
	}
	return ignoreConflict(errs.Wrap(op, s.store.EndLoggedGeneration(ctx, c, msg, final, now)))
}

// ignoreConflict drops the Conflict of a sweeper's end: the reply renewed
// its lease or ended meanwhile.
func ignoreConflict(err error) error {
	if errs.Is(err, errs.Conflict) {
		return nil
	}
	return err
}

// isAnyEnd reports whether r is an end event, of any reason.
func isAnyEnd(r job.Record) bool {
	var e struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(r.Data, &e) == nil && e.Type == EventEnd
}

// lastAssistant returns the last assistant message of msgs, if any.
func lastAssistant(msgs []Message) (Message, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == model.RoleAssistant {
			return msgs[i], true
		}
	}
	return Message{}, false
}

// Decide approves (or denies) tool call toolCallID of chat chatID's reply
// paused for it, and returns that message (still awaiting_approval: the
// reply goes on when a client resumes the chat's stream, see Continue).
// With remember, an approval also stores allow as the user's policy of the
// tool. Errors: NotFound CHAT_NOT_FOUND, Forbidden (another user's chat),
// Conflict TOOL_CALL_NOT_PENDING when the chat's last reply is not paused
// for this call or the call was already decided.
func (s *Service) Decide(ctx context.Context, chatID, toolCallID string, approve, remember bool) (Message, error) {
	const op = "chat.Decide"
	c, msgs, err := s.store.Conversation(ctx, chatID)
	if err != nil {
		return Message{}, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, c.UserID); err != nil {
		return Message{}, err
	}
	notPending := errs.E(op, errs.Conflict, CodeToolCallNotPending, "this tool call is not waiting for a decision")
	m, ok := lastAssistant(currentPath(c, msgs))
	if !ok || m.Status != StatusAwaitingApproval || m.Decision != "" {
		return Message{}, notPending
	}
	p, err := s.pendingOf(ctx, m)
	if err != nil {
		return Message{}, errs.Wrap(op, err)
	}
	if p == nil || len(p.Calls) == 0 || p.Calls[0].ID != toolCallID {
		return Message{}, notPending
	}
	decision := DecisionDenied
	if approve {
		decision = DecisionApproved
		if remember && s.gate != nil {
			if err := s.gate.Remember(ctx, c.UserID, p.Calls[0].Name); err != nil {
				return Message{}, errs.Wrap(op, err)
			}
		}
	}
	if err := s.store.DecideToolCall(ctx, c, m, decision); err != nil {
		return Message{}, errs.Wrap(op, err)
	}
	m.Decision = decision
	if err := s.withURLs(ctx, &m); err != nil {
		return Message{}, errs.Wrap(op, err)
	}
	return m, nil
}

// continueDecided starts the continuation of chat c's reply paused for a
// tool approval once the user decided (Decide), and returns it as a Turn
// for RunStream; nil when there is nothing to continue or another request
// continued it first. The reply goes on on the same message, as a
// generation whose events follow the pause's in its log. It fails on
// storage errors.
func (s *Service) continueDecided(ctx context.Context, c Chat) (*Turn, error) {
	const op = "chat.Continue"
	c, msgs, err := s.store.Conversation(ctx, c.ID)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	path := currentPath(c, msgs)
	m, ok := lastAssistant(path)
	if !ok || m.Status != StatusAwaitingApproval || (m.Pending == nil && m.PendingKey == "") || m.Decision == "" {
		return nil, nil
	}
	p, err := s.pendingOf(ctx, m)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	var (
		last  int64
		first []job.Record
	)
	head, err := s.jobs.Head(ctx, replyRef(c.ID, m.ID))
	switch {
	case errs.Is(err, errs.NotFound):
		// A reply that was not streamed (POST .../messages): its
		// continuation gets a log, from start.
		data, err := json.Marshal(Event{Type: EventStart, MessageID: m.ID})
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
		first, last = job.Chain(0, 1, data), 1
	case err != nil:
		return nil, errs.Wrap(op, err)
	default:
		// Every id handed out before the pause was logged with it.
		last = head.LastSeq
	}
	now := s.clock()
	gen := Generation{ID: m.ID, Now: now, Until: now.Add(StreamLease), Lease: s.newLease(now, last)}
	reply := m
	reply.Status, reply.Decision = StatusStreaming, ""
	err = s.store.ContinueGeneration(ctx, c, gen, reply, m.Decision, last, first)
	if code := errs.CodeOf(err); code == CodeToolCallNotPending || code == CodeGenerationActive {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	return &Turn{Chat: c, History: path, ModelID: m.ModelID, ReplyID: m.ID, Reply: m, Continue: p, Decision: m.Decision,
		FirstSeq: last + 1, Reserved: gen.Lease.Reserved}, nil
}
