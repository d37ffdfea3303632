package chat

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/toolgate"
	"github.com/workflowchat/service/shared/usage"
	"github.com/workflowchat/service/shared/usertools"
)

// DefaultTitle names a chat created or renamed without a title; such a
// chat is titled from its first exchange (see Service.autoTitle).
const DefaultTitle = "New chat"

// Service implements the chat operations.
type Service struct {
	store        Store
	models       *model.Registry
	tools        Tools
	prefs        Preferences
	runs         Runs
	jobs         job.Store
	usage        *usage.Meter
	gate         *toolgate.Gate
	blobs        blob.Store
	atts         Attachments
	knowledge    Knowledge
	defaultModel string
	shares       ShareStore
	shareBase    string
	erasures     auth.Erasures
	now          func() time.Time
	lease        time.Duration
}

// Options are the dependencies of NewService. Tools may be nil (no tool
// calling); Runs may be nil (chats and the stream refuse workflowId with
// WORKFLOWS_UNAVAILABLE); Now nil means time.Now.
type Options struct {
	Store Store
	// Jobs is the log of streamed replies (their events, lease and stop).
	Jobs        job.Store
	Models      *model.Registry
	Tools       Tools
	Preferences Preferences
	Runs        Runs
	// Usage reserves the user's monthly token budget before each model
	// call and records its usage after; nil does neither.
	Usage *usage.Meter
	// Gate decides and runs the models' tool calls (policies, budget,
	// identity); nil answers every call that tools are not available.
	Gate *toolgate.Gate
	// Blobs keeps the values of replies too large for their items (tool
	// results, paused states) under chats/<chatId>/; nil keeps none (a
	// large tool result is only stored cut).
	Blobs blob.Store
	// Attachments reads the attachments messages carry; nil refuses
	// attachmentIds (ATTACHMENTS_UNAVAILABLE).
	Attachments Attachments
	// Knowledge is the knowledge bases chats name (knowledgeBaseIds) and
	// their replies retrieve from; nil refuses knowledgeBaseIds
	// (KNOWLEDGE_UNAVAILABLE).
	Knowledge Knowledge
	// Shares keeps the chats' shares; nil refuses to create any
	// (SHARES_UNAVAILABLE). ShareBaseURL (an origin, or empty) prefixes
	// the path of a share's url.
	Shares       ShareStore
	ShareBaseURL string
	// Erasures tells which accounts are being deleted: their shares
	// read as gone at once, before the erasure deletes them. Nil: the
	// erasure alone ends them.
	Erasures       auth.Erasures
	DefaultModelID string
	Now            func() time.Time
	// Lease is how far ahead each log write of a streamed reply renews
	// its lease; zero means job.LeaseTime (30 s).
	Lease time.Duration
}

// NewService returns a Service.
func NewService(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Lease <= 0 {
		o.Lease = job.LeaseTime
	}
	return &Service{store: o.Store, models: o.Models, tools: o.Tools, prefs: o.Preferences, runs: o.Runs, jobs: o.Jobs, usage: o.Usage, gate: o.Gate, blobs: o.Blobs, atts: o.Attachments, knowledge: o.Knowledge, defaultModel: o.DefaultModelID,
		shares: o.Shares, shareBase: o.ShareBaseURL, erasures: o.Erasures,
		now: o.Now, lease: o.Lease}
}

func (s *Service) clock() time.Time { return s.now().UTC() }

