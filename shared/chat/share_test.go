package chat_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/model"
)

// TestShareLeavesOutUnfinishedReplies: a share is a snapshot kept as it
// was made, so a reply still being written (streaming) or paused for a
// tool approval, whose content is not its answer yet, is left out of it:
// it would stay in the public page forever as an empty or half reply. A
// reply that ended, however it ended, is shared as it is.
func TestShareLeavesOutUnfinishedReplies(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, 0, 0, func(o *chat.Options) { o.Shares = o.Store.(chat.ShareStore) })
	tests := []struct {
		status string
		shared bool
	}{
		{chat.StatusStreaming, false},
		{chat.StatusAwaitingApproval, false},
		{chat.StatusCompleted, true},
		{chat.StatusFailed, true},
		{chat.StatusStopped, true},
	}
	for _, tt := range tests {
		t.Run(tt.status, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			id := f.newChat(t)
			user := f.chain(t, id, "first", "first answer", "second question")[2]
			c, err := f.raw.Chat(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			parent := user.ID
			reply := chat.Message{ID: uuid.NewString(), ChatID: id, Role: model.RoleAssistant, Content: "half of an ans", Status: tt.status,
				ReplyTo: user.ID, ParentID: &parent, CreatedAt: user.CreatedAt.Add(time.Millisecond)}
			if err := f.raw.AddMessages(ctx, c, reply); err != nil {
				t.Fatal(err)
			}
			resp := f.do(t, "POST", "/api/chats/"+id+"/shares", "")
			if resp.StatusCode != 201 {
				t.Fatalf("create share: %d", resp.StatusCode)
			}
			var sh struct{ Data chat.Share }
			decode(t, resp, &sh)
			resp = f.do(t, "GET", "/api/shares/"+sh.Data.ID, "")
			if resp.StatusCode != 200 {
				t.Fatalf("read share: %d", resp.StatusCode)
			}
			var got struct{ Data chat.Shared }
			decode(t, resp, &got)
			want := []string{"first", "first answer", "second question"}
			if tt.shared {
				want = append(want, reply.Content)
			}
			var contents []string
			for _, m := range got.Data.Messages {
				contents = append(contents, m.Content)
			}
			if len(contents) != len(want) || contents[len(contents)-1] != want[len(want)-1] {
				t.Errorf("shared %q, want %q", contents, want)
			}
		})
	}
}
