package chat_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tmaxmax/go-sse"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/toolgate"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

// loopProvider always asks for another tool call, to prove the round bound.
type loopProvider struct{ calls atomic.Int32 }

func (p *loopProvider) Models() []model.Model {
	return []model.Model{{ID: "loop", Name: "loop", Provider: "test"}}
}

func (p *loopProvider) Generate(ctx context.Context, req model.Request, emit func(model.Chunk) error) (model.Result, error) {
	p.calls.Add(1)
	if err := emit(model.Chunk{Delta: "step"}); err != nil {
		return model.Result{}, err
	}
	if len(req.Tools) == 0 {
		return model.Result{Usage: model.Usage{InputTokens: 1, OutputTokens: 1}}, nil
	}
	return model.Result{
		ToolCalls: []model.ToolCall{{ID: "c", Name: "hash", Args: json.RawMessage(`{"text":"a","algorithm":"md5"}`)}},
		Usage:     model.Usage{InputTokens: 1, OutputTokens: 1},
	}, nil
}

type fixture struct {
	srv    *httptest.Server
	svc    *chat.Service
	raw    *store.Chats
	cookie string
	userID string
	loop   *loopProvider
}

// newFixture serves the chat routes over the real store; wrapJobs, when
// given, wraps the store of reply logs (to choose when a write answers).
func newFixture(t *testing.T, chunkDelay, ping time.Duration, wrapJobs ...func(job.Store) job.Store) *fixture {
	t.Helper()
	return newFixtureWith(t, chunkDelay, ping, nil, wrapJobs...)
}

// newFixtureWith is newFixture whose service's options set changes
// (nil: none).
func newFixtureWith(t *testing.T, chunkDelay, ping time.Duration, set func(*chat.Options), wrapJobs ...func(job.Store) job.Store) *fixture {
	t.Helper()
	db := storetest.New(t)
	var jobs job.Store = store.NewJobs(db.DB, db.Data())
	for _, w := range wrapJobs {
		jobs = w(jobs)
	}
	users := store.NewUsers(db.DB, db.Users(), db.Sessions())
	authn := auth.NewService(users, &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, nil)
	loop := &loopProvider{}
	models, err := model.NewRegistry(model.Builtin{ChunkDelay: chunkDelay}, loop)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{Generator: toolserver.Models(models), DefaultModelID: "builtin"})...)
	if err != nil {
		t.Fatal(err)
	}
	const key = "test-service-key-0123456789"
	ts := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{}))
	t.Cleanup(ts.Close)
	catalog := toolclient.NewCatalog(toolclient.NewClient(ts.URL, key, nil), time.Minute, nil)
	raw := store.NewChats(db.DB, db.Data())
	opts := chat.Options{
		Store: raw, Jobs: jobs, Models: models, Preferences: users, DefaultModelID: "builtin",
		Tools: catalog, Gate: toolgate.New(toolgate.Options{Tools: catalog}),
	}
	if set != nil {
		set(&opts)
	}
	svc := chat.NewService(opts)
	api := httpapi.NewRouter()
	for _, r := range []*httpapi.Router{auth.Routes(authn, nil), chat.Routes(svc, authn, chat.Limits{}), chat.StreamRoutes(svc, authn, ping, chat.Limits{})} {
		api.Mount(r, r.Patterns()...)
	}
	srv := httptest.NewServer(httpapi.Stack(api, httpapi.Options{}))
	t.Cleanup(srv.Close)
	f := &fixture{srv: srv, svc: svc, raw: raw, loop: loop}
	resp := f.do(t, "POST", "/api/auth/sign-up/email", `{"email":"c@example.com","password":"password-1x","name":"C"}`)
	var body struct {
		Data struct{ User struct{ ID string } }
	}
	decode(t, resp, &body)
	f.userID = body.Data.User.ID
	for _, c := range resp.Cookies() {
		f.cookie = c.Name + "=" + c.Value
	}
	return f
}

func (f *fixture) request(ctx context.Context, t *testing.T, method, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Cookie", f.cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (f *fixture) do(t *testing.T, method, path, body string) *http.Response {
	return f.request(context.Background(), t, method, path, body)
}

