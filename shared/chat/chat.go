// Package chat is conversations with the assistant: chats, their messages,
// the reply loop with native tool calling, and the Server-Sent Events
// stream. It is storage- and provider-agnostic: a Store persists chats, a
// model.Registry generates replies, and Tools runs tool calls.
package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/truncate"
	"github.com/workflowchat/service/shared/usertools"
)

// Limits.
const (
	MaxTitleLen   = 200
	MaxContentLen = 32000
	// MaxToolRounds bounds the model turns of one reply that may call tools.
	MaxToolRounds = 5
	// MaxHistory is how many earlier messages are sent to the model as context.
	MaxHistory = 50
	// MaxReplyBytes bounds the stored content of an assistant message
	// (UTF-8 bytes): a reply longer than that is stored cut, with
	// Truncated set.
	MaxReplyBytes = 64 << 10
	// ValueBound bounds a value of a reply (its JSON): a tool result up
	// to it is kept whole in the reply's event, its message and what the
	// model reads; a longer one is kept whole in the blob store
	// (ResultKey) and is cut to ValueBound (truncate.Cut) everywhere
	// else. Tool arguments and a workflow step's output in an event are
	// cut to it too.
	ValueBound = 32 << 10
	// MaxEventBytes bounds the JSON of every event a reply sends and
	// logs: values are cut to ValueBound, a delta longer than
	// maxDeltaBytes goes as several content events, and the content of
	// an INTERRUPTED error is cut to fit.
	MaxEventBytes = 128 << 10
	// maxDeltaBytes bounds the UTF-8 bytes of one content event's delta
	// (JSON escaping can make it up to 6 times longer).
	maxDeltaBytes = 16 << 10
	// MaxInlinePending bounds the JSON of a paused reply's state kept in
	// its message's item (Pending); a larger state is kept in the blob
	// store, the item holding its key (PendingKey). The item's other
	// values take at most truncate.MaxItem, so the two stay under
	// DynamoDB's 400 KB.
	MaxInlinePending = 32 << 10
	// MaxAttachments bounds a message's attachmentIds.
	MaxAttachments = 10
	// ResultURLTTL is how long a tool call's resultUrl works.
	ResultURLTTL = 15 * time.Minute
)

