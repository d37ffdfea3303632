package chat

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/truncate"
)

// Large values of a reply (docs/decisions.md, "Large values in replies").
// A DynamoDB item holds 400 KB, a reply's event log batches events into
// items, and a model reads what it is sent: so a tool result longer than
// ValueBound is kept whole in the blob store, under the chat's prefix
// (chats/<chatId>/<messageId>/tool-<n>.json, n counting the message's tool
// calls from 0), and everything else (the tool_result event, the stored
// tool call, the model's next turn) gets it cut to ValueBound. A paused
// reply's state longer than MaxInlinePending goes to
// chats/<chatId>/<messageId>/pending.json. Every blob of a chat goes with
// the chat (DeleteValues).

// ResultKey is the blob key of the whole result of tool call n (counted
// from 0 in the message's ToolCalls) of message messageID of chat chatID.
func ResultKey(chatID, messageID string, n int) string {
	return valuesPrefix(chatID) + messageID + "/tool-" + strconv.Itoa(n) + ".json"
}

// PendingKey is the blob key of the state of message messageID of chat
// chatID paused for a tool approval.
func PendingKey(chatID, messageID string) string {
	return valuesPrefix(chatID) + messageID + "/pending.json"
}

// valuesPrefix is the prefix of every blob of chat chatID.
func valuesPrefix(chatID string) string { return blob.PrefixChats + chatID + "/" }

// maxPendingBlob bounds a paused reply's state read back from the blob
// store: more than the largest state a reply can hold (MaxHistory
// messages, and MaxAttachments images or PDFs of
// attachment.ModelDataBound, base64-encoded).
const maxPendingBlob = 128 << 20

// keepResult cuts the result of tool call n of msg when it is longer than
// ValueBound, after keeping it whole in the blob store (ResultKey, and
// ResultSize its length). It returns the tool call to record and what the
// model reads of the result. A result whose blob cannot be written is
// still cut, with no key or size (the reply goes on; the failure is
// logged): so a tool_result event with a resultSize names a kept result.
func (s *Service) keepResult(ctx context.Context, msg Message, n int, call ToolCall) (ToolCall, json.RawMessage) {
	whole := call.Result
	if len(whole) <= ValueBound {
		return call, whole
	}
	call.Result, call.Truncated = truncate.Cut(whole, ValueBound), true
	if s.blobs != nil {
		key := ResultKey(msg.ChatID, msg.ID, n)
		if _, err := blob.PutBytes(ctx, s.blobs, key, whole, "application/json"); err != nil {
			logging.FromContext(ctx).WarnContext(ctx, "could not keep a tool result; it is stored cut",
				"chatId", msg.ChatID, "messageId", msg.ID, "bytes", len(whole), "err", err.Error())
		} else {
			call.ResultKey, call.ResultSize = key, int64(len(whole))
		}
	}
	return call, call.Result
}

// keepPending moves the state of paused reply m to the blob store when
// it is longer than MaxInlinePending (m then holds its key instead). It
// fails when the blob cannot be written; with no blob store the state
// stays in the item.
func (s *Service) keepPending(ctx context.Context, m *Message) error {
	const op = "chat.keepPending"
	if m.Pending == nil || s.blobs == nil {
		return nil
	}
	b, err := json.Marshal(m.Pending)
	if err != nil {
		return errs.Wrap(op, err)
	}
	if len(b) <= MaxInlinePending {
		return nil
	}
	key := PendingKey(m.ChatID, m.ID)
	if _, err := blob.PutBytes(ctx, s.blobs, key, b, "application/json"); err != nil {
		return errs.Wrap(op, err)
	}
	m.Pending, m.PendingKey = nil, key
	return nil
}

// pendingOf returns the state of paused reply m: its Pending, or the
// state its PendingKey names, read back whole. Nil when m holds none. It
// fails with the blob store's errors (Internal when the state is
// missing or damaged).
func (s *Service) pendingOf(ctx context.Context, m Message) (*Pending, error) {
	const op = "chat.pendingOf"
	if m.Pending != nil || m.PendingKey == "" {
		return m.Pending, nil
	}
	if s.blobs == nil {
		return nil, errs.E(op, errs.Internal, "", "the paused reply's state is in the blob store, which is not configured")
	}
	b, _, err := blob.ReadAll(ctx, s.blobs, m.PendingKey, maxPendingBlob)
	if errs.Is(err, errs.NotFound) {
		// The item names a state that is not there: not the client's
		// doing (a 404 would say the call or chat is unknown).
		return nil, errs.E(op, errs.Internal, "", "the paused reply's state is missing").WithCause(err)
	}
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	var p Pending
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, errs.E(op, errs.Internal, "", "the paused reply's state is damaged").WithCause(err)
	}
	return &p, nil
}