func decode(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// newChat creates a titled chat (an untitled one's first exchange would
// make a title call of the model under test).
func (f *fixture) newChat(t *testing.T) string {
	t.Helper()
	var c struct{ Data chat.Chat }
	resp := f.do(t, "POST", "/api/chats", `{"title":"test"}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create chat: %d", resp.StatusCode)
	}
	decode(t, resp, &c)
	return c.Data.ID
}

// TestTitleCall: an untitled chat's first exchange with a model other
// than the built-in one makes one title call of that model, whose answer
// (cleaned) becomes the title; a titled chat makes none.
func TestTitleCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, 0)
	var c struct{ Data chat.Chat }
	decode(t, f.do(t, "POST", "/api/chats", `{}`), &c)
	if resp := f.do(t, "POST", "/api/chats/"+c.Data.ID+"/messages", `{"content":"go","modelId":"loop"}`); resp.StatusCode != 201 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := f.loop.calls.Load(); got != chat.MaxToolRounds+2 {
		t.Errorf("model calls = %d, want %d (the reply's and one title call)", got, chat.MaxToolRounds+2)
	}
	decode(t, f.do(t, "GET", "/api/chats/"+c.Data.ID, ""), &c)
	if c.Data.Title != "step" {
		t.Errorf("title %q, want the title call's answer %q", c.Data.Title, "step")
	}
	if resp := f.do(t, "POST", "/api/chats/"+c.Data.ID+"/messages", `{"content":"again","modelId":"loop"}`); resp.StatusCode != 201 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := f.loop.calls.Load(); got != 2*chat.MaxToolRounds+3 {
		t.Errorf("model calls = %d after a titled chat's exchange, want %d (no title call)", got, 2*chat.MaxToolRounds+3)
	}
}

// TestToolRoundsAreBounded: a model that always calls a tool is stopped
// after MaxToolRounds rounds and must answer in text in the last one.
func TestToolRoundsAreBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, 0)
	id := f.newChat(t)
	resp := f.do(t, "POST", "/api/chats/"+id+"/messages", `{"content":"go","modelId":"loop"}`)
	if resp.StatusCode != 201 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var ex struct{ Data chat.Exchange }
	decode(t, resp, &ex)
	if got := f.loop.calls.Load(); got != chat.MaxToolRounds+1 {
		t.Errorf("model turns = %d, want %d", got, chat.MaxToolRounds+1)
	}
	r := ex.Data.Response
	if len(r.ToolCalls) != chat.MaxToolRounds || r.InputTokens != chat.MaxToolRounds+1 || r.OutputTokens != chat.MaxToolRounds+1 {
		t.Errorf("response = %d tool calls, usage %d/%d", len(r.ToolCalls), r.InputTokens, r.OutputTokens)
	}
	if want := strings.Repeat("step\n\n", chat.MaxToolRounds) + "step"; r.Content != want {
		t.Errorf("content = %q, want %q", r.Content, want)
	}
	if string(r.ToolCalls[0].Result) != `{"digest":"0cc175b9c0f1b6a831c399e269772661"}` {
		t.Errorf("tool result = %s", r.ToolCalls[0].Result)
	}
}

// TestStreamKeepAlive: a silent stream gets ": ping" comments, which SSE
// clients ignore.
func TestStreamKeepAlive(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 150*time.Millisecond, 40*time.Millisecond)
	id := f.newChat(t)
	resp := f.do(t, "POST", "/api/chats/"+id+"/messages/stream", `{"content":"one two three four five six seven eight nine","modelId":"builtin","userId":"`+f.userID+`"}`)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "\n: ping\n\n") && !strings.HasPrefix(string(raw), ": ping\n\n") {
		t.Errorf("no keep-alive comment in %q", raw)
	}
	var types []string
	for ev, err := range sse.Read(strings.NewReader(string(raw)), nil) {
		if err != nil {
			t.Fatal(err)
		}
		var e chat.Event
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	if len(types) < 3 || types[0] != "start" || types[len(types)-1] != "end" {
		t.Errorf("event types = %v", types)
	}
}

// TestStreamDisconnectKeepsGenerating: a client that leaves mid-stream
// does not stop the reply: it is generated to its end and stored whole,
// under the announced id, with status completed.
func TestStreamDisconnectKeepsGenerating(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 50*time.Millisecond, 0)
	id := f.newChat(t)
	ctx, cancel := context.WithCancel(context.Background())
	long := strings.Repeat("word ", 40)
	resp := f.request(ctx, t, "POST", "/api/chats/"+id+"/messages/stream", `{"content":"`+long+`","modelId":"builtin","userId":"`+f.userID+`"}`)
	var announced, got string
	rd := bufio.NewReader(resp.Body)
	for ev, err := range sse.Read(rd, nil) {
		if err != nil {
			t.Fatal(err)
		}
		var e chat.Event
		_ = json.Unmarshal([]byte(ev.Data), &e)
		if e.Type == "start" {
			announced = e.MessageID
		}
		if e.Type == "content" {
			got += e.Delta
			break
		}
	}
	cancel()
	resp.Body.Close()

	// A bound for a broken service only: the reply takes about 2 s of
	// model time, much more on a loaded machine.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var list struct {
			Data struct{ Messages []chat.Message }
		}
		decode(t, f.do(t, "GET", "/api/chats/"+id+"/messages", ""), &list)
		if n := len(list.Data.Messages); n == 2 && list.Data.Messages[1].Status != chat.StatusStreaming {
			a := list.Data.Messages[1]
			if a.ID != announced || a.Role != "assistant" || !strings.HasPrefix(a.Content, got) ||
				!strings.HasPrefix(a.Content, `You said: "`+strings.TrimSpace(long)) || a.Status != chat.StatusCompleted {
				t.Fatalf("message = %+v (first delta %q)", a, got)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the reply was never completed")
}

// TestStreamTimeout: a reply still generating at its deadline is cut and
// saved failed with GENERATION_TIMEOUT, what was generated kept. The
// deadline passes once "1 2 " was generated, whatever the machine's speed:
// RunStream's context ends only at its deadline (Detach), so cancelling it
// stands for the deadline.
func TestStreamTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, 0)
	msg, err, events := f.streamUntil(t, context.Background(), "2 ")
	f.wantTimedOut(t, msg, err, events, "1 2 ")
}