// Chat is a conversation owned by a user.
type Chat struct {
	ID         string `json:"id"`
	UserID     string `json:"userId"`
	Title      string `json:"title"`
	WorkflowID string `json:"workflowId,omitempty"`
	// KnowledgeBaseIDs are the user's knowledge bases the chat's replies
	// retrieve from (at most MaxKnowledgeBases).
	KnowledgeBaseIDs []string `json:"knowledgeBaseIds,omitempty"`
	// Pinned chats are listed first; Archived ones only on request.
	Pinned    bool      `json:"pinned"`
	Archived  bool      `json:"archived"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Generation is the id of the generation holding the chat, if any,
	// and GenerationUntil when its chat lease ends (see Generation).
	Generation      string    `json:"-"`
	GenerationUntil time.Time `json:"-"`
	// Decided is the id of the chat's reply paused for a tool approval
	// whose call was decided and that waits for its continuation (see
	// Service.Decide); a new generation clears it.
	Decided string `json:"-"`
	// Leaf is the id of the message that ends the chat's current path
	// (see Service.Messages); empty for a chat written before messages
	// had parents, whose leaf is its last message.
	Leaf string `json:"-"`
	// Revision counts the writes that stored new messages in the chat
	// (0 for none since it was counted): with Leaf, it tells whether the
	// chat's tree is still the one a read saw (Generation.Guard).
	Revision int64 `json:"-"`
	// Held is what the chat's messages take as stored (StoredWeight),
	// every branch; set by a read of the whole conversation.
	Held int `json:"-"`
}

// MaxChatBytes bounds what a chat holds, its messages of every branch as
// StoredWeight weighs them: 8 MiB. Every message sent, regenerate and
// list reads the whole conversation, in a function of 128 MB; read whole,
// 40 MB of messages took 114 MiB of heap. A message or regenerate of a
// chat without room for it is refused (Conflict CHAT_FULL) before the
// model is called; a reply to an accepted message is stored whatever its
// weight, so a chat holds at most MaxChatBytes plus the replies under
// way.
const MaxChatBytes = 8 << 20

// CodeChatFull: the chat holds MaxChatBytes; it takes no more messages.
const CodeChatFull = "CHAT_FULL"

// MessageOverhead is what StoredWeight counts for a stored message beyond
// its text: keys, ids, role, status, times.
const MessageOverhead = 256

// StoredWeight is what a stored message counts against MaxChatBytes: the
// bytes of its content, tool calls, paused state and citations (as
// stored: JSON), 36 for each attachment id, and MessageOverhead.
func StoredWeight(content, toolCalls, pending, citations, attachments int) int {
	return content + toolCalls + pending + citations + 36*attachments + MessageOverhead
}

// roomFor returns Conflict CHAT_FULL unless chat c, as read with its
// whole conversation, has room for a message of weight w.
func roomFor(op string, c Chat, w int) error {
	if c.Held+w <= MaxChatBytes {
		return nil
	}
	return errs.E(op, errs.Conflict, CodeChatFull, fmt.Sprintf(
		"this chat holds %d MiB of messages, the most a chat may hold: start a new chat (this one stays readable)", MaxChatBytes>>20))
}

// Message is one message of a chat.
type Message struct {
	ID      string `json:"id"`
	ChatID  string `json:"chatId"`
	Role    string `json:"role"`
	Content string `json:"content"`
	// ModelID is the model that wrote an assistant message.
	ModelID string `json:"modelId,omitempty"`
	// ReplyTo is the id of the user message an assistant message answers.
	ReplyTo string `json:"replyTo,omitempty"`
	// ToolCalls are the tools an assistant message called, with results.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// InputTokens and OutputTokens are the usage the provider reported for
	// an assistant message, summed over its model turns.
	InputTokens  int `json:"inputTokens,omitempty"`
	OutputTokens int `json:"outputTokens,omitempty"`
	// Truncated is true when an assistant message's content was cut at
	// MaxReplyBytes (the stream had sent it whole).
	Truncated bool `json:"truncated,omitempty"`
	// AttachmentIDs are the attachments a user message carried (at most
	// MaxAttachments, each ready and of the same chat when it was sent).
	AttachmentIDs []string `json:"attachmentIds,omitempty"`
	// Citations are the passages of the chat's knowledge bases an
	// assistant message was given, in the order the model saw them.
	Citations []Citation `json:"citations,omitempty"`
	// Pending is the state of a reply paused for a tool approval (status
	// awaiting_approval), kept with the message so that any instance can
	// continue it; Decision is the user's answer (approved or denied)
	// until the continuation starts. Neither is part of the API.
	Pending  *Pending `json:"-"`
	Decision string   `json:"-"`
	// PendingKey, instead of Pending, is the blob key of a paused reply's
	// state too large for the message's item (MaxInlinePending).
	PendingKey string `json:"-"`
	// ParentID is the id of the message this one follows in the chat's
	// tree of messages, nil for a first message (a root).
	ParentID *string `json:"parentId"`
	// SiblingIDs are the ids of the messages with the same parent, in
	// creation order, this one included, and SiblingIndex its place in
	// them; both are set on the messages of a path (Service.Messages).
	SiblingIDs   []string `json:"siblingIds,omitempty"`
	SiblingIndex *int     `json:"siblingIndex,omitempty"`
	// Legacy is true for a message stored before messages had parents:
	// its parent is the message stored before it (by createdAt).
	Legacy bool `json:"-"`
	// DeferLeaf, on a reply being stored at the start of its generation
	// (a regenerated reply), keeps the chat's current leaf where it is
	// until the reply ends: EndLoggedGeneration makes it the leaf unless
	// it failed. Not stored.
	DeferLeaf bool `json:"-"`
	// Status is streaming while a streamed reply is generated, then
	// completed, stopped or failed; completed for every message that was
	// never streamed.
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"createdAt"`
}

