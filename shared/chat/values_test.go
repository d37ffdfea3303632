package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/toolgate"
	"github.com/workflowchat/service/shared/toolpolicy"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/truncate"
)

// recorder is a model that says what to do in its user's words and
// records every request it gets: "big N" calls big_text for N bytes of
// JSON ("fail after big N" then fails instead of answering its result), "ask" calls ask_tool (policy ask), "shout N" streams a delta of N
// control characters; anything else, or a tool result, is answered "ok".
type recorder struct {
	mu   sync.Mutex
	reqs []model.Request
}

func (r *recorder) Models() []model.Model {
	return []model.Model{{ID: "rec", Name: "recorder", Provider: "test", Input: model.Input{Images: true}}}
}

func (r *recorder) Generate(ctx context.Context, req model.Request, emit func(model.Chunk) error) (model.Result, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	res := model.Result{Usage: model.Usage{InputTokens: 1, OutputTokens: 1}}
	if last.Role == model.RoleTool && strings.HasPrefix(req.Messages[0].Content, "fail after big ") {
		return res, errs.E("recorder", errs.Unavailable, "MODEL_UNAVAILABLE", "the model is down")
	}
	if last.Role == model.RoleUser && len(req.Tools) > 0 {
		f := strings.Fields(strings.TrimPrefix(last.Content, "fail after "))
		switch {
		case len(f) == 2 && f[0] == "big":
			res.ToolCalls = []model.ToolCall{{ID: "c1", Name: "big_text", Args: json.RawMessage(`{"n":` + f[1] + `}`)}}
			return res, nil
		case len(f) == 1 && f[0] == "ask":
			res.ToolCalls = []model.ToolCall{{ID: "c1", Name: "ask_tool", Args: json.RawMessage(`{}`)}}
			return res, nil
		case len(f) == 2 && f[0] == "shout":
			n, _ := strconv.Atoi(f[1])
			return res, emit(model.Chunk{Delta: strings.Repeat("\x01", n)})
		}
	}
	return res, emit(model.Chunk{Delta: "ok"})
}

// last returns the last request the model got.
func (r *recorder) last() model.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

// valuesFixture is a chat service with a blob store, the recorder model
// and two test tools behind the real tool server, client and gate.
type valuesFixture struct {
	svc    *chat.Service
	chats  *store.Chats
	blobs  *blob.Local
	rec    *recorder
	userID string
	ctx    context.Context
	// db is the store's database, for a test that writes items as an
	// older version stored them.
	db *storetest.DB
}

// bigText returns {"text": "xx..."}, n bytes of JSON.
func bigText() *tools.Tool {
	return &tools.Tool{ID: "big_text", Name: "big", Description: "returns n bytes of JSON", Category: tools.CategoryUtil,
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":11}},"required":["n"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		Annotations:  tools.Annotations{ReadOnly: true, Idempotent: true},
		Run: func(_ context.Context, in map[string]any) (map[string]any, error) {
			n := int(in["n"].(float64))
			return map[string]any{"text": strings.Repeat("x", n-len(`{"text":""}`))}, nil
		}}
}