// Create creates a chat for the signed-in user, attached to one of the
// user's workflows when req names one: NotFound WORKFLOW_NOT_FOUND, then
// Forbidden for another user's; Invalid WORKFLOWS_UNAVAILABLE where this
// deployment has no workflows. The knowledge bases req names must be the
// user's: NotFound KNOWLEDGE_BASE_NOT_FOUND (another user's too).
func (s *Service) Create(ctx context.Context, req CreateRequest) (Chat, error) {
	const op = "chat.Create"
	now := s.clock()
	c := Chat{ID: uuid.NewString(), UserID: auth.UserID(ctx), CreatedAt: now, UpdatedAt: now}
	if req.WorkflowID != nil {
		if s.runs == nil {
			return Chat{}, errs.E(op, errs.Invalid, "WORKFLOWS_UNAVAILABLE", "this deployment cannot run workflows")
		}
		if _, err := s.runs.CheckWorkflow(ctx, *req.WorkflowID); err != nil {
			return Chat{}, errs.Wrap(op, err)
		}
		c.WorkflowID = *req.WorkflowID
	}
	if len(req.KnowledgeBaseIDs) > 0 {
		ids, err := s.checkKnowledgeBases(ctx, op, c.UserID, req.KnowledgeBaseIDs)
		if err != nil {
			return Chat{}, err
		}
		c.KnowledgeBaseIDs = ids
	}
	if req.Title != nil {
		c.Title = strings.TrimSpace(*req.Title)
	}
	if c.Title == "" {
		c.Title = DefaultTitle
	}
	if err := s.store.CreateChat(ctx, c); err != nil {
		return Chat{}, errs.Wrap(op, err)
	}
	return c, nil
}

// Get returns the chat id. NotFound, then Forbidden for another user's.
func (s *Service) Get(ctx context.Context, id string) (Chat, error) {
	return auth.Owned(ctx, "chat.Get", func(ctx context.Context) (Chat, error) { return s.store.Chat(ctx, id) },
		func(c Chat) string { return c.UserID })
}

// Update renames, pins or archives the chat id, or replaces its
// knowledge bases (the fields req sets). NotFound, Forbidden, then for
// a knowledge base not the user's NotFound KNOWLEDGE_BASE_NOT_FOUND.
func (s *Service) Update(ctx context.Context, id string, req UpdateRequest) (Chat, error) {
	const op = "chat.Update"
	u := ChatUpdate{Pinned: req.Pinned, Archived: req.Archived}
	if req.KnowledgeBaseIDs.Set {
		// The chat's 404 and 403 come before the knowledge bases'.
		if _, err := s.Get(ctx, id); err != nil {
			return Chat{}, err
		}
		ids, err := s.checkKnowledgeBases(ctx, op, auth.UserID(ctx), req.KnowledgeBaseIDs.IDs)
		if err != nil {
			return Chat{}, err
		}
		u.KnowledgeBaseIDs = &ids
	}
	if req.Title != nil {
		title := strings.TrimSpace(*req.Title)
		if title == "" {
			title = DefaultTitle
		}
		u.Title = &title
	}
	c, err := s.store.UpdateChat(ctx, id, auth.UserID(ctx), u, s.clock())
	return c, errs.Wrap(op, err)
}

// Delete removes the chat id with its messages and runs, and first, once
// the chat is marked deleted (nothing can be added to it then), what it
// owns beyond them: its attachments (their blobs and the quota they hold)
// and its replies' values in the blob store. NotFound, Forbidden, or the
// error of that cleanup, which leaves the chat in place: a retried delete
// finishes the job (each part is idempotent).
func (s *Service) Delete(ctx context.Context, id string) error {
	userID := auth.UserID(ctx)
	return errs.Wrap("chat.Delete", s.store.DeleteChat(ctx, id, userID, func(ctx context.Context) error {
		if s.atts != nil {
			if err := s.atts.DeleteChat(ctx, id, userID); err != nil {
				return err
			}
		}
		return s.deleteValues(ctx, id)
	}))
}

// List returns a page of userID's chats, pinned first, and their total;
// archived chats only with archived (listed last). Forbidden unless
// userID is the signed-in user.
func (s *Service) List(ctx context.Context, userID string, page paging.Page, archived bool) ([]Chat, int, error) {
	const op = "chat.List"
	if err := auth.Authorize(ctx, op, userID); err != nil {
		return nil, 0, err
	}
	chats, total, err := s.store.ListChats(ctx, userID, page, archived)
	return chats, total, errs.Wrap(op, err)
}