// Pending is a reply paused for a tool approval: the conversation sent to
// the model so far (its last turn the assistant's tool calls, followed by
// the results of the calls already run), the calls of that turn not yet
// run (the first is the one awaiting approval) and the tool round.
type Pending struct {
	Messages []model.Message  `json:"messages"`
	Calls    []model.ToolCall `json:"calls"`
	Round    int              `json:"round"`
	// System is the system prompt of the reply when it is not the
	// chat's alone (passages of its knowledge bases were added).
	System string `json:"system,omitempty"`
}

// Decisions on a tool call awaiting approval.
const (
	DecisionApproved = "approved"
	DecisionDenied   = "denied"
)

// Message statuses.
const (
	StatusStreaming        = "streaming"
	StatusCompleted        = "completed"
	StatusStopped          = "stopped"
	StatusFailed           = "failed"
	StatusAwaitingApproval = "awaiting_approval"
)

// Generation is a reply being generated in a chat: while its lease runs,
// the chat takes no other message (409 GENERATION_ACTIVE), so that two
// replies never interleave. The lease outlives the longest reply; it only
// matters when a generation's process died without ending it.
type Generation struct {
	// ID is the id of the assistant message being generated.
	ID string
	// Now is when the generation starts; Until when its chat lease ends.
	Now, Until time.Time
	// Lease is the liveness lease of a streamed generation, which its
	// next log write renews (see package job).
	Lease job.Lease
	// Guard conditions the generation's start on the chat's tree being
	// as the Chat given with it was read: no message stored since
	// (Chat.Revision) and the same current leaf (Chat.Leaf). A parent
	// chosen from that read (the current leaf, a parent with room for one
	// more child) is then still right while the generation holds the
	// chat. Conflict CHAT_CHANGED otherwise.
	Guard bool
}

// Leases of a generation: a reply through POST .../messages ends within
// its function's 30 s; a streamed one within the stream's 600 s.
const (
	SendLease   = 2 * time.Minute
	StreamLease = 11 * time.Minute
)

// Codes of generation errors.
const (
	// CodeGenerationActive is the code of a message refused because the
	// chat is already generating a reply.
	CodeGenerationActive = "GENERATION_ACTIVE"
	// CodeChatChanged is the store's code of a guarded start
	// (Generation.Guard) that found the chat's tree changed since it was
	// read. The service reads it again rather than answering it.
	CodeChatChanged = "CHAT_CHANGED"
	// CodeToolCallNotPending is the code of a decision on a tool call
	// that is not waiting for one.
	CodeToolCallNotPending = "TOOL_CALL_NOT_PENDING"
	// CodeGenerationNotFound: no streamed reply with this id in the chat.
	CodeGenerationNotFound = "GENERATION_NOT_FOUND"
	// CodeGenerationNotActive: stopping a reply that has finished.
	CodeGenerationNotActive = "GENERATION_NOT_ACTIVE"
	// CodeInterrupted is the error of a reply whose generator died (its
	// lease ran out).
	CodeInterrupted = "INTERRUPTED"
)

// ToolCall records one tool call of an assistant message.
type ToolCall struct {
	ToolName string          `json:"toolName"`
	ToolArgs json.RawMessage `json:"toolArgs"`
	Result   json.RawMessage `json:"result"`
	// Truncated is true when the result or the arguments were too large to
	// store: each such value is {"truncated": true, "preview": "..."} (see
	// package truncate).
	Truncated bool `json:"truncated,omitempty"`
	// ResultSize is the length in bytes of a result kept whole in the
	// blob store (ResultKey), and ResultURL, when the message is read, a
	// signed URL that serves it for ResultURLTTL.
	ResultSize int64  `json:"resultSize,omitempty"`
	ResultURL  string `json:"resultUrl,omitempty"`
	// ResultKey is the blob key of the whole result whose Result is cut
	// (ValueBound); empty when Result is whole, or when the blob could
	// not be written.
	ResultKey string `json:"-"`
}

