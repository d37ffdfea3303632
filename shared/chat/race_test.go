package chat_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// heldKey marks the context of a request whose first read of its chat is
// held (heldReads) until the test lets it go on.
type heldKey struct{}

// heldReads is the real chats store, but that the first Conversation of a
// request whose context carries a *hold signals read, once it has read,
// and waits for release: the test chooses what happens between a
// request's read of its chat and its start.
type heldReads struct {
	chat.Store
}

type hold struct {
	once          sync.Once
	read, release chan struct{}
}

func newHold() *hold { return &hold{read: make(chan struct{}), release: make(chan struct{})} }

func (h heldReads) Conversation(ctx context.Context, id string) (chat.Chat, []chat.Message, error) {
	c, msgs, err := h.Store.Conversation(ctx, id)
	if hd, ok := ctx.Value(heldKey{}).(*hold); ok {
		hd.once.Do(func() {
			close(hd.read)
			<-hd.release
		})
	}
	return c, msgs, err
}

type raceFixture struct {
	raw *store.Chats
	svc *chat.Service
	ctx context.Context
	c   chat.Chat
}

func newRaceFixture(t *testing.T) *raceFixture {
	t.Helper()
	db := storetest.New(t)
	raw := store.NewChats(db.DB, db.Data())
	models, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		t.Fatal(err)
	}
	svc := chat.NewService(chat.Options{Store: heldReads{raw}, Jobs: store.NewJobs(db.DB, db.Data()), Models: models, DefaultModelID: model.BuiltinID})
	ctx := auth.ActingFor(context.Background(), uuid.NewString())
	title := "race"
	c, err := svc.Create(ctx, chat.CreateRequest{Title: &title})
	if err != nil {
		t.Fatal(err)
	}
	return &raceFixture{raw: raw, svc: svc, ctx: ctx, c: c}
}

// held runs do in a goroutine with its first read of the chat held; it
// returns once that read is done, with a function that lets do go on and
// waits for its error.
func (f *raceFixture) held(do func(ctx context.Context) error) func() error {
	h := newHold()
	done := make(chan error, 1)
	go func() { done <- do(context.WithValue(f.ctx, heldKey{}, h)) }()
	<-h.read
	return func() error {
		close(h.release)
		return <-done
	}
}

func (f *raceFixture) send(t *testing.T, ctx context.Context, content string, parent *string, set bool) (chat.Exchange, error) {
	t.Helper()
	return f.svc.Send(ctx, f.c.ID, chat.MessageRequest{Content: content, ParentID: chat.ParentRef{Set: set, ID: parent}})
}