// Messages returns the current path of chat id: its messages from the
// first to the current leaf, in conversation order (all of them where
// nothing branched), each with its parentId, siblingIds and siblingIndex,
// and each tool call whose whole result is in the blob store with a URL
// serving it (ResultURL). With leaf set, the path ends at message leaf,
// which becomes the chat's current leaf. NotFound (also
// MESSAGE_NOT_FOUND for a leaf not in the chat), Forbidden.
func (s *Service) Messages(ctx context.Context, id, leaf string) ([]Message, error) {
	const op = "chat.Messages"
	c, msgs, err := s.store.Conversation(ctx, id)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, c.UserID); err != nil {
		return nil, err
	}
	t := newTree(msgs)
	end := t.leaf(c)
	if leaf != "" {
		if end, err = t.find(op, strings.ToLower(leaf)); err != nil {
			return nil, err
		}
		if t.msgs[end].ID != c.Leaf {
			if err := s.store.SetLeaf(ctx, c, t.msgs[end].ID); err != nil {
				return nil, errs.Wrap(op, err)
			}
		}
	}
	path := t.path(end)
	ptrs := make([]*Message, len(path))
	for i := range path {
		ptrs[i] = &path[i]
	}
	if err := s.withURLs(ctx, ptrs...); err != nil {
		return nil, errs.Wrap(op, err)
	}
	return path, nil
}

// currentPath returns the messages of chat c's current path, msgs being
// all its messages in creation order.
func currentPath(c Chat, msgs []Message) []Message {
	t := newTree(msgs)
	return t.path(t.leaf(c))
}

// Attachments reads the attachments a message carries
// (attachment.Service).
type Attachments interface {
	// ForMessage returns userID's attachments ids of chat chatID, each
	// ready, as a model taking in reads them (text cut to a bound,
	// images and PDFs as bytes when in takes them), in the order of ids.
	// Errors: NotFound ATTACHMENT_NOT_FOUND (also another chat's or
	// another user's), Conflict ATTACHMENT_NOT_READY or
	// ATTACHMENT_FAILED, and storage errors.
	ForMessage(ctx context.Context, userID, chatID string, ids []string, in model.Input) ([]model.Attachment, error)
	// DeleteChat deletes every attachment of userID's chat chatID, with
	// their bytes and the quota they hold; part of the chat's delete. It
	// is idempotent.
	DeleteChat(ctx context.Context, chatID, userID string) error
}

// attachments returns the attachments ids of chat c for a reply by
// modelID (see Attachments.ForMessage); none for no ids. Invalid
// ATTACHMENTS_UNAVAILABLE where this deployment reads no attachments.
func (s *Service) attachments(ctx context.Context, c Chat, ids []string, modelID string) ([]model.Attachment, error) {
	const op = "chat.attachments"
	if len(ids) == 0 {
		return nil, nil
	}
	if s.atts == nil {
		return nil, errs.E(op, errs.Invalid, "ATTACHMENTS_UNAVAILABLE", "this deployment takes no attachments on messages")
	}
	m, err := s.models.Lookup(modelID)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	atts, err := s.atts.ForMessage(ctx, c.UserID, c.ID, ids, m.Input)
	return atts, errs.Wrap(op, err)
}

// normalizeIDs returns ids lower-cased (attachment ids are stored so).
func normalizeIDs(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strings.ToLower(id)
	}
	return out
}

// Exchange is a user message and the assistant's reply.
type Exchange struct {
	Message
	Response Message `json:"response"`
}

