package chat

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
)

// PingInterval is the silence after which the stream sends ": ping".
const PingInterval = 15 * time.Second

// Turn is a streamed exchange that passed every check and whose user
// message is stored: what remains is to generate the reply.
type Turn struct {
	Chat    Chat
	History []Message
	User    Message
	ModelID string
	// ReplyID is the id of the assistant message, announced in start.
	ReplyID string
	// Workflow, when not nil, is the workflow the reply runs (the
	// request's workflowId) instead of a model reply.
	Workflow *PreparedRun
}

// StartStream checks a stream request and stores its user message, so
// that every error it returns can still be a plain JSON response: Invalid
// (INVALID_MODEL, WORKFLOWS_UNAVAILABLE when no WorkflowRunner is
// configured), NotFound, Forbidden, Conflict GENERATION_ACTIVE when the
// chat is already generating a reply. With a workflowId, the workflow must
// be the caller's (NotFound WORKFLOW_NOT_FOUND, then Forbidden), checked
// after the chat. The user message is stored together with the start of
// the turn's generation, which RunStream ends.
func (s *Service) StartStream(ctx context.Context, id string, req StreamRequest) (*Turn, error) {
	const op = "chat.StartStream"
	if _, err := s.models.Lookup(req.ModelID); err != nil {
		return nil, errs.Wrap(op, err)
	}
	c, history, err := s.store.Conversation(ctx, id)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	if err := s.authorizeMessage(ctx, op, c, req.MessageRequest); err != nil {
		return nil, err
	}
	var run *PreparedRun
	if req.WorkflowID != nil {
		if s.workflows == nil {
			return nil, errs.E(op, errs.Invalid, "WORKFLOWS_UNAVAILABLE", "running workflows from the stream is not available")
		}
		p, err := s.workflows.PrepareRun(ctx, c.ID, *req.WorkflowID)
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
		run = &p
	}
	user := s.newMessage(c.ID, "user", req.Content)
	gen := Generation{ID: uuid.NewString(), Now: user.CreatedAt, Until: user.CreatedAt.Add(StreamLease)}
	if err := s.store.StartGeneration(ctx, c, gen, user); err != nil {
		return nil, errs.Wrap(op, err)
	}
	return &Turn{Chat: c, History: history, User: user, ModelID: req.ModelID, ReplyID: gen.ID, Workflow: run}, nil
}

// RunStream generates t's reply as events through emit: start, content,
// tool_call and tool_result events, then end (with a workflow: a
// tool_call and tool_result per step, then the summary as content); a failure becomes an error
// event followed by end. The assistant message is stored with the announced
// id and the concatenated deltas as its content, also when ctx is cancelled
// (the client left): what was generated is kept. It returns the stored
// message, or the error that stopped the stream.
func (s *Service) RunStream(ctx context.Context, t *Turn, emit func(Event) error) (Message, error) {
	if err := emit(Event{Type: EventStart, MessageID: t.ReplyID}); err != nil {
		s.endGeneration(ctx, t.Chat, t.ReplyID)
		return Message{}, err
	}
	var (
		msg    Message
		genErr error
	)
	if t.Workflow != nil {
		msg, genErr = s.runWorkflow(ctx, t, emit)
	} else {
		msg, genErr = s.reply(ctx, t.History, t.User, t.ModelID, t.ReplyID, emit)
	}
	var keep []Message
	if msg.Content != "" || len(msg.ToolCalls) > 0 || genErr == nil {
		keep = append(keep, msg)
	}
	{
		// Store (and end the generation) even when the client is gone: a
		// detached context with its own deadline.
		saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := s.store.FinishGeneration(saveCtx, t.Chat, t.ReplyID, keep...)
		cancel()
		if err != nil {
			logging.FromContext(ctx).ErrorContext(ctx, "store assistant message", "err", err.Error())
			if genErr == nil {
				genErr = errs.Wrap("chat.RunStream", err)
			}
		}
	}
	if genErr != nil {
		if ctx.Err() != nil {
			return msg, ctx.Err() // the client left; nobody to tell
		}
		_ = emit(Event{Type: EventError, Error: errs.CodeOf(genErr), Message: errs.MessageOf(genErr, "the reply failed")})
		_ = emit(Event{Type: EventEnd, MessageID: t.ReplyID})
		return msg, genErr
	}
	return msg, emit(Event{Type: EventEnd, MessageID: t.ReplyID})
}