// bound cuts an assistant message to what one stored item holds: its
// content to MaxReplyBytes, then its tool calls' results and arguments to
// the rest of truncate.MaxItem, the largest first. A result kept in the
// blob store stays marked, with its key, however short its preview.
func bound(m *Message) {
	m.Content, m.Truncated = truncate.String(m.Content, MaxReplyBytes)
	if len(m.ToolCalls) == 0 {
		return
	}
	vals := make([]json.RawMessage, 0, 2*len(m.ToolCalls))
	for _, c := range m.ToolCalls {
		vals = append(vals, c.Result, c.ToolArgs)
	}
	cut := truncate.Fit(vals, truncate.MaxItem-len(m.Content))
	for i := range m.ToolCalls {
		c := &m.ToolCalls[i]
		c.Result, c.ToolArgs = vals[2*i], vals[2*i+1]
		c.Truncated = c.Truncated || cut[2*i] || cut[2*i+1]
	}
}

// Store persists chats and messages.
type Store interface {
	// CreateChat stores c and increments its owner's chat count, in one
	// transaction.
	CreateChat(ctx context.Context, c Chat) error
	// Chat returns the chat with id. NotFound CHAT_NOT_FOUND.
	Chat(ctx context.Context, id string) (Chat, error)
	// UpdateChat applies u to the chat id owned by userID (a new title
	// moves its updatedAt to now) and returns it. NotFound
	// CHAT_NOT_FOUND, Forbidden for another user's chat.
	UpdateChat(ctx context.Context, id, userID string, u ChatUpdate, now time.Time) (Chat, error)
	// AutoTitle sets the title of chat id to title if it is still
	// DefaultTitle, leaving its updatedAt; it does nothing when the chat
	// was renamed or is gone.
	AutoTitle(ctx context.Context, id, title string) error
	// DeleteChat removes the chat id owned by userID with its items (its
	// messages and runs), and decrements the owner's chat count. It calls
	// beyond (when not nil) once the chat is marked deleted and before its
	// items go, and fails, leaving the chat in place, when beyond fails.
	// NotFound, Forbidden, or beyond's error.
	DeleteChat(ctx context.Context, id, userID string, beyond func(context.Context) error) error
	// DeleteChatLeftovers deletes what is left under the key of chat id,
	// which was deleted: what a reply under way wrote after the delete
	// listed the chat's items. A chat never deleted must not be passed.
	DeleteChatLeftovers(ctx context.Context, id string) error
	// ListChats returns a page of userID's chats, the pinned first, then
	// the others, each most recently updated first, the archived ones
	// (last) only with archived, and the number of chats so listed.
	ListChats(ctx context.Context, userID string, page paging.Page, archived bool) ([]Chat, int, error)
	// SetLeaf makes message leaf the current leaf of chat c (see
	// Chat.Leaf). NotFound CHAT_NOT_FOUND when the chat is gone.
	SetLeaf(ctx context.Context, c Chat, leaf string) error
	// Conversation returns the chat and all its messages in conversation
	// order, in one read, with the chat's Held set to what they weigh.
	// NotFound CHAT_NOT_FOUND.
	Conversation(ctx context.Context, chatID string) (Chat, []Message, error)
	// AddMessages stores msgs in chat and sets the chat's updatedAt to the
	// last message's time, in one transaction. NotFound when the chat is
	// gone. Every write of messages (here and in the generations below)
	// makes the last of them the chat's current leaf, unless it is
	// DeferLeaf.
	AddMessages(ctx context.Context, chat Chat, msgs ...Message) error
	// StartGeneration stores msgs and marks generation g active on chat,
	// in one transaction, unless another generation's lease is running
	// at g.Now: Conflict GENERATION_ACTIVE; with g.Guard, unless chat's
	// tree changed since it was read: Conflict CHAT_CHANGED. NotFound
	// CHAT_NOT_FOUND.
	StartGeneration(ctx context.Context, chat Chat, g Generation, msgs ...Message) error
	// FinishGeneration stores msgs and ends generation id on chat, in one
	// transaction. When another generation took over the lease (id's had
	// expired), msgs are stored and its lease left alone. NotFound
	// CHAT_NOT_FOUND.
	FinishGeneration(ctx context.Context, chat Chat, id string, msgs ...Message) error
	// StartLoggedGeneration marks g active on chat as StartGeneration
	// does, with the reply's event log (holding first, with lease
	// g.Lease), and stores user (unless its ID is empty: a regenerated
	// reply answers a stored message) and reply (status streaming).
	// Conflict GENERATION_ACTIVE (CHAT_CHANGED with g.Guard), NotFound.
	StartLoggedGeneration(ctx context.Context, chat Chat, g Generation, first []job.Record, user, reply Message) error
	// EndLoggedGeneration stores reply with its final status (only while
	// it is streaming), appends recs and ends its log, freeing chat (a
	// DeferLeaf reply that did not fail becomes the chat's leaf); with
	// expiredBefore set only if the lease ended before then. Conflict
	// GENERATION_NOT_ACTIVE when it has already ended.
	EndLoggedGeneration(ctx context.Context, chat Chat, reply Message, recs []job.Record, expiredBefore time.Time) error
	// ReleaseGeneration ends generation id's log with recs and frees
	// chat, leaving its message as stored, only if its lease ended
	// before expiredBefore (the sweeper's end of a generation whose
	// message was saved, or never stored). Conflict
	// GENERATION_NOT_ACTIVE otherwise.
	ReleaseGeneration(ctx context.Context, chat Chat, id string, recs []job.Record, expiredBefore time.Time) error
	// GeneratedMessage returns generation id's message as stored and
	// whether the generation is active. NotFound GENERATION_NOT_FOUND.
	GeneratedMessage(ctx context.Context, chatID, id string) (Message, bool, error)
	// DecideToolCall records decision on reply m, awaiting approval with
	// no decision yet; Conflict TOOL_CALL_NOT_PENDING otherwise.
	DecideToolCall(ctx context.Context, chat Chat, m Message, decision string) error
	// ContinueGeneration starts generation g again on the decided reply
	// (stored as given, streaming) and reopens its log after event last,
	// with lease g.Lease. Conflict GENERATION_ACTIVE or
	// TOOL_CALL_NOT_PENDING. A reply without a log (not streamed) gets one
	// holding first.
	ContinueGeneration(ctx context.Context, chat Chat, g Generation, reply Message, decision string, last int64, first []job.Record) error
}

