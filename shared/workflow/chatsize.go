package workflow

import "encoding/json"

// MaxChatBytes bounds what a workflow's chat holds, as ChatBytes weighs
// it: 8 MiB of messages and proposals. Each message sent reads the whole
// chat (the model's history, the step ids of pending proposals) and each
// list answers from it, in a function of 128 MB: read whole, a chat of
// 40 MB took 114 MiB of heap. A message to a chat that has no room left
// for it is refused (Conflict CHAT_FULL) before the model is called; the
// reply to an accepted one is stored whatever its weight, so a chat
// holds at most MaxChatBytes plus one reply and its proposal.
const MaxChatBytes = 8 << 20

// CodeChatFull: the workflow's chat holds MaxChatBytes; it takes no more
// messages.
const CodeChatFull = "CHAT_FULL"

// itemOverhead is what ChatBytes counts for a stored message or proposal
// beyond its content: its keys, ids, role, status and times.
const itemOverhead = 256

// MessageWeight is what a message counts against MaxChatBytes without
// its proposal: its content's bytes and a fixed overhead.
func MessageWeight(m Message) int { return len(m.Content) + itemOverhead }

// ProposalWeight is what a proposal counts against MaxChatBytes: its
// changes as JSON (as stored) and a fixed overhead; changesJSON is that
// JSON's length.
func ProposalWeight(changesJSON int) int { return changesJSON + itemOverhead }

// ChatBytes weighs msgs as MaxChatBytes counts them: each message and the
// proposal it carries.
func ChatBytes(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += MessageWeight(m)
		if m.Proposal != nil {
			b, err := json.Marshal(m.Proposal.Changes)
			if err != nil {
				// Changes decoded from the store encode again; count
				// what cannot as the most a proposal holds.
				b = make([]byte, MaxDefinitionBytes)
			}
			n += ProposalWeight(len(b))
		}
	}
	return n
}

// RoomAsked is what msgs need of a chat's room before they are stored:
// the weight of its user messages (a reply is stored whatever its
// weight, once its question was accepted).
func RoomAsked(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == roleUser {
			n += MessageWeight(m)
		}
	}
	return n
}

// roleUser is the role of a user's message (model.RoleUser).
const roleUser = "user"

// HasRoomFor reports whether a chat weighing held bytes has room for m.
func HasRoomFor(held int, m Message) bool { return held+MessageWeight(m) <= MaxChatBytes }
