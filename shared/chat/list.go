package chat

import (
	"context"
	"encoding/json"

	"github.com/workflowchat/service/shared/errs"
)

// MaxListBytes bounds the JSON of the messages GET .../messages answers:
// under the 6 MB a Lambda behind the HTTP API may answer (the rest of the
// answer is a few bytes), as MaxExportBytes bounds an export. A path
// longer than that is answered from its leaf back, as many messages as
// fit (at least the leaf), with the number of older ones left out
// (MessageList.Omitted).
const MaxListBytes = 5 << 20

// MessageList is what GET .../messages answers.
type MessageList struct {
	// Messages are the path's messages in conversation order: all of
	// them, or its newest ones within MaxListBytes.
	Messages []Message `json:"messages"`
	// Omitted counts the older messages of the path left out (absent when
	// none). The first message's parentId is the newest of them: ?leaf=
	// of it answers the path up to it (and makes it the current leaf).
	Omitted int `json:"omitted,omitempty"`
}

// ListMessages returns the current path of chat id as Messages does (with leaf
// set, the path to it, made current), bounded to MaxListBytes of JSON:
// the newest messages that fit, and how many older ones were left out.
// Errors: Messages'.
func (s *Service) ListMessages(ctx context.Context, id, leaf string) (MessageList, error) {
	const op = "chat.ListMessages"
	path, err := s.Messages(ctx, id, leaf)
	if err != nil {
		return MessageList{}, err
	}
	keep, err := newestWithin(path, MaxListBytes)
	if err != nil {
		return MessageList{}, errs.Wrap(op, err)
	}
	return MessageList{Messages: path[len(path)-keep:], Omitted: len(path) - keep}, nil
}

// newestWithin returns how many of the last messages of path fit in
// budget bytes of JSON (each as json.Marshal writes it, with its comma),
// at least one of a path that has any.
func newestWithin(path []Message, budget int) (int, error) {
	used := 0
	for i := len(path) - 1; i >= 0; i-- {
		b, err := json.Marshal(path[i])
		if err != nil {
			return 0, err
		}
		used += len(b) + 1
		if used > budget && i < len(path)-1 {
			return len(path) - 1 - i, nil
		}
	}
	return len(path), nil
}