// ChatUpdate is a change of a chat: each field set is changed.
type ChatUpdate struct {
	Title            *string
	Pinned, Archived *bool
	// KnowledgeBaseIDs, when set, replaces the chat's (empty: none).
	KnowledgeBaseIDs *[]string
}

// Tools lists the tools offered to models (toolclient.Catalog); the
// calls run through the tool gate (Options.Gate).
type Tools interface {
	// Specs returns the tools offered to models.
	Specs(ctx context.Context) ([]model.ToolSpec, error)
}

// Preferences gives a user's preferred model.
type Preferences interface {
	ModelPreference(ctx context.Context, userID string) (string, error)
}

// CreateRequest is the body of POST /api/chats.
type CreateRequest struct {
	Title      *string `json:"title"`
	WorkflowID *string `json:"workflowId"`
	// KnowledgeBaseIDs name the user's knowledge bases the chat's
	// replies retrieve from.
	KnowledgeBaseIDs []string `json:"knowledgeBaseIds"`
}

// Validate checks the title's length, the workflow id's format and the
// knowledge base ids.
func (r CreateRequest) Validate() error {
	var f errs.FieldErrors
	validateKnowledgeBases(&f, r.KnowledgeBaseIDs)
	if r.Title != nil {
		validateTitle(&f, *r.Title)
	}
	if r.WorkflowID != nil && !httpapi.IsUUID(*r.WorkflowID) {
		f.Add("workflowId", "must be a UUID")
	}
	return f.Err("chat.CreateRequest")
}

// UpdateRequest is the body of PATCH /api/chats/{chatId}: any of a new
// title, pinned, archived and knowledgeBaseIds (the list replaces the
// chat's; [] or null removes them all).
type UpdateRequest struct {
	Title            *string  `json:"title"`
	Pinned           *bool    `json:"pinned"`
	Archived         *bool    `json:"archived"`
	KnowledgeBaseIDs KBIDsRef `json:"knowledgeBaseIds"`
}

