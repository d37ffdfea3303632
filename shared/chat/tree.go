package chat

import (
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
)

// MaxSiblings bounds the messages under one parent (the first messages of
// a chat count as siblings too): each edit or regenerate adds one, and a
// parent that has MaxSiblings children takes no more (409
// TOO_MANY_BRANCHES).
const MaxSiblings = 100

// Codes of the message tree's errors.
const (
	// CodeMessageNotFound: no message with this id in this chat.
	CodeMessageNotFound = "MESSAGE_NOT_FOUND"
	// CodeInvalidParent: a parentId that names no message of the chat,
	// or names a user message.
	CodeInvalidParent = "INVALID_PARENT"
	// CodeNotAssistantMessage: a regenerate of a message that is not the
	// assistant's.
	CodeNotAssistantMessage = "NOT_AN_ASSISTANT_MESSAGE"
	// CodeTooManyBranches: a parent with MaxSiblings children.
	CodeTooManyBranches = "TOO_MANY_BRANCHES"
)

// tree is a chat's messages as a tree: every message's parent is its
// ParentID, or for a Legacy message the message stored before it (the
// chain a chat written before messages had parents reads as).
type tree struct {
	msgs     []Message // creation order
	index    map[string]int
	parent   []int         // -1: a root
	children map[int][]int // by parent index, -1 for the roots; creation order
}

// newTree builds the tree of msgs, given in creation order. A parent that
// is not among msgs makes its child a root.
func newTree(msgs []Message) *tree {
	t := &tree{msgs: msgs, index: make(map[string]int, len(msgs)), parent: make([]int, len(msgs)), children: map[int][]int{}}
	for i, m := range msgs {
		t.index[m.ID] = i
	}
	for i, m := range msgs {
		p := -1
		switch {
		case m.ParentID != nil:
			if j, ok := t.index[*m.ParentID]; ok && j != i {
				p = j
			}
		case m.Legacy && i > 0:
			p = i - 1
		}
		t.parent[i] = p
		t.children[p] = append(t.children[p], i)
	}
	return t
}

// find returns the index of message id; NotFound MESSAGE_NOT_FOUND.
func (t *tree) find(op, id string) (int, error) {
	i, ok := t.index[id]
	if !ok {
		return 0, errs.NotFoundf(op, CodeMessageNotFound, "no message %s in this chat", id)
	}
	return i, nil
}

// leaf returns the index of chat c's current leaf: c.Leaf, else (a chat
// written before leaves were kept, or a leaf since gone) the last message;
// -1 for a chat without messages.
func (t *tree) leaf(c Chat) int {
	if i, ok := t.index[c.Leaf]; ok && c.Leaf != "" {
		return i
	}
	return len(t.msgs) - 1
}

// path returns the messages from the root to message i (none for -1),
// each with its parent and siblings set.
func (t *tree) path(i int) []Message {
	var rev []int
	for j := i; j >= 0 && len(rev) <= len(t.msgs); j = t.parent[j] {
		rev = append(rev, j)
	}
	out := make([]Message, len(rev))
	for k, j := range rev {
		m := t.msgs[j]
		if p := t.parent[j]; p >= 0 {
			id := t.msgs[p].ID
			m.ParentID = &id
		} else {
			m.ParentID = nil
		}
		sibs := t.children[t.parent[j]]
		m.SiblingIDs = make([]string, len(sibs))
		for n, s := range sibs {
			m.SiblingIDs[n] = t.msgs[s].ID
			if s == j {
				idx := n
				m.SiblingIndex = &idx
			}
		}
		out[len(rev)-1-k] = m
	}
	return out
}

// roomUnder fails with Conflict TOO_MANY_BRANCHES when the message at
// index p (-1: the roots) already has MaxSiblings children.
func (t *tree) roomUnder(op string, p int) error {
	if len(t.children[p]) >= MaxSiblings {
		return errs.E(op, errs.Conflict, CodeTooManyBranches,
			"this message already has the most branches a message may have; continue in one of them")
	}
	return nil
}

// parentOf resolves the parent of a new user message: ref when set (nil:
// a new first message), else chat c's current leaf. It returns the
// parent's index (-1 for none). Invalid INVALID_PARENT for an id that is
// not a message of the chat or is a user message, and without ref for a
// current leaf that is a user message (a path read with ?leaf= ending at
// one: a user message follows a reply, so the message needs its
// parentId); Conflict TOO_MANY_BRANCHES.
func (t *tree) parentOf(op string, c Chat, ref ParentRef) (int, error) {
	p := t.leaf(c)
	if _, chosen := t.index[c.Leaf]; !ref.Set && chosen && c.Leaf != "" && t.msgs[p].Role == model.RoleUser {
		return 0, errs.E(op, errs.Invalid, CodeInvalidParent,
			"the chat's current leaf is a user message (the path last read ends at one); give parentId: an assistant message, or null for a new first message")
	}
	if ref.Set {
		p = -1
		if ref.ID != nil {
			i, ok := t.index[*ref.ID]
			switch {
			case !ok:
				return 0, errs.E(op, errs.Invalid, CodeInvalidParent, "parentId is not a message of this chat")
			case t.msgs[i].Role == model.RoleUser:
				return 0, errs.E(op, errs.Invalid, CodeInvalidParent, "parentId must be an assistant message: a user message follows a reply")
			}
			p = i
		}
	}
	return p, t.roomUnder(op, p)
}

// idOf returns the id of the message at index i, nil for -1.
func (t *tree) idOf(i int) *string {
	if i < 0 {
		return nil
	}
	id := t.msgs[i].ID
	return &id
}
