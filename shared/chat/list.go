package chat

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/workflowchat/service/shared/errs"
)

// MaxListBytes bounds the messages GET .../messages answers, counted as
// they travel in a buffered Lambda's answer (wireSize): under the 6 MB a
// Lambda behind the HTTP API may answer (the rest of the answer is a few
// bytes), as MaxExportBytes bounds an export. A path
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
// budget bytes (each as wireSize counts its JSON, with its comma), at
// least one of a path that has any.
func newestWithin(path []Message, budget int) (int, error) {
	used := 0
	for i := len(path) - 1; i >= 0; i-- {
		b, err := json.Marshal(path[i])
		if err != nil {
			return 0, err
		}
		used += wireSize(b) + 1
		if used > budget && i < len(path)-1 {
			return len(path) - 1 - i, nil
		}
	}
	return len(path), nil
}

// wireSize is the bytes message JSON b takes in the answer of a buffered
// Lambda function (lambdahttp): its body travels as a JSON string of the
// response event, in which each quote and backslash of b is escaped
// again. Nothing else grows: json.Marshal has escaped the control
// characters, <, >, & and U+2028/2029 already, and the rest is kept as
// it is.
func wireSize(b []byte) int {
	return len(b) + bytes.Count(b, []byte{'"'}) + bytes.Count(b, []byte{'\\'})
}