// wantTimedOut checks that RunStream ended the reply failed with
// GENERATION_TIMEOUT, its content starting with prefix, the last live
// events the error and the end, and that the reply was saved so.
func (f *fixture) wantTimedOut(t *testing.T, msg chat.Message, err error, events []chat.Event, prefix string) {
	t.Helper()
	if errs.CodeOf(err) != "GENERATION_TIMEOUT" || msg.Status != chat.StatusFailed || !strings.HasPrefix(msg.Content, prefix) {
		t.Fatalf("RunStream: %+v, %v", msg, err)
	}
	n := len(events)
	if n < 2+strings.Count(prefix, " ") || events[n-2].Error != "GENERATION_TIMEOUT" || events[n-1].Reason != chat.ReasonInterrupted {
		t.Fatalf("events %+v", events)
	}
	f.wantStored(t, msg)
}

// streamUntil streams "count to 200 slowly" in a new chat and ends the
// reply's context (its deadline) when the content generated so far ends
// with upTo (never when upTo is empty: ctx's end is the deadline). It
// returns what RunStream returned and the live events.
func (f *fixture) streamUntil(t *testing.T, ctx context.Context, upTo string) (chat.Message, error, []chat.Event) {
	t.Helper()
	id := f.newChat(t)
	authed := auth.WithSession(context.Background(), auth.Session{User: auth.User{ID: f.userID}})
	turn, err := f.svc.StartStream(authed, id, chat.StreamRequest{MessageRequest: chat.MessageRequest{
		Content: "count to 200 slowly", ModelID: "builtin", UserID: &f.userID}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		events  []chat.Event
		content string
	)
	msg, err := f.svc.RunStream(ctx, turn, func(e chat.Event) {
		events = append(events, e)
		content += e.Delta
		if upTo != "" && strings.HasSuffix(content, upTo) {
			cancel()
		}
	})
	return msg, err, events
}

// wantStored checks that the reply was saved as RunStream returned it and
// that the chat is free for the next one.
func (f *fixture) wantStored(t *testing.T, want chat.Message) {
	t.Helper()
	var list struct {
		Data struct{ Messages []chat.Message }
	}
	decode(t, f.do(t, "GET", "/api/chats/"+want.ChatID+"/messages", ""), &list)
	if n := len(list.Data.Messages); n != 2 || list.Data.Messages[1].Status != want.Status || list.Data.Messages[1].Content != want.Content {
		t.Fatalf("stored messages %+v, want the reply %s with %q", list.Data.Messages, want.Status, want.Content)
	}
	resp := f.do(t, "POST", "/api/chats/"+want.ChatID+"/messages", `{"content":"again","modelId":"builtin"}`)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Errorf("the next message: %d, want 201 (the chat is free)", resp.StatusCode)
	}
}

// appliedThen is the store of reply logs whose first write of events
// after one holding cut is applied, after which the writer gets what
// answer returns (given the store written to): the interleavings where a
// write DynamoDB applied reaches its writer as a failure.
type appliedThen struct {
	job.Store
	cut    string
	answer answerFunc
	once   atomic.Bool
}

type answerFunc func(ctx context.Context, inner job.Store, ref job.Ref, recs []job.Record, l job.Lease) error

