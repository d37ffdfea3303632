package chat_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/paging"
)

// TestLegacyMessagesReadAsAChain writes a chat's messages as they were
// stored before messages had parents (no parentId, no root mark, no leaf
// on the chat) and checks that they read as one path in createdAt order,
// that a new message follows the last of them, and that an edit under one
// of them sends the model only the path to it.
func TestLegacyMessagesReadAsAChain(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t, false)
	id := f.newChat(t)
	t0 := time.Now().UTC().Add(-time.Hour)
	var legacy []string
	for i, role := range []string{model.RoleUser, model.RoleAssistant, model.RoleUser, model.RoleAssistant} {
		mid := uuid.NewString()
		at := t0.Add(time.Duration(i) * time.Second)
		item := map[string]any{
			"PK": "CHAT#" + id, "SK": "MSG#" + at.Format("2006-01-02T15:04:05.000000000Z") + "#" + mid,
			"type": "message", "id": mid, "chatId": id, "role": role, "content": fmt.Sprintf("legacy %d", i), "createdAt": at,
		}
		if err := f.db.DB.Table(f.db.Data()).Put(item).Run(f.ctx); err != nil {
			t.Fatal(err)
		}
		legacy = append(legacy, mid)
	}
	msgs, err := f.svc.Messages(f.ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want the 4 legacy ones", len(msgs))
	}
	for i, m := range msgs {
		switch {
		case m.ID != legacy[i]:
			t.Errorf("message %d is %s, want %s", i, m.ID, legacy[i])
		case i == 0 && m.ParentID != nil, i > 0 && (m.ParentID == nil || *m.ParentID != legacy[i-1]):
			t.Errorf("message %d: parentId %v", i, m.ParentID)
		case len(m.SiblingIDs) != 1 || m.SiblingIndex == nil || *m.SiblingIndex != 0:
			t.Errorf("message %d: siblings %v index %v", i, m.SiblingIDs, m.SiblingIndex)
		}
	}
	// A new message follows the last legacy one; the model reads them all.
	ex, err := f.svc.Send(f.ctx, id, chat.MessageRequest{Content: "new"})
	if err != nil {
		t.Fatal(err)
	}
	if ex.ParentID == nil || *ex.ParentID != legacy[3] || len(f.rec.last().Messages) != 5 {
		t.Errorf("new message's parent %v, the model read %d messages; want %s and 5", ex.ParentID, len(f.rec.last().Messages), legacy[3])
	}
	// An edit under the first legacy reply: the model reads u0, a1 and the edit.
	parent := legacy[1]
	ed, err := f.svc.Send(f.ctx, id, chat.MessageRequest{Content: "edit", ParentID: chat.ParentRef{Set: true, ID: &parent}})
	if err != nil {
		t.Fatal(err)
	}
	if read := f.rec.last().Messages; len(read) != 3 || read[0].Content != "legacy 0" || read[2].Content != "edit" {
		t.Errorf("the edited branch's model read %+v", read)
	}
	msgs, err = f.svc.Messages(f.ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || msgs[2].ID != ed.ID || len(msgs[2].SiblingIDs) != 2 || msgs[2].SiblingIDs[0] != legacy[2] {
		t.Errorf("path after the edit: %d messages, third %s with siblings %v", len(msgs), msgs[2].ID, msgs[2].SiblingIDs)
	}
}

// TestShareSizeBound shares a path just under chat.MaxShareBytes and
// refuses one just over it (409 SHARE_TOO_LARGE, nothing stored), and one
// far over it.
func TestShareSizeBound(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t, false)
	id := f.newChat(t)
	// Each exchange adds a 32,000-character user message and the
	// recorder's "ok"; 9 of them fit, the 10th passes the bound.
	content := strings.Repeat("w", chat.MaxContentLen)
	for i := range 20 {
		if _, err := f.svc.Send(f.ctx, id, chat.MessageRequest{Content: content}); err != nil {
			t.Fatal(err)
		}
		_, err := f.svc.CreateShare(f.ctx, id)
		switch {
		case i < 9 && err != nil:
			t.Fatalf("%d exchanges: %v", i+1, err)
		case i >= 9 && errs.CodeOf(err) != chat.CodeShareTooLarge:
			t.Fatalf("%d exchanges: %v, want %s", i+1, err, chat.CodeShareTooLarge)
		}
	}
	shares, _, err := f.svc.Shares(f.ctx, id, paging.Cursor{Limit: 100})
	if err != nil || len(shares) != 9 {
		t.Errorf("%d shares stored, %v; want the 9 under the bound", len(shares), err)
	}
}