// withURLs signs, for every tool call of msgs whose whole result is in the
// blob store, a URL that serves it (ResultURL, valid ResultURLTTL). It
// fails when a URL cannot be signed.
func (s *Service) withURLs(ctx context.Context, msgs ...*Message) error {
	if s.blobs == nil {
		return nil
	}
	for _, m := range msgs {
		for i := range m.ToolCalls {
			c := &m.ToolCalls[i]
			if c.ResultKey == "" {
				continue
			}
			p, err := s.blobs.PresignGet(ctx, c.ResultKey, ResultURLTTL)
			if err != nil {
				return errs.Wrap("chat.withURLs", err)
			}
			c.ResultURL = p.URL
		}
	}
	return nil
}

// deleteValues deletes every blob of chat chatID (its replies' tool
// results and paused states): part of the chat's delete (Delete), run
// once the chat is marked deleted. It is idempotent; with no blob store
// it does nothing.
func (s *Service) deleteValues(ctx context.Context, chatID string) error {
	if s.blobs == nil {
		return nil
	}
	_, err := s.blobs.DeletePrefix(ctx, valuesPrefix(chatID))
	return errs.Wrap("chat.DeleteValues", err)
}

// dropLeftovers deletes what reply m of chat chatID, deleted while m
// streamed, left behind: its values in the blob store and the items
// under the chat's key (its log's events written after the delete listed
// them), once the chat is gone (while a delete is still under way, what
// it listed before this reply's last events stays for the log's TTL). A
// failure is logged: the log's items expire with their TTL.
func (s *Service) dropLeftovers(ctx context.Context, chatID string, m Message) {
	s.dropValues(ctx, m)
	ctx = context.WithoutCancel(ctx)
	if _, err := s.store.Chat(ctx, chatID); !errs.Is(err, errs.NotFound) {
		return
	}
	if err := s.store.DeleteChatLeftovers(ctx, chatID); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "could not delete the log of a reply to a deleted chat", "chatId", chatID, "err", err.Error())
	}
}

// dropValues deletes the blobs reply m wrote when its save found the chat
// deleted meanwhile (its delete may have run before they were written).
// A failure is logged.
func (s *Service) dropValues(ctx context.Context, m Message) {
	if s.blobs == nil {
		return
	}
	var keys []string
	for _, c := range m.ToolCalls {
		if c.ResultKey != "" {
			keys = append(keys, c.ResultKey)
		}
	}
	if m.PendingKey != "" {
		keys = append(keys, m.PendingKey)
	}
	if len(keys) == 0 {
		return
	}
	if err := s.blobs.Delete(context.WithoutCancel(ctx), keys...); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "could not delete the values of a reply to a deleted chat", "keys", keys, "err", err.Error())
	}
}

// boundEvents returns emit with every event kept within MaxEventBytes:
// tool arguments and results longer than ValueBound cut (truncate.Cut,
// and Truncated set), a delta longer than maxDeltaBytes sent as several
// content events (their deltas still concatenate to it).
func boundEvents(emit func(Event) error) func(Event) error {
	return func(e Event) error {
		if e.Type == EventContent && len(e.Delta) > maxDeltaBytes {
			for d := e.Delta; d != ""; {
				piece, _ := truncate.String(d, maxDeltaBytes)
				if err := emit(Event{Type: EventContent, Delta: piece}); err != nil {
					return err
				}
				d = d[len(piece):]
			}
			return nil
		}
		if len(e.ToolArgs) > ValueBound {
			e.ToolArgs, e.Truncated = truncate.Cut(e.ToolArgs, ValueBound), true
		}
		if len(e.Result) > ValueBound { // a workflow step's output: the run keeps it whole
			e.Result, e.Truncated = truncate.Cut(e.Result, ValueBound), true
		}
		return emit(e)
	}
}

// interruptedEvent is the error INTERRUPTED carrying the reply as saved,
// cut as much as its JSON needs to stay within MaxEventBytes.
func interruptedEvent(saved string) Event {
	e := Event{Type: EventError, Error: CodeInterrupted, Message: "the reply was interrupted: the process generating it stopped", Content: &saved}
	for limit := len(saved); ; {
		b, err := json.Marshal(e)
		if err != nil || len(b) <= MaxEventBytes || limit == 0 {
			return e
		}
		limit = max(0, limit-(len(b)-MaxEventBytes)-1)
		cut, _ := truncate.String(saved, limit)
		e.Content = &cut
	}
}