// KBIDsRef is an optional knowledgeBaseIds: absent (Set false), null or
// a list of ids. A value of another JSON type is kept as Bad.
type KBIDsRef struct {
	Set bool
	IDs []string
	Bad bool
}

// UnmarshalJSON reads null or a list of strings; anything else marks r
// Bad.
func (r *KBIDsRef) UnmarshalJSON(b []byte) error {
	*r = KBIDsRef{Set: true}
	if string(b) == "null" {
		return nil
	}
	if err := json.Unmarshal(b, &r.IDs); err != nil {
		r.IDs, r.Bad = nil, true
	}
	return nil
}

// Validate requires one of title, pinned, archived and
// knowledgeBaseIds, a title of at most MaxTitleLen characters and
// knowledge base ids as CreateRequest's.
func (r UpdateRequest) Validate() error {
	var f errs.FieldErrors
	switch {
	case r.KnowledgeBaseIDs.Bad:
		f.Add("knowledgeBaseIds", "must be a list of knowledge base ids (UUIDs) or null")
	case r.KnowledgeBaseIDs.Set:
		validateKnowledgeBases(&f, r.KnowledgeBaseIDs.IDs)
	}
	switch {
	case r.Title == nil && r.Pinned == nil && r.Archived == nil && !r.KnowledgeBaseIDs.Set:
		f.Add("title", "is required (or pinned, archived, knowledgeBaseIds)")
	case r.Title != nil:
		validateTitle(&f, *r.Title)
	}
	return f.Err("chat.UpdateRequest")
}

// validateTitle adds to f the problem of a chat title: over MaxTitleLen
// characters, or holding a control character (a line break, a NUL: a
// title is one line of text, shown in lists, shares and exports).
func validateTitle(f *errs.FieldErrors, title string) {
	switch {
	case utf8.RuneCountInString(title) > MaxTitleLen:
		f.Add("title", "must be at most %d characters", MaxTitleLen)
	default:
		f.OneLine("title", title) // the edges are trimmed
	}
}

// MessageRequest is the body of POST /api/chats/{chatId}/messages and of
// the stream.
type MessageRequest struct {
	Content    string  `json:"content"`
	ModelID    string  `json:"modelId"`
	UserID     *string `json:"userId"`
	WorkflowID *string `json:"workflowId"`
	// AttachmentIDs name ready attachments of the chat the message
	// carries to the model (at most MaxAttachments, no repeats).
	AttachmentIDs []string `json:"attachmentIds"`
	// ParentID is the message the new one follows: absent, the chat's
	// current leaf; null, none (a new first message).
	ParentID ParentRef `json:"parentId"`
	// ToolIDs, when present, narrow the remote tools (mcp/<server>/<tool>)
	// offered to the model for this reply to those named (at most
	// usertools.MaxOnly, no repeats; [] offers none); built-in tools are
	// offered as always.
	ToolIDs []string `json:"toolIds"`
}

// ParentRef is an optional parentId: absent (Set false), null (Set, ID
// nil) or a message id. A value of another JSON type is kept as Bad, for
// Validate to report.
type ParentRef struct {
	Set bool
	ID  *string
	Bad bool
}

// UnmarshalJSON reads null or a string; anything else marks r Bad.
func (r *ParentRef) UnmarshalJSON(b []byte) error {
	*r = ParentRef{Set: true}
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		r.Bad = true
		return nil
	}
	s = strings.ToLower(s)
	r.ID = &s
	return nil
}

// validate adds the errors of a parentId that is not null or a UUID.
func (r ParentRef) validate(f *errs.FieldErrors) {
	if r.Bad || (r.ID != nil && !httpapi.IsUUID(*r.ID)) {
		f.Add("parentId", "must be null or a message id (a UUID)")
	}
}

// Validate checks the content's length, the workflow id's format, the
// attachment ids and the parent id's format.
func (r MessageRequest) Validate() error {
	var f errs.FieldErrors
	validateContent(&f, r.Content)
	if r.WorkflowID != nil && !httpapi.IsUUID(*r.WorkflowID) {
		f.Add("workflowId", "must be a UUID")
	}
	validateAttachments(&f, r)
	validateToolIDs(&f, r)
	r.ParentID.validate(&f)
	return f.Err("chat.MessageRequest")
}