// Send posts a user message to chat id and returns it with the assistant's
// whole reply; both are stored in one transaction. A reply that calls a
// tool whose policy is ask is stored awaiting_approval (see Decide). The model is req's, else
// the user's preference, else the deployment default. The message's
// attachments (req.AttachmentIDs) reach the model with it. The message
// follows req.ParentID (default: the chat's current leaf; see
// Service.Messages) and the model sees only the path to it; the reply
// becomes the chat's current leaf. While the reply is
// generated the chat takes no other message; the parent (and the room
// under it) is chosen again when another message's reply was stored
// between this one's read of the chat and its start (startFresh), so a
// message sent without parentId follows the leaf it starts on. Errors: Invalid
// (INVALID_MODEL, INVALID_PARENT), NotFound, Forbidden (another user's chat, or a userId
// other than the caller's), the attachments' (see Attachments.ForMessage),
// Conflict TOO_MANY_BRANCHES (the parent has MaxSiblings children),
// RateLimited BUDGET_EXCEEDED (the user's
// monthly token budget has no room for a model call: checked by reserving
// the first call before anything is stored), Conflict GENERATION_ACTIVE (the chat is
// already generating a reply), and the model's errors.
func (s *Service) Send(ctx context.Context, id string, req MessageRequest) (Exchange, error) {
	const op = "chat.Send"
	return startFresh(op, func() (exchange, error) { return s.newExchange(ctx, op, id, req, true) },
		func(ex exchange) (Exchange, error) {
			reply, err := s.answer(ctx, op, ex)
			if err != nil {
				return Exchange{}, err
			}
			return Exchange{Message: ex.user, Response: reply}, nil
		})
}

// startAttempts bounds the reads of a chat for one new reply: a reply's
// parent (and the room under it) is chosen from a read of the chat made
// before its generation holds the chat, so its start is conditioned on
// the chat being as read (Generation.Guard), and when another reply was
// stored in between (or the current leaf moved), the chat is read again
// and the parent chosen again.
const startAttempts = 3

// startFresh reads an exchange with read and starts it with start, again
// from a new read while start finds the chat changed since the read
// (Conflict CHAT_CHANGED), up to startAttempts reads; then Conflict
// GENERATION_ACTIVE: other replies keep coming in.
func startFresh[T any](op string, read func() (exchange, error), start func(exchange) (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		ex, err := read()
		if err != nil {
			var zero T
			return zero, err
		}
		v, err := start(ex)
		if errs.CodeOf(err) != CodeChatChanged {
			return v, err
		}
		if attempt == startAttempts {
			return v, errs.E(op, errs.Conflict, CodeGenerationActive,
				"this chat is taking other messages at the same time; wait for their replies and send again").WithCause(err)
		}
	}
}

// Regenerate answers again the user message that assistant message
// messageID of chat chatID answers: a new reply beside it (a sibling),
// generated as Send generates one (the same tools, approvals and the
// user message's attachments), which becomes the chat's current leaf once
// stored; a reply that fails stores nothing and leaves the current path
// as it was. The model is req's, else the regenerated reply's (when this
// deployment still has it), else as for Send. Errors: Send's, NotFound
// MESSAGE_NOT_FOUND (no such message in the chat), Invalid
// NOT_AN_ASSISTANT_MESSAGE.
func (s *Service) Regenerate(ctx context.Context, chatID, messageID string, req RegenerateRequest) (Message, error) {
	const op = "chat.Regenerate"
	return startFresh(op, func() (exchange, error) { return s.regenExchange(ctx, op, chatID, messageID, req) },
		func(ex exchange) (Message, error) { return s.answer(ctx, op, ex) })
}

// exchange is a reply about to be generated: in chat, after history (the
// path before user, all the model sees), to user (a new message, stored
// with the reply when fresh; the message a regenerate answers again
// otherwise), with user's attachments as modelID reads them.
type exchange struct {
	chat    Chat
	history []Message
	user    Message
	fresh   bool
	atts    []model.Attachment
	modelID string
	// passages are what the chat's knowledge bases gave for user.
	passages []Passage
	// toolIDs narrow the remote tools offered (the message's toolIds).
	toolIDs []string
}

// load reads chat id with its messages and, with pref, the caller's
// preferred model (empty when none), at once. Errors: the store's.
func (s *Service) load(ctx context.Context, id string, pref bool) (Chat, []Message, string, error) {
	var (
		c    Chat
		msgs []Message
		p    string
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		c, msgs, err = s.store.Conversation(gctx, id)
		return err
	})
	if pref && s.prefs != nil {
		g.Go(func() (err error) {
			p, err = s.prefs.ModelPreference(gctx, auth.UserID(ctx))
			if errs.Is(err, errs.NotFound) {
				err = nil
			}
			return err
		})
	}
	err := g.Wait()
	return c, msgs, p, err
}

