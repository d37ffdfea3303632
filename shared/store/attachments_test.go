package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

func newAttachment(c chat.Chat, size int64) attachment.Attachment {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	return attachment.Attachment{ID: uuid.NewString(), ChatID: c.ID, UserID: c.UserID, Name: "f.txt", ContentType: "text/plain",
		Size: size, Status: attachment.StatusPending, CreatedAt: now, UploadExpires: now.Add(15 * time.Minute), Charged: size}
}

// wantCode fails unless err has kind and code.
func wantCode(t *testing.T, what string, err error, kind errs.Kind, code string) {
	t.Helper()
	if errs.KindOf(err) != kind || errs.CodeOf(err) != code {
		t.Fatalf("%s: %v, want %s %s", what, err, kind, code)
	}
}

func used(t *testing.T, s *store.Attachments, user string) int64 {
	t.Helper()
	n, err := s.StorageUsed(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAttachmentsQuotaIsCountedAtomically(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	chats, s := store.NewChats(db.DB, db.Data()), store.NewAttachments(db.DB, db.Data())
	ctx := context.Background()
	c := newChat("u1", time.Now())
	if err := chats.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	const quota = 1000
	// Just under, then exactly at the quota.
	if err := s.CreateAttachment(ctx, newAttachment(c, 600), quota); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAttachment(ctx, newAttachment(c, 399), quota); err != nil {
		t.Fatalf("just under the quota: %v", err)
	}
	if got := used(t, s, "u1"); got != 999 {
		t.Fatalf("used %d, want 999", got)
	}
	if err := s.CreateAttachment(ctx, newAttachment(c, 1), quota); err != nil {
		t.Fatalf("exactly at the quota: %v", err)
	}
	// One byte over: refused, nothing written.
	over := newAttachment(c, 1)
	err := s.CreateAttachment(ctx, over, quota)
	wantCode(t, "one byte over", err, errs.TooLarge, attachment.CodeQuotaExceeded)
	if _, err := s.Attachment(ctx, "u1", c.ID, over.ID); errs.CodeOf(err) != attachment.CodeNotFound {
		t.Fatalf("the refused attachment was stored: %v", err)
	}
	if got := used(t, s, "u1"); got != 1000 {
		t.Fatalf("used %d after a refused create, want 1000", got)
	}
	// Another user's quota is their own.
	c2 := newChat("u2", time.Now())
	if err := chats.CreateChat(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAttachment(ctx, newAttachment(c2, 1000), quota); err != nil {
		t.Fatalf("another user: %v", err)
	}

	// Concurrent creates never pass the quota together.
	c3 := newChat("u3", time.Now())
	if err := chats.CreateChat(ctx, c3); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 10)
	for range 10 {
		go func() { errc <- s.CreateAttachment(ctx, newAttachment(c3, 300), quota) }()
	}
	ok := 0
	for range 10 {
		if err := <-errc; err == nil {
			ok++
		} else if errs.CodeOf(err) != attachment.CodeQuotaExceeded && !errs.Is(err, errs.Unavailable) {
			t.Fatalf("concurrent create: %v", err)
		}
	}
	if ok > 3 || used(t, s, "u3") != int64(ok)*300 {
		t.Fatalf("%d concurrent creates of 300 bytes succeeded under a quota of 1000, %d bytes counted", ok, used(t, s, "u3"))
	}
}

func TestAttachmentsOwnership(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	chats, s := store.NewChats(db.DB, db.Data()), store.NewAttachments(db.DB, db.Data())
	ctx := context.Background()
	c := newChat("u1", time.Now())
	if err := chats.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	// Into another user's chat, or a chat that does not exist.
	theirs := newAttachment(c, 10)
	theirs.UserID = "u2"
	wantCode(t, "create in another user's chat", s.CreateAttachment(ctx, theirs, 1000), errs.Forbidden, "FORBIDDEN")
	missing := newAttachment(chat.Chat{ID: uuid.NewString(), UserID: "u1"}, 10)
	wantCode(t, "create in a missing chat", s.CreateAttachment(ctx, missing, 1000), errs.NotFound, "CHAT_NOT_FOUND")
	if got := used(t, s, "u1") + used(t, s, "u2"); got != 0 {
		t.Fatalf("refused creates counted %d bytes", got)
	}

	a := newAttachment(c, 10)
	if err := s.CreateAttachment(ctx, a, 1000); err != nil {
		t.Fatal(err)
	}
	db.Counter.Reset()
	got, err := s.Attachment(ctx, "u1", c.ID, a.ID)
	if err != nil || got.ID != a.ID || got.Status != attachment.StatusPending || got.Charged != 10 || !got.UploadExpires.Equal(a.UploadExpires) {
		t.Fatalf("attachment = %+v, %v", got, err)
	}
	if n := db.Counter.Count(); n != 1 {
		t.Fatalf("reading an attachment cost %d calls, want 1", n)
	}
	_, err = s.Attachment(ctx, "u2", c.ID, a.ID)
	wantCode(t, "another user's", err, errs.Forbidden, "FORBIDDEN")
	_, err = s.Attachment(ctx, "u1", c.ID, uuid.NewString())
	wantCode(t, "unknown attachment", err, errs.NotFound, attachment.CodeNotFound)
	_, err = s.Attachment(ctx, "u1", uuid.NewString(), a.ID)
	wantCode(t, "unknown chat", err, errs.NotFound, "CHAT_NOT_FOUND")
	// Its id finds its chat.
	if chatID, err := s.AttachmentChat(ctx, a.ID); err != nil || chatID != c.ID {
		t.Fatalf("AttachmentChat = %q, %v", chatID, err)
	}
	_, err = s.AttachmentChat(ctx, uuid.NewString())
	wantCode(t, "chat of an unknown attachment", err, errs.NotFound, attachment.CodeNotFound)
	// The conversation does not see attachments.
	if _, msgs, err := chats.Conversation(ctx, c.ID); err != nil || len(msgs) != 0 {
		t.Fatalf("conversation: %d messages, %v", len(msgs), err)
	}
}

func TestAttachmentsSettleOnce(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	chats, s := store.NewChats(db.DB, db.Data()), store.NewAttachments(db.DB, db.Data())
	ctx := context.Background()
	now := time.Now()
	c := newChat("u1", now)
	if err := chats.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	ready, failed := newAttachment(c, 100), newAttachment(c, 200)
	for _, a := range []attachment.Attachment{ready, failed} {
		if err := s.CreateAttachment(ctx, a, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MarkReady(ctx, ready, `"etag"`, now); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "ready twice", s.MarkReady(ctx, ready, `"etag"`, now), errs.Conflict, attachment.CodeChanged)
	wantCode(t, "failing a ready one", s.MarkFailed(ctx, ready, "no", now), errs.Conflict, attachment.CodeChanged)
	if err := s.MarkFailed(ctx, failed, "not a PNG", now); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "failed twice", s.MarkFailed(ctx, failed, "again", now), errs.Conflict, attachment.CodeChanged)
	if got := used(t, s, "u1"); got != 100 {
		t.Fatalf("used %d, want 100: a failed attachment gives its bytes back once", got)
	}
	r, _ := s.Attachment(ctx, "u1", c.ID, ready.ID)
	f, _ := s.Attachment(ctx, "u1", c.ID, failed.ID)
	if r.Status != attachment.StatusReady || r.ETag != `"etag"` || f.Status != attachment.StatusFailed || f.Reason != "not a PNG" || f.Charged != 0 {
		t.Fatalf("ready %+v, failed %+v", r, f)
	}

	// A delete begun first wins over a check.
	late := newAttachment(c, 50)
	if err := s.CreateAttachment(ctx, late, 1000); err != nil {
		t.Fatal(err)
	}
	marked, err := s.BeginDelete(ctx, late)
	if err != nil || !marked.Deleting {
		t.Fatalf("begin delete: %+v %v", marked, err)
	}
	wantCode(t, "ready after a delete began", s.MarkReady(ctx, late, `"e"`, now), errs.Conflict, attachment.CodeChanged)
	_, err = s.Attachment(ctx, "u1", c.ID, late.ID)
	wantCode(t, "read after a delete began", err, errs.NotFound, attachment.CodeNotFound)
	if err := s.DeleteAttachments(ctx, []attachment.Attachment{marked}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "deleting again", s.DeleteAttachments(ctx, []attachment.Attachment{marked}), errs.Conflict, attachment.CodeChanged)
	if got := used(t, s, "u1"); got != 100 {
		t.Fatalf("used %d after deleting a pending attachment, want 100", got)
	}
	// A delete with a stale charge is refused (it would release twice).
	stale := r
	stale.Charged = 999
	wantCode(t, "stale delete", s.DeleteAttachments(ctx, []attachment.Attachment{stale}), errs.Conflict, attachment.CodeChanged)
}

func TestChatDeleteRunsItsCleanupFirst(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewAttachments(db.DB, db.Data())
	ctx := context.Background()
	var seen []attachment.Attachment
	fail := true
	chats := store.NewChats(db.DB, db.Data())
	c := newChat("u1", time.Now())
	chatID, userID := c.ID, c.UserID
	cleanup := func(ctx context.Context) error {
		atts, err := s.ChatAttachments(ctx, chatID)
		if err != nil {
			return err
		}
		seen = atts
		// No attachment can be added once the delete began.
		if err := s.CreateAttachment(ctx, newAttachment(chat.Chat{ID: chatID, UserID: userID}, 1), 1<<20); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
			t.Errorf("create during the delete: %v", err)
		}
		if fail {
			fail = false
			return errs.E("test", errs.Unavailable, "", "blob store down")
		}
		return s.DeleteAttachments(ctx, atts)
	}
	if err := chats.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 120 { // more than one transaction's worth
		a := newAttachment(c, 10)
		if err := s.CreateAttachment(ctx, a, 1<<20); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	// The first try fails in the cleanup: the chat stays, and so do its
	// attachments and their charge.
	if err := chats.DeleteChat(ctx, c.ID, "u1", cleanup); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("delete with a failing cleanup: %v", err)
	}
	if len(seen) != 120 || used(t, s, "u1") != 1200 {
		t.Fatalf("cleanup saw %d attachments, used %d", len(seen), used(t, s, "u1"))
	}
	// The retry finishes.
	if err := chats.DeleteChat(ctx, c.ID, "u1", cleanup); err != nil {
		t.Fatal(err)
	}
	if got := used(t, s, "u1"); got != 0 {
		t.Fatalf("used %d after the chat's delete, want 0", got)
	}
	if _, err := chats.Chat(ctx, c.ID); !errs.Is(err, errs.NotFound) {
		t.Fatalf("chat after delete: %v", err)
	}
	if atts, err := s.ChatAttachments(ctx, c.ID); err != nil || len(atts) != 0 {
		t.Fatalf("attachments after delete: %d %v", len(atts), err)
	}
	if _, err := s.AttachmentChat(ctx, ids[0]); !errs.Is(err, errs.NotFound) {
		t.Fatalf("the index still finds a deleted attachment: %v", err)
	}
}