// RegenerateRequest is the optional body of POST
// .../messages/{messageId}/regenerate: modelId (default: the model of the
// reply regenerated, else as for a new message) and userId (when present,
// the caller).
type RegenerateRequest struct {
	ModelID string  `json:"modelId"`
	UserID  *string `json:"userId"`
}

// validateAttachments checks r's attachmentIds: at most MaxAttachments
// attachment ids (UUIDs), none repeated, and none with a workflowId (a
// message that runs a workflow goes to no model).
func validateAttachments(f *errs.FieldErrors, r MessageRequest) {
	ids := r.AttachmentIDs
	switch {
	case len(ids) == 0:
		return
	case len(ids) > MaxAttachments:
		f.Add("attachmentIds", "must hold at most %d attachment ids, not %d", MaxAttachments, len(ids))
		return
	case r.WorkflowID != nil:
		f.Add("attachmentIds", "cannot be sent with workflowId: a workflow run takes no attachments")
		return
	}
	validateUUIDs(f, "attachmentIds", "attachment", ids)
}

// validateUUIDs adds an error for each of ids, the list field, that is
// not a UUID or repeats an earlier one (case folded); noun names what the
// ids are in the messages.
func validateUUIDs(f *errs.FieldErrors, field, noun string, ids []string) {
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		switch {
		case !httpapi.IsUUID(id):
			f.Add(fmt.Sprintf("%s[%d]", field, i), "must be %s id (a UUID)", article(noun))
		case seen[strings.ToLower(id)]:
			f.Add(fmt.Sprintf("%s[%d]", field, i), "repeats %s %s", noun, id)
		}
		seen[strings.ToLower(id)] = true
	}
}

// article puts "a" or "an" before noun.
func article(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

// validateToolIDs checks r's toolIds: at most usertools.MaxOnly remote
// tool ids (mcp/<server>/<tool>), none repeated, and none with a
// workflowId (a message that runs a workflow goes to no model).
func validateToolIDs(f *errs.FieldErrors, r MessageRequest) {
	ids := r.ToolIDs
	switch {
	case ids == nil:
		return
	case len(ids) > usertools.MaxOnly:
		f.Add("toolIds", "must hold at most %d tool ids, not %d", usertools.MaxOnly, len(ids))
		return
	case r.WorkflowID != nil:
		f.Add("toolIds", "cannot be sent with workflowId: a workflow run offers no tools to a model")
		return
	}
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		switch {
		case !usertools.IsRemote(id):
			f.Add(fmt.Sprintf("toolIds[%d]", i), "must be a remote tool id (mcp/<server>/<tool>)")
		case seen[id]:
			f.Add(fmt.Sprintf("toolIds[%d]", i), "repeats tool %s", id)
		}
		seen[id] = true
	}
}

func validateContent(f *errs.FieldErrors, content string) {
	switch n := utf8.RuneCountInString(content); {
	case strings.TrimSpace(content) == "":
		// Blank content asks nothing (and would be the model's whole
		// turn); the workflow chat refuses it the same way.
		f.Add("content", "is required")
	case n > MaxContentLen:
		f.Add("content", "must be at most %d characters", MaxContentLen)
	}
}

// StreamRequest is the body of the stream: modelId and userId are required.
type StreamRequest struct {
	MessageRequest
}

// Validate requires content, modelId and userId.
func (r StreamRequest) Validate() error {
	var f errs.FieldErrors
	validateContent(&f, r.Content)
	if r.ModelID == "" {
		f.Add("modelId", "is required")
	}
	if r.UserID == nil || *r.UserID == "" {
		f.Add("userId", "is required")
	}
	if r.WorkflowID != nil && !httpapi.IsUUID(*r.WorkflowID) {
		f.Add("workflowId", "must be a UUID")
	}
	validateAttachments(&f, r.MessageRequest)
	validateToolIDs(&f, r.MessageRequest)
	r.ParentID.validate(&f)
	return f.Err("chat.StreamRequest")
}