// newExchange checks a new user message req to chat id and returns its
// exchange: the model (req's; with usePref, else the caller's preference,
// else the default), the parent (see tree.parentOf), the path to it and
// the message's attachments. Errors: Send's, before anything is stored.
func (s *Service) newExchange(ctx context.Context, op, id string, req MessageRequest, usePref bool) (exchange, error) {
	if req.ModelID != "" {
		if _, err := s.models.Lookup(req.ModelID); err != nil { // 400 before 404/403
			return exchange{}, errs.Wrap(op, err)
		}
	}
	c, msgs, pref, err := s.load(ctx, id, usePref && req.ModelID == "")
	if err != nil {
		return exchange{}, errs.Wrap(op, err)
	}
	if err := s.authorizeMessage(ctx, op, c, req); err != nil {
		return exchange{}, err
	}
	t := newTree(msgs)
	p, err := t.parentOf(op, c, req.ParentID)
	if err != nil {
		return exchange{}, err
	}
	modelID := firstNonEmpty(req.ModelID, pref, s.defaultModel, model.BuiltinID)
	if _, err := s.models.Lookup(modelID); err != nil {
		return exchange{}, errs.Wrap(op, err)
	}
	ids := normalizeIDs(req.AttachmentIDs)
	if err := roomFor(op, c, StoredWeight(len(req.Content), 0, 0, 0, len(ids))); err != nil {
		return exchange{}, err
	}
	atts, err := s.attachments(ctx, c, ids, modelID)
	if err != nil {
		return exchange{}, errs.Wrap(op, err)
	}
	user := s.newMessage(c.ID, model.RoleUser, req.Content)
	user.AttachmentIDs = ids
	user.ParentID = t.idOf(p)
	return exchange{chat: c, history: t.path(p), user: user, fresh: true, atts: atts, modelID: modelID,
		passages: s.retrieve(ctx, c, user.Content), toolIDs: req.ToolIDs}, nil
}

// regenExchange checks a regenerate of reply messageID of chat chatID and
// returns its exchange: the user message the reply answers, the path
// before it and its attachments. Errors: Regenerate's.
func (s *Service) regenExchange(ctx context.Context, op, chatID, messageID string, req RegenerateRequest) (exchange, error) {
	if req.ModelID != "" {
		if _, err := s.models.Lookup(req.ModelID); err != nil {
			return exchange{}, errs.Wrap(op, err)
		}
	}
	c, msgs, pref, err := s.load(ctx, chatID, req.ModelID == "")
	if err != nil {
		return exchange{}, errs.Wrap(op, err)
	}
	if err := s.authorizeMessage(ctx, op, c, MessageRequest{UserID: req.UserID}); err != nil {
		return exchange{}, err
	}
	t := newTree(msgs)
	i, err := t.find(op, strings.ToLower(messageID))
	if err != nil {
		return exchange{}, err
	}
	old := t.msgs[i]
	u := t.parent[i]
	if old.Role != model.RoleAssistant || u < 0 || t.msgs[u].Role != model.RoleUser {
		return exchange{}, errs.E(op, errs.Invalid, CodeNotAssistantMessage, "only an assistant's reply to a user message can be regenerated")
	}
	if err := t.roomUnder(op, u); err != nil {
		return exchange{}, err
	}
	if err := roomFor(op, c, 0); err != nil { // a regenerate adds a reply
		return exchange{}, err
	}
	modelID := req.ModelID
	if modelID == "" {
		if _, err := s.models.Lookup(old.ModelID); err == nil && old.ModelID != "" {
			modelID = old.ModelID
		}
	}
	modelID = firstNonEmpty(modelID, pref, s.defaultModel, model.BuiltinID)
	if _, err := s.models.Lookup(modelID); err != nil {
		return exchange{}, errs.Wrap(op, err)
	}
	path := t.path(u)
	user := path[len(path)-1]
	atts, err := s.attachments(ctx, c, user.AttachmentIDs, modelID)
	if err != nil {
		return exchange{}, errs.Wrap(op, err)
	}
	return exchange{chat: c, history: path[:len(path)-1], user: user, atts: atts, modelID: modelID,
		passages: s.retrieve(ctx, c, user.Content)}, nil
}

