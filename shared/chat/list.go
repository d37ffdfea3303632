package chat

import (
	"context"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

// MaxListBytes bounds the messages GET .../messages answers, counted as
// they travel in a buffered Lambda's answer (httpapi.WireSize): under the 6 MB a
// Lambda behind the HTTP API may answer (the rest of the answer is a few
// bytes), as MaxExportBytes bounds an export. A path
// longer than that is answered from its leaf back, as many messages as
// fit (at least the leaf), with the number of older ones left out
// (MessageList.Omitted).
const MaxListBytes = httpapi.MaxListBytes

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
	keep, err := httpapi.NewestWithin(path, MaxListBytes)
	if err != nil {
		return MessageList{}, errs.Wrap(op, err)
	}
	return MessageList{Messages: path[len(path)-keep:], Omitted: len(path) - keep}, nil
}