// askTool changes the world, so its default policy is ask.
func askTool() *tools.Tool {
	return &tools.Tool{ID: "ask_tool", Name: "ask", Description: "needs approval", Category: tools.CategoryUtil,
		InputSchema:  json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"done":{"type":"boolean"}}}`),
		Run: func(context.Context, map[string]any) (map[string]any, error) {
			return map[string]any{"done": true}, nil
		}}
}

func newValuesFixture(t *testing.T, withBlobs bool) *valuesFixture {
	t.Helper()
	db := storetest.New(t)
	rec := &recorder{}
	models, err := model.NewRegistry(rec)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(bigText(), askTool())
	if err != nil {
		t.Fatal(err)
	}
	const key = "values-test-key-0123456789"
	ts := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{}))
	t.Cleanup(ts.Close)
	catalog := toolclient.NewCatalog(toolclient.NewClient(ts.URL, key, nil), time.Minute, nil)
	policies := toolpolicy.NewService(store.NewToolPolicies(db.DB, db.Users()), catalog)
	f := &valuesFixture{chats: store.NewChats(db.DB, db.Data()), rec: rec, userID: uuid.NewString(), db: db}
	o := chat.Options{Store: f.chats, Jobs: store.NewJobs(db.DB, db.Data()), Models: models, DefaultModelID: "rec", Shares: f.chats,
		Tools: catalog, Gate: toolgate.New(toolgate.Options{Tools: catalog, Policies: policies})}
	if withBlobs {
		if f.blobs, err = blob.NewLocal(blob.NewMemory(nil), blob.LocalOptions{BaseURL: "http://blobs.test"}); err != nil {
			t.Fatal(err)
		}
		o.Blobs = f.blobs
	}
	f.svc = chat.NewService(o)
	f.ctx = auth.ActingFor(context.Background(), f.userID)
	return f
}

// newChat creates a titled chat (an untitled one's first exchange would
// make a title call of the model under test).
func (f *valuesFixture) newChat(t *testing.T) string {
	t.Helper()
	title := "values"
	c, err := f.svc.Create(f.ctx, chat.CreateRequest{Title: &title})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// stream runs a streamed reply to content in chat id and returns its
// events and the stored reply.
func (f *valuesFixture) stream(t *testing.T, id, content string) ([]chat.Event, chat.Message) {
	t.Helper()
	turn, err := f.svc.StartStream(f.ctx, id, chat.StreamRequest{MessageRequest: chat.MessageRequest{Content: content, ModelID: "rec", UserID: &f.userID}})
	if err != nil {
		t.Fatal(err)
	}
	return f.run(t, turn)
}

func (f *valuesFixture) run(t *testing.T, turn *chat.Turn) ([]chat.Event, chat.Message) {
	t.Helper()
	var events []chat.Event
	msg, err := f.svc.RunStream(f.ctx, turn, func(e chat.Event) { events = append(events, e) })
	if err != nil {
		t.Fatalf("RunStream: %v (events %+v)", err, events)
	}
	for _, e := range events {
		if b, _ := json.Marshal(e); len(b) > chat.MaxEventBytes {
			t.Errorf("a %s event of %d bytes", e.Type, len(b))
		}
	}
	return events, msg
}

// stored returns the messages of chat id as read through the service
// (with their result URLs).
func (f *valuesFixture) stored(t *testing.T, id string) []chat.Message {
	t.Helper()
	msgs, err := f.svc.Messages(f.ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// blobText returns the blob at key.
func (f *valuesFixture) blobText(t *testing.T, key string) string {
	t.Helper()
	obj, err := f.blobs.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("blob %s: %v", key, err)
	}
	defer obj.Body.Close()
	b, _ := io.ReadAll(obj.Body)
	return string(b)
}

// TestToolResultBound: a tool result of exactly ValueBound bytes is kept
// whole everywhere; one byte more, and 8 MiB, are kept whole in the blob
// store only, and cut to ValueBound in the event, the stored tool call
// (with resultSize and a resultUrl) and what the model reads next; in the
// stream and in POST .../messages alike, with no error.
func TestToolResultBound(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t, true)
	for _, n := range []int{chat.ValueBound, chat.ValueBound + 1, 8<<20 - 64<<10} {
		whole := `{"text":"` + strings.Repeat("x", n-11) + `"}`
		check := func(how string, c chat.ToolCall, key string) {
			t.Helper()
			read := f.rec.last().Messages
			sent := read[len(read)-1]
			if sent.Role != model.RoleTool || len(sent.Content) > chat.ValueBound || sent.Content != string(c.Result) {
				t.Errorf("%d bytes, %s: the model read %d bytes (%s), the call holds %d", n, how, len(sent.Content), sent.Role, len(c.Result))
			}
			if n <= chat.ValueBound {
				if string(c.Result) != whole || c.Truncated || c.ResultKey != "" || c.ResultURL != "" || c.ResultSize != 0 {
					t.Errorf("%d bytes, %s: %d bytes, truncated %v, key %q", n, how, len(c.Result), c.Truncated, c.ResultKey)
				}
				return
			}
			if !c.Truncated || c.ResultKey != key || c.ResultSize != int64(n) || !strings.HasPrefix(c.ResultURL, "http://blobs.test/") ||
				string(c.Result) != string(truncate.Cut(json.RawMessage(whole), chat.ValueBound)) {
				t.Errorf("%d bytes, %s: truncated %v, key %q (want %q), size %d, url %q", n, how, c.Truncated, c.ResultKey, key, c.ResultSize, c.ResultURL)
			}
			if got := f.blobText(t, key); got != whole {
				t.Errorf("%d bytes, %s: the blob holds %d bytes", n, how, len(got))
			}
		}
		id := f.newChat(t)
		ex, err := f.svc.Send(f.ctx, id, chat.MessageRequest{Content: fmt.Sprintf("big %d", n), ModelID: "rec"})
		if err != nil {
			t.Fatalf("%d bytes: send: %v", n, err)
		}
		check("message", ex.Response.ToolCalls[0], chat.ResultKey(id, ex.Response.ID, 0))

		events, msg := f.stream(t, id, fmt.Sprintf("big %d", n))
		if msg.Status != chat.StatusCompleted || events[len(events)-1].Reason != chat.ReasonCompleted {
			t.Fatalf("%d bytes: stream ended %s", n, msg.Status)
		}
		for _, e := range events {
			if e.Type == chat.EventToolResult && (e.Truncated != (n > chat.ValueBound) || len(e.Result) > chat.ValueBound ||
				(n > chat.ValueBound && e.ResultSize != int64(n))) {
				t.Errorf("%d bytes: tool_result event truncated %v, %d bytes, resultSize %d", n, e.Truncated, len(e.Result), e.ResultSize)
			}
		}
		msgs := f.stored(t, id)
		check("stored message", msgs[1].ToolCalls[0], chat.ResultKey(id, msgs[1].ID, 0))
		check("stream", msgs[3].ToolCalls[0], chat.ResultKey(id, msgs[3].ID, 0))
	}
}

// TestFailedSendKeepsNoValues: a sent message whose reply fails after a
// tool result was kept in the blob store stores nothing, so it leaves no
// blob behind either.
func TestFailedSendKeepsNoValues(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t, true)
	id := f.newChat(t)
	_, err := f.svc.Send(f.ctx, id, chat.MessageRequest{Content: fmt.Sprintf("fail after big %d", chat.ValueBound+100), ModelID: "rec"})
	if !errs.Is(err, errs.Unavailable) {
		t.Fatalf("send: %v, want the model's Unavailable", err)
	}
	if msgs := f.stored(t, id); len(msgs) != 0 {
		t.Fatalf("%d messages stored after a failed send", len(msgs))
	}
	if n, err := f.blobs.DeletePrefix(f.ctx, blob.PrefixChats+id+"/"); err != nil || n != 0 {
		t.Errorf("%d blobs of the chat left after a failed send (%v)", n, err)
	}
}

// TestToolResultWithoutBlobs: a service with no blob store still bounds
// what it stores and sends: the result is cut, with no key or URL.
func TestToolResultWithoutBlobs(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t, false)
	id := f.newChat(t)
	ex, err := f.svc.Send(f.ctx, id, chat.MessageRequest{Content: "big 600000", ModelID: "rec"})
	if err != nil {
		t.Fatal(err)
	}
	c := ex.Response.ToolCalls[0]
	if !c.Truncated || c.ResultKey != "" || c.ResultURL != "" || c.ResultSize != 0 || len(c.Result) > chat.ValueBound {
		t.Errorf("tool call: truncated %v, key %q, url %q, size %d, %d bytes", c.Truncated, c.ResultKey, c.ResultURL, c.ResultSize, len(c.Result))
	}
}

// TestLongDeltasAreSplit: a model's delta whose event would pass
// MaxEventBytes (control characters escape to six bytes each) is sent as
// several content events, which concatenate to it. 30,000 of them escape
// to 180,000 bytes, over the bound: no more, as the reply's end writes
// them in one transaction, which a loaded machine under -race makes slow.
func TestLongDeltasAreSplit(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t, true)
	id := f.newChat(t)
	events, msg := f.stream(t, id, "shout 30000")
	var b strings.Builder
	n := 0
	for _, e := range events {
		if e.Type == chat.EventContent {
			b.WriteString(e.Delta)
			n++
		}
	}
	if b.String() != strings.Repeat("\x01", 30000) || n < 2 {
		t.Errorf("%d content events carrying %d bytes", n, b.Len())
	}
	if msg.Status != chat.StatusCompleted {
		t.Errorf("reply %s", msg.Status)
	}
}

// TestPausedStateInTheBlobStore: the state of a reply paused for a tool
// approval in a long chat (16 messages of 32,000 characters) goes to the
// blob store, its message's item keeping the key; the decision and the
// continuation read it back whole, and the model gets the same
// conversation as before the pause. A short state stays in the item.
func TestPausedStateInTheBlobStore(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t, true)
	id := f.newChat(t)
	for i := range 16 {
		long := fmt.Sprintf("%02d ", i) + strings.Repeat("y", 32000-3)
		if _, err := f.svc.Send(f.ctx, id, chat.MessageRequest{Content: long, ModelID: "rec"}); err != nil {
			t.Fatal(err)
		}
	}
	events, msg := f.stream(t, id, "ask")
	if msg.Status != chat.StatusAwaitingApproval || events[len(events)-1].Reason != chat.ReasonAwaitingApproval {
		t.Fatalf("paused reply: %s", msg.Status)
	}
	before := f.rec.last().Messages
	_, raw, err := f.chats.Conversation(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	paused := raw[len(raw)-1]
	if paused.Pending != nil || paused.PendingKey != chat.PendingKey(id, msg.ID) {
		t.Fatalf("stored paused reply: pending %v, key %q", paused.Pending != nil, paused.PendingKey)
	}
	if state := f.blobText(t, paused.PendingKey); len(state) < 16*32000 {
		t.Fatalf("the blob holds %d bytes of state", len(state))
	}
	if _, err := f.svc.Decide(f.ctx, id, "c1", true, false); err != nil {
		t.Fatalf("approve: %v", err)
	}
	res, err := f.svc.Resume(f.ctx, id, nil)
	if err != nil || res == nil || res.Continuation == nil {
		t.Fatalf("resume: %+v %v", res, err)
	}
	_, done := f.run(t, res.Continuation)
	if done.Status != chat.StatusCompleted || len(done.ToolCalls) != 1 || string(done.ToolCalls[0].Result) != `{"done":true}` {
		t.Fatalf("continued reply: %+v", done)
	}
	after := f.rec.last().Messages
	if len(after) != len(before)+2 {
		t.Fatalf("the continuation sent %d messages, the paused turn %d", len(after), len(before))
	}
	for i := range before {
		if after[i].Role != before[i].Role || after[i].Content != before[i].Content {
			t.Fatalf("message %d differs after the pause", i)
		}
	}

	// A short chat's paused state stays in the item.
	short := f.newChat(t)
	_, msg = f.stream(t, short, "ask")
	_, raw, err = f.chats.Conversation(context.Background(), short)
	if err != nil || msg.Status != chat.StatusAwaitingApproval || raw[1].Pending == nil || raw[1].PendingKey != "" {
		t.Fatalf("short paused reply: %s, pending %v, key %q, %v", msg.Status, raw[1].Pending != nil, raw[1].PendingKey, err)
	}
}

// TestInterruptKeepsKeptResults: the sweeper's end of a reply whose
// process died rebuilds its tool calls from the log, after what the
// message held when it was paused, and keeps the key of each result the
// log says was kept whole (a tool_result with resultSize).
func TestInterruptKeepsKeptResults(t *testing.T) {
	t.Parallel()
	f := newValuesFixture(t, false)
	ctx := context.Background()
	id := f.newChat(t)
	c, err := f.chats.Chat(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	g := chat.Generation{ID: uuid.NewString(), Now: now, Until: now.Add(time.Minute), Lease: job.Lease{Until: now.Add(-time.Second), Reserved: 10}}
	user := chat.Message{ID: uuid.NewString(), ChatID: id, Role: "user", Content: "go", Status: chat.StatusCompleted, CreatedAt: now}
	// The reply as stored when it went on after a pause: one tool call,
	// its result kept.
	reply := chat.Message{ID: g.ID, ChatID: id, Role: "assistant", ReplyTo: user.ID, Status: chat.StatusStreaming, CreatedAt: now.Add(time.Microsecond),
		Content: "Before.", ToolCalls: []chat.ToolCall{{ToolName: "big_text", ToolArgs: json.RawMessage(`{}`), Result: json.RawMessage(`{"truncated":true,"preview":"{"}`),
			Truncated: true, ResultSize: 40000, ResultKey: chat.ResultKey(id, g.ID, 0)}},
		Citations: []chat.Citation{{KnowledgeBaseID: uuid.NewString(), DocumentID: uuid.NewString(), DocumentName: "a.md", ChunkID: "d:0", Start: 0, End: 10, Score: 0.03}}}
	ev := func(e chat.Event) json.RawMessage { b, _ := json.Marshal(e); return b }
	cut := json.RawMessage(`{"truncated":true,"preview":"{\"text\":\"xx"}`)
	log := []json.RawMessage{
		ev(chat.Event{Type: chat.EventStart, MessageID: g.ID}),
		ev(chat.Event{Type: chat.EventContent, Delta: "Before."}),
		ev(chat.Event{Type: chat.EventToolCall, ToolName: "big_text", ToolArgs: json.RawMessage(`{}`)}),
		ev(chat.Event{Type: chat.EventToolResult, ToolName: "big_text", Result: cut, Truncated: true, ResultSize: 40000}),
		ev(chat.Event{Type: chat.EventEnd, MessageID: g.ID, Reason: chat.ReasonAwaitingApproval}),
		ev(chat.Event{Type: chat.EventContent, Delta: " After."}),
		ev(chat.Event{Type: chat.EventToolCall, ToolName: "big_text", ToolArgs: json.RawMessage(`{}`)}),
		ev(chat.Event{Type: chat.EventToolResult, ToolName: "big_text", Result: cut, Truncated: true, ResultSize: 50000}),
		ev(chat.Event{Type: chat.EventToolCall, ToolName: "big_text", ToolArgs: json.RawMessage(`{}`)}),
		ev(chat.Event{Type: chat.EventToolResult, ToolName: "big_text", Result: cut, Truncated: true}), // cut, not kept
	}
	if err := f.chats.StartLoggedGeneration(ctx, c, g, job.Chain(0, 1, log...), user, reply); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Interrupt(ctx, id, g.ID); err != nil {
		t.Fatal(err)
	}
	m, active, err := f.chats.GeneratedMessage(ctx, id, g.ID)
	if err != nil || active || m.Status != chat.StatusFailed || m.Content != "Before. After." || len(m.ToolCalls) != 3 {
		t.Fatalf("interrupted reply: %+v active %v, %v", m, active, err)
	}
	for i, want := range []string{chat.ResultKey(id, g.ID, 0), chat.ResultKey(id, g.ID, 1), ""} {
		if c := m.ToolCalls[i]; c.ResultKey != want || !c.Truncated {
			t.Errorf("tool call %d: key %q, want %q (truncated %v)", i, c.ResultKey, want, c.Truncated)
		}
	}
	// The sweeper's end carries the reply's citations, as stored.
	recs, _, err := store.NewJobs(f.db.DB, f.db.Data()).Read(ctx, job.Ref{Kind: chat.GenerationKind, Collection: id, ID: g.ID}, 0)
	if err != nil || len(recs) == 0 {
		t.Fatalf("the log after the interrupt: %d records, %v", len(recs), err)
	}
	var end chat.Event
	if err := json.Unmarshal(recs[len(recs)-1].Data, &end); err != nil || end.Type != chat.EventEnd || end.Reason != chat.ReasonInterrupted ||
		len(m.Citations) != 1 || !reflect.DeepEqual(end.Citations, m.Citations) {
		t.Fatalf("the sweeper's end %s, want the stored citations %+v (%v)", recs[len(recs)-1].Data, m.Citations, err)
	}
}