// answer generates ex's whole reply under a generation of its chat and
// stores it (with ex's user message when fresh) in one transaction; the
// reply becomes the chat's current leaf. A reply that fails stores
// nothing. Errors: Send's after its checks.
func (s *Service) answer(ctx context.Context, op string, ex exchange) (Message, error) {
	c, user := ex.chat, ex.user
	ctx = usertools.WithOnly(ctx, ex.toolIDs)
	held, err := s.reserveReply(ctx, c.UserID, ex.modelID, systemWith(ex.passages), toModelMessages(ex.history, user, ex.atts))
	if err != nil {
		return Message{}, errs.Wrap(op, err)
	}
	now := s.clock()
	gen := Generation{ID: uuid.NewString(), Now: now, Until: now.Add(SendLease), Guard: true}
	if err := s.store.StartGeneration(ctx, c, gen); err != nil {
		s.usage.Release(ctx, held)
		return Message{}, errs.Wrap(op, err)
	}
	reply, err := s.reply(ctx, ex.history, user, ex.atts, ex.passages, ex.modelID, gen.ID, held, func(Event) error { return nil })
	if errors.Is(err, errAwaitingApproval) {
		reply.Status, err = StatusAwaitingApproval, s.keepPending(ctx, &reply)
	}
	if err != nil {
		// Nothing of the reply is stored: the results it kept in the blob
		// store would have no item naming them.
		s.dropValues(ctx, reply)
		s.endGeneration(ctx, c, gen.ID)
		return Message{}, errs.Wrap(op, err)
	}
	msgs := []Message{reply}
	if ex.fresh {
		msgs = []Message{user, reply}
	}
	if err := s.store.FinishGeneration(ctx, c, gen.ID, msgs...); err != nil {
		if errs.Is(err, errs.NotFound) {
			s.dropValues(ctx, reply) // the chat was deleted meanwhile
		}
		s.endGeneration(ctx, c, gen.ID)
		return Message{}, errs.Wrap(op, err)
	}
	s.autoTitle(ctx, c, user, reply, ex.modelID)
	if err := s.withURLs(ctx, &reply); err != nil {
		return Message{}, errs.Wrap(op, err)
	}
	return reply, nil
}

// endGeneration ends generation id on c without storing anything, with a
// detached context (the client may have left): a failed reply frees the
// chat at once rather than when the lease runs out. A failure is logged.
func (s *Service) endGeneration(ctx context.Context, c Chat, id string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.store.FinishGeneration(dctx, c, id); err != nil {
		logWarn(ctx, "end generation", "chatId", c.ID, "generation", id, "err", err.Error())
	}
}

// authorizeMessage checks that the caller owns c and that a userId in the
// body, if any, is the caller's.
func (s *Service) authorizeMessage(ctx context.Context, op string, c Chat, req MessageRequest) error {
	if err := auth.Authorize(ctx, op, c.UserID); err != nil {
		return err
	}
	if req.UserID != nil && *req.UserID != auth.UserID(ctx) {
		return errs.E(op, errs.Forbidden, "FORBIDDEN", "userId must be the signed-in user")
	}
	return nil
}

func (s *Service) newMessage(chatID, role, content string) Message {
	return Message{ID: uuid.NewString(), ChatID: chatID, Role: role, Content: content, Status: StatusCompleted, CreatedAt: s.clock()}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func logWarn(ctx context.Context, msg string, args ...any) {
	logging.FromContext(ctx).WarnContext(ctx, msg, args...)
}