func (s *appliedThen) Append(ctx context.Context, ref job.Ref, recs []job.Record, l job.Lease) error {
	hit := false
	for _, r := range recs {
		hit = hit || strings.Contains(string(r.Data), s.cut)
	}
	if !hit || !s.once.CompareAndSwap(false, true) {
		return s.Store.Append(ctx, ref, recs, l)
	}
	if err := s.Store.Append(context.WithoutCancel(ctx), ref, recs, l); err != nil {
		return err
	}
	return s.answer(ctx, s.Store, ref, recs, l)
}

// streamApplied streams "count to 200 slowly" over a log store whose
// write holding "3 " is applied and then answered by answer, in ctx
// (whose end is the reply's deadline). It checks that the write happened
// and returns what RunStream returned, the live events and the store.
func streamApplied(t *testing.T, ctx context.Context, answer answerFunc) (*fixture, chat.Message, error, []chat.Event, *appliedThen) {
	t.Helper()
	var applied *appliedThen
	f := newFixture(t, 0, 0, func(s job.Store) job.Store {
		applied = &appliedThen{Store: s, cut: `"3 "`, answer: answer}
		return applied
	})
	msg, err, events := f.streamUntil(t, ctx, "")
	if !applied.once.Load() {
		t.Fatal("no write held \"3 \"")
	}
	return f, msg, err, events, applied
}

// wantLogged checks that reply msg's log ended (the reply's status is its
// message's: wantStored) and holds the streamed events, each once, in
// order.
func wantLogged(t *testing.T, jobs job.Store, msg chat.Message, events []chat.Event) {
	t.Helper()
	recs, h, err := jobs.Read(context.Background(), job.Ref{Kind: chat.GenerationKind, Collection: msg.ChatID, ID: msg.ID}, 0)
	if err != nil || h.Active {
		t.Fatalf("log head %+v (%v), want ended", h, err)
	}
	var logged []chat.Event
	for i, r := range recs {
		var e chat.Event
		if err := json.Unmarshal(r.Data, &e); err != nil || (i > 0 && r.Prev != recs[i-1].Seq) {
			t.Fatalf("record %d %+v: %v", i, r, err)
		}
		logged = append(logged, e)
	}
	if n := len(events); len(logged) != n {
		t.Fatalf("logged %d events, streamed %d: %+v", len(logged), n, logged)
	}
	for i := range logged {
		if logged[i].Type != events[i].Type || logged[i].Delta != events[i].Delta || logged[i].Error != events[i].Error {
			t.Errorf("event %d logged %+v, streamed %+v", i, logged[i], events[i])
		}
	}
}

// TestStreamTimeoutDuringWrite: the deadline passes while a write of the
// reply's log is in flight, and that write was applied. The reply still
// ends once, by RunStream, failed with GENERATION_TIMEOUT (not "already
// finished"), its log holding each event once and ending with the error.
func TestStreamTimeoutDuringWrite(t *testing.T) {
	t.Parallel()
	ctx, deadline := context.WithCancel(context.Background())
	defer deadline()
	// Generation goes on past "3 " until the deadline, which the write
	// holding "3 " brings.
	f, msg, err, events, applied := streamApplied(t, ctx, func(ctx context.Context, _ job.Store, _ job.Ref, _ []job.Record, _ job.Lease) error {
		deadline()
		return ctx.Err() // the answer is lost: the writer sees its write fail
	})
	f.wantTimedOut(t, msg, err, events, "1 2 3 ")
	wantLogged(t, applied, msg, events)
}

// TestStreamRetriedWrite: a write of the reply's log is applied but its
// answer lost, and the retry of it (the SDK's) finds its slot taken: by
// itself, so the retry succeeds and the reply goes on to its end,
// completed, saved, the chat free, each event logged once. (One transient
// storage error must not cut a healthy reply.)
func TestStreamRetriedWrite(t *testing.T) {
	t.Parallel()
	f, msg, err, events, applied := streamApplied(t, context.Background(), func(ctx context.Context, inner job.Store, ref job.Ref, recs []job.Record, l job.Lease) error {
		return inner.Append(ctx, ref, recs, l) // the retry
	})
	if err != nil || msg.Status != chat.StatusCompleted || !strings.HasPrefix(msg.Content, "1 2 3 4 ") {
		t.Fatalf("RunStream: %+v, %v", msg, err)
	}
	if n := len(events); n < 5 || events[n-1].Type != chat.EventEnd || events[n-1].Reason != chat.ReasonCompleted {
		t.Fatalf("events %+v", events)
	}
	f.wantStored(t, msg)
	wantLogged(t, applied, msg, events)
}
