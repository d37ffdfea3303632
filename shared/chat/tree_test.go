package chat_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/model"
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