// children stores n user messages under parent, each with a reply (so
// that the chat's leaf stays an assistant message).
func (f *raceFixture) children(t *testing.T, parent *string, n int) {
	t.Helper()
	at := time.Now().Add(-time.Hour)
	for i := range n {
		at = at.Add(time.Millisecond)
		u := chat.Message{ID: uuid.NewString(), ChatID: f.c.ID, Role: model.RoleUser, Content: "edit", Status: chat.StatusCompleted, CreatedAt: at, ParentID: parent}
		uid := u.ID
		r := chat.Message{ID: uuid.NewString(), ChatID: f.c.ID, Role: model.RoleAssistant, Content: "ok", Status: chat.StatusCompleted, CreatedAt: at.Add(time.Microsecond), ParentID: &uid}
		if err := f.raw.AddMessages(context.Background(), f.c, u, r); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
}

// TestSendAfterAnotherReplyFollowsIt: a message sent without parentId
// whose read of the chat was made before another message's reply was
// stored follows that reply (the chat's leaf when it starts), not the
// leaf it read: two messages never answer the same stale leaf.
func TestSendAfterAnotherReplyFollowsIt(t *testing.T) {
	t.Parallel()
	f := newRaceFixture(t)
	first, err := f.send(t, f.ctx, "first", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var late chat.Exchange
	finish := f.held(func(ctx context.Context) (err error) {
		late, err = f.send(t, ctx, "late", nil, false)
		return err
	})
	early, err := f.send(t, f.ctx, "early", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := finish(); err != nil {
		t.Fatalf("the held send: %v", err)
	}
	if early.ParentID == nil || *early.ParentID != first.Response.ID {
		t.Errorf("early's parent %s, want the first reply %s", deref(early.ParentID), first.Response.ID)
	}
	if late.ParentID == nil || *late.ParentID != early.Response.ID {
		t.Errorf("late's parent %s, want early's reply %s (the leaf when it started), not the stale leaf %s", deref(late.ParentID), early.Response.ID, first.Response.ID)
	}
	msgs, err := f.svc.Messages(f.ctx, f.c.ID, "")
	if err != nil || len(msgs) != 6 || msgs[5].ID != late.Response.ID {
		t.Errorf("path of %d messages (%v), want 6 ending at late's reply", len(msgs), err)
	}
}

// TestStreamAfterAnotherReplyFollowsIt: the same for a streamed message.
func TestStreamAfterAnotherReplyFollowsIt(t *testing.T) {
	t.Parallel()
	f := newRaceFixture(t)
	first, err := f.send(t, f.ctx, "first", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var turn *chat.Turn
	finish := f.held(func(ctx context.Context) (err error) {
		turn, err = f.svc.StartStream(ctx, f.c.ID, chat.StreamRequest{MessageRequest: chat.MessageRequest{Content: "late", ModelID: model.BuiltinID}})
		return err
	})
	early, err := f.send(t, f.ctx, "early", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := finish(); err != nil {
		t.Fatalf("the held stream: %v", err)
	}
	if _, err := f.svc.RunStream(f.ctx, turn, func(chat.Event) {}); err != nil {
		t.Fatal(err)
	}
	if p := turn.User.ParentID; p == nil || *p != early.Response.ID {
		t.Errorf("the stream's message follows %s, want early's reply %s, not the stale leaf %s", deref(p), early.Response.ID, first.Response.ID)
	}
}

// TestBranchLimitHoldsUnderRaces: a parent with one child short of
// MaxSiblings takes one more whatever races: a message (or a regenerate)
// that read the parent with room, but starts after another one took it,
// is 409 TOO_MANY_BRANCHES with nothing stored.
func TestBranchLimitHoldsUnderRaces(t *testing.T) {
	t.Parallel()
	f := newRaceFixture(t)
	first, err := f.send(t, f.ctx, "first", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	parent := first.Response.ID
	f.children(t, &parent, chat.MaxSiblings-2)
	count := func() int {
		_, msgs, err := f.raw.Conversation(context.Background(), f.c.ID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range msgs {
			if m.ParentID != nil && *m.ParentID == parent {
				n++
			}
		}
		return n
	}
	if got := count(); got != chat.MaxSiblings-2 {
		t.Fatalf("%d children, want %d", got, chat.MaxSiblings-2)
	}
	// One more: MaxSiblings-1.
	if _, err := f.send(t, f.ctx, "edit", &parent, true); err != nil {
		t.Fatal(err)
	}
	finish := f.held(func(ctx context.Context) error {
		_, err := f.send(t, ctx, "late edit", &parent, true)
		return err
	})
	if _, err := f.send(t, f.ctx, "last edit", &parent, true); err != nil {
		t.Fatalf("the last room: %v", err)
	}
	if err := finish(); errs.CodeOf(err) != chat.CodeTooManyBranches {
		t.Errorf("the held send: %v, want %s", err, chat.CodeTooManyBranches)
	}
	if got := count(); got != chat.MaxSiblings {
		t.Errorf("%d children, want %d", got, chat.MaxSiblings)
	}

	// A regenerate: a user message with MaxSiblings-1 replies.
	g, err := f.send(t, f.ctx, "again", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for range chat.MaxSiblings - 2 {
		if _, err := f.svc.Regenerate(f.ctx, f.c.ID, g.Response.ID, chat.RegenerateRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	finish = f.held(func(ctx context.Context) error {
		_, err := f.svc.Regenerate(ctx, f.c.ID, g.Response.ID, chat.RegenerateRequest{})
		return err
	})
	if _, err := f.svc.Regenerate(f.ctx, f.c.ID, g.Response.ID, chat.RegenerateRequest{}); err != nil {
		t.Fatalf("the last regenerate: %v", err)
	}
	if err := finish(); errs.CodeOf(err) != chat.CodeTooManyBranches {
		t.Errorf("the held regenerate: %v, want %s", err, chat.CodeTooManyBranches)
	}
	msgs, err := f.svc.Messages(f.ctx, f.c.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if last := msgs[len(msgs)-1]; len(last.SiblingIDs) != chat.MaxSiblings {
		t.Errorf("the reply has %d siblings, want %d", len(last.SiblingIDs), chat.MaxSiblings)
	}
}

// TestConcurrentSendsNeverShareAParent: messages sent at once without
// parentId each succeed (one after the other) or are 409
// GENERATION_ACTIVE; no two follow the same message.
func TestConcurrentSendsNeverShareAParent(t *testing.T) {
	t.Parallel()
	f := newRaceFixture(t)
	if _, err := f.send(t, f.ctx, "first", nil, false); err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		const n = 4
		var wg sync.WaitGroup
		start := make(chan struct{})
		results := make([]chat.Exchange, n)
		errors := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errors[i] = f.send(t, f.ctx, "at once", nil, false)
			}()
		}
		close(start)
		wg.Wait()
		parents := map[string]bool{}
		for i := range n {
			switch {
			case errors[i] == nil:
				p := *results[i].ParentID
				if parents[p] {
					t.Errorf("round %d: two messages follow %s", round, p)
				}
				parents[p] = true
			case errs.CodeOf(errors[i]) != chat.CodeGenerationActive:
				t.Errorf("round %d: %v", round, errors[i])
			}
		}
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
