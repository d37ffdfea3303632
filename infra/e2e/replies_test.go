package e2e_test

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/tmaxmax/go-sse"

	"github.com/workflowchat/service/infra/dynamolocal"
)

// openResume opens GET .../messages/stream on chatID after the event
// lastID (none when empty), in the Last-Event-ID header or, with
// viaQuery, in ?lastEventId=. The caller closes the body.
func (c *client) openResume(ctx context.Context, chatID, lastID string, viaQuery bool) *http.Response {
	c.t.Helper()
	url := c.base + "/api/chats/" + chatID + "/messages/stream"
	if lastID != "" && viaQuery {
		url += "?lastEventId=" + lastID
	}
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" && !viaQuery {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("resume: %v", err)
	}
	return resp
}

// sessionToken is the session cookie c signed in with, to sign in another
// client (withCookie) on another server of the same store.
func (c *client) sessionToken() string {
	c.t.Helper()
	for _, ck := range c.http.Jar.Cookies(mustURL(c.t, c.base)) {
		if ck.Name == "session_token" {
			return ck.Value
		}
	}
	c.t.Fatalf("no session cookie for %s", c.base)
	return ""
}

// resume reads a resumed stream to its end (see openResume).
func (c *client) resume(chatID, lastID string, viaQuery bool) streamResult {
	c.t.Helper()
	return c.readStream(c.openResume(context.Background(), chatID, lastID, viaQuery))
}

// seqOf returns the sequence number of an event's id.
func seqOf(t *testing.T, e streamEvent) int {
	t.Helper()
	_, s, _ := strings.Cut(e.ID, ":")
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("event id %q", e.ID)
	}
	return n
}

// checkSequence checks that events are one reply's events numbered from
// first with nothing missing or repeated, and returns their deltas.
func checkSequence(t *testing.T, id string, first int, events []streamEvent) string {
	t.Helper()
	var b strings.Builder
	for i, e := range events {
		if want := fmt.Sprintf("%s:%d", id, first+i); e.ID != want {
			t.Fatalf("event %d has id %q, want %q (events %+v)", i, e.ID, want, events)
		}
		if e.Type == "content" {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

// counted is the built-in model's slow reply to "count to n slowly".
func counted(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d ", i)
	}
	return b.String()
}

// startCount opens a stream of "count to n slowly" on chatID and returns
// a pull iterator over its events.
func startCount(t *testing.T, ctx context.Context, c *client, chatID, userID string, n int) (*http.Response, func() (streamEvent, error, bool), func()) {
	t.Helper()
	resp := c.openStream(ctx, chatID, map[string]any{"content": fmt.Sprintf("count to %d slowly", n), "modelId": "builtin", "userId": userID})
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	next, stop := iter.Pull2(iter.Seq2[streamEvent, error](readEvents(t, resp.Body)))
	return resp, next, stop
}

// TestResumeAfterDrop streams a slow reply, drops the connection after its
// first events, and resumes it on a new connection with Last-Event-ID: the
// events join up with none missing or repeated, the deltas make the saved
// message, and two followers at once (no id: from the start) see the same
// events. Resuming the finished reply replays what follows the id and
// closes.
func TestResumeAfterDrop(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "resume.drop@example.com")
	ch := newChat(t, c, map[string]any{"title": "resume"})
	const n = 30

	ctx, cancel := context.WithCancel(context.Background())
	resp, next, stop := startCount(t, ctx, c, ch.ID, userID, n)
	var before []streamEvent
	for e, err, ok := next(); ok && err == nil; e, err, ok = next() {
		before = append(before, e)
		if len(before) == 4 {
			break
		}
	}
	stop()
	cancel()
	resp.Body.Close()
	if len(before) != 4 || before[0].Type != "start" {
		t.Fatalf("first events %+v", before)
	}
	id := before[0].MessageID
	checkSequence(t, id, 1, before)

	// Two followers from the start, and the resume after the drop, at once.
	var wg sync.WaitGroup
	var followers [2]streamResult
	for i := range followers {
		wg.Go(func() { followers[i] = c.resume(ch.ID, "", false) })
	}
	after := c.resume(ch.ID, before[len(before)-1].ID, false)
	wg.Wait()
	if after.Status != 200 {
		t.Fatalf("resume: %d %s", after.Status, after.Body)
	}
	all := append(append([]streamEvent{}, before...), after.Events...)
	content := checkSequence(t, id, 1, all)
	last := all[len(all)-1]
	if last.Type != "end" || last.Reason != "completed" || last.MessageID != id {
		t.Errorf("last event %+v, want end completed", last)
	}
	if content != counted(n) {
		t.Errorf("deltas %q, want %q", content, counted(n))
	}
	for i, f := range followers {
		if f.Status != 200 || len(f.Events) != len(all) {
			t.Errorf("follower %d: %d, %d events, want %d", i, f.Status, len(f.Events), len(all))
			continue
		}
		checkSequence(t, id, 1, f.Events)
	}
	msgs := getMessages(t, c, ch.ID)
	if len(msgs) != 2 || msgs[1].ID != id || msgs[1].Status != "completed" || msgs[1].Content != content {
		t.Errorf("saved messages %+v, want the reply %q completed", msgs, content)
	}

	// The finished reply: replay after event 5, by header and by query.
	for _, viaQuery := range []bool{false, true} {
		res := c.resume(ch.ID, id+":5", viaQuery)
		if res.Status != 200 || len(res.Events) != len(all)-5 {
			t.Fatalf("replay of the finished reply (query %v): %d, %d events, want %d", viaQuery, res.Status, len(res.Events), len(all)-5)
		}
		checkSequence(t, id, 6, res.Events)
	}
	if res := c.resume(ch.ID, last.ID, false); res.Status != 200 || len(res.Events) != 0 {
		t.Errorf("resume after end: %d %+v, want an empty stream", res.Status, res.Events)
	}
	// Nothing is active now.
	if res := c.resume(ch.ID, "", false); res.Status != 204 {
		t.Errorf("resume with nothing active: %d, want 204", res.Status)
	}
}

// TestStopFromAnotherConnection stops a slow reply with a POST while the
// first connection streams it: the stream ends with end (reason stopped),
// the saved message is stopped and holds exactly the streamed deltas, and
// a second stop is 409 GENERATION_NOT_ACTIVE.
func TestStopFromAnotherConnection(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "resume.stop@example.com")
	ch := newChat(t, c, map[string]any{})
	resp, next, stop := startCount(t, context.Background(), c, ch.ID, userID, 200)
	defer resp.Body.Close()
	defer stop()
	var events []streamEvent
	var stopped response
	for e, err, ok := next(); ok; e, err, ok = next() {
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		events = append(events, e)
		if len(events) == 4 {
			stopped = c.do("POST", "/api/chats/"+ch.ID+"/messages/"+events[0].MessageID+"/stop", nil)
		}
		if e.Type == "end" {
			break
		}
	}
	id := events[0].MessageID
	content := checkSequence(t, id, 1, events)
	if last := events[len(events)-1]; last.Type != "end" || last.Reason != "stopped" {
		t.Fatalf("last event %+v, want end stopped", last)
	}
	if n := len(events) - 2; n >= 200 {
		t.Errorf("%d numbers before the stop took effect: the count ran to its end", n)
	}
	var out struct{ Data messageJSON }
	if stopped.Status != 200 {
		t.Fatalf("stop: %d %s", stopped.Status, stopped.Body)
	}
	stopped.decode(t, &out)
	if out.Data.ID != id || out.Data.Status != "stopped" || out.Data.Content != content {
		t.Errorf("stop answered %+v, want the stopped message with %q", out.Data, content)
	}
	if !strings.HasPrefix(counted(200), content) || content == counted(200) {
		t.Errorf("stopped content %q", content)
	}
	msgs := getMessages(t, c, ch.ID)
	if len(msgs) != 2 || msgs[1].Status != "stopped" || msgs[1].Content != content {
		t.Errorf("saved %+v", msgs)
	}
	expectError(t, "second stop", c.do("POST", "/api/chats/"+ch.ID+"/messages/"+id+"/stop", nil), 409, "GENERATION_NOT_ACTIVE")
}

// TestResumeErrors checks every error of resume and stop.
func TestResumeErrors(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "resume.errors@example.com")
	other := newClient(t, srv.API)
	signUpChatUser(t, other, "resume.other@example.com")
	ch := newChat(t, c, map[string]any{})
	res := c.stream(ch.ID, map[string]any{"content": "hello", "modelId": "builtin", "userId": userID})
	if res.Status != 200 {
		t.Fatalf("stream: %d", res.Status)
	}
	id := res.Events[0].MessageID
	plain := sendMessage(t, c, ch.ID, map[string]any{"content": "hi"})
	base := "/api/chats/" + ch.ID + "/messages/stream"
	unknown := uuid.NewString()

	for _, tc := range []struct {
		name   string
		client *client
		path   string
		header []string
		status int
		code   string
	}{
		{"malformed id", c, base, []string{"Last-Event-ID", "nope"}, 400, "INVALID_EVENT_ID"},
		{"seq 0", c, base, []string{"Last-Event-ID", id + ":0"}, 400, "INVALID_EVENT_ID"},
		{"seq not a number", c, base, []string{"Last-Event-ID", id + ":x"}, 400, "INVALID_EVENT_ID"},
		{"not a uuid", c, base, []string{"Last-Event-ID", "abc:1"}, 400, "INVALID_EVENT_ID"},
		{"malformed query id", c, base + "?lastEventId=" + id, nil, 400, "INVALID_EVENT_ID"},
		{"bad chat id", c, "/api/chats/nope/messages/stream", nil, 400, "INVALID_ID"},
		{"unknown reply", c, base, []string{"Last-Event-ID", unknown + ":1"}, 404, "GENERATION_NOT_FOUND"},
		{"a reply never streamed", c, base, []string{"Last-Event-ID", plain.Response.ID + ":1"}, 404, "GENERATION_NOT_FOUND"},
		{"unknown chat", c, "/api/chats/" + unknown + "/messages/stream", nil, 404, "CHAT_NOT_FOUND"},
		{"another user's chat", other, base, []string{"Last-Event-ID", id + ":1"}, 403, "FORBIDDEN"},
		{"no session", newClient(t, srv.API), base, nil, 401, "UNAUTHORIZED"},
	} {
		expectError(t, "resume: "+tc.name, tc.client.do("GET", tc.path, nil, tc.header...), tc.status, tc.code)
	}
	stopPath := func(chatID, msgID string) string { return "/api/chats/" + chatID + "/messages/" + msgID + "/stop" }
	for _, tc := range []struct {
		name   string
		client *client
		path   string
		status int
		code   string
	}{
		{"bad message id", c, stopPath(ch.ID, "nope"), 400, "INVALID_ID"},
		{"bad chat id", c, stopPath("nope", id), 400, "INVALID_ID"},
		{"unknown reply", c, stopPath(ch.ID, unknown), 404, "GENERATION_NOT_FOUND"},
		{"unknown chat", c, stopPath(unknown, id), 404, "CHAT_NOT_FOUND"},
		{"another user's chat", other, stopPath(ch.ID, id), 403, "FORBIDDEN"},
		{"finished", c, stopPath(ch.ID, id), 409, "GENERATION_NOT_ACTIVE"},
		{"no session", newClient(t, srv.API), stopPath(ch.ID, id), 401, "UNAUTHORIZED"},
	} {
		expectError(t, "stop: "+tc.name, tc.client.do("POST", tc.path, nil), tc.status, tc.code)
	}
	if r := c.do("GET", base, nil); r.Status != 204 || len(r.Body) != 0 {
		t.Errorf("resume with nothing active: %d %q, want 204", r.Status, r.Body)
	}
}

// TestResumeAfterCrash kills the dev server (SIGKILL) in the middle of a
// reply and restarts it on the same DATA_FILE: the sweeper finds the
// reply's expired lease, saves it failed with what was logged, and a
// follower resuming it receives the rest, then error INTERRUPTED (with
// the content as saved) and end, numbered after every id the client may
// have received from the dead process.
func TestResumeAfterCrash(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	env := []string{"DATA_FILE=" + file, "GENERATION_LEASE=1s", "SWEEP_INTERVAL=200ms"}
	srv := startServer(t, env...)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "resume.crash@example.com")
	token := c.sessionToken()
	ch := newChat(t, c, map[string]any{})
	resp, next, stop := startCount(t, context.Background(), c, ch.ID, userID, 200)
	var seen []streamEvent
	for e, err, ok := next(); ok && err == nil; e, err, ok = next() {
		seen = append(seen, e)
		if len(seen) == 8 {
			break
		}
	}
	// Let at least one batch reach the log, then kill.
	time.Sleep(300 * time.Millisecond)
	_ = srv.cmd.Process.Kill()
	<-srv.done
	stop()
	resp.Body.Close()
	id := seen[0].MessageID

	srv2 := startServer(t, env...)
	c2 := withCookie(t, srv2.API, token)
	res := c2.resume(ch.ID, seen[1].ID, false)
	if res.Status != 200 || len(res.Events) < 2 {
		t.Fatalf("resume after the restart: %d %s %+v", res.Status, res.Body, res.Events)
	}
	n := len(res.Events)
	content := checkSequence(t, id, 3, res.Events[:n-2])
	if e := res.Events[n-2]; e.Type != "error" || e.Error != "INTERRUPTED" || e.Content == nil || *e.Content != seen[1].Delta+content {
		t.Errorf("before the end: %+v, want error INTERRUPTED with the saved content", e)
	}
	for _, e := range seen {
		if seqOf(t, res.Events[n-2]) <= seqOf(t, e) {
			t.Errorf("the closing events reuse id %s (the client saw %s)", res.Events[n-2].ID, e.ID)
		}
	}
	if seqOf(t, res.Events[n-1]) != seqOf(t, res.Events[n-2])+1 {
		t.Errorf("end %s does not follow error %s", res.Events[n-1].ID, res.Events[n-2].ID)
	}
	if e := res.Events[n-1]; e.Type != "end" || e.Reason != "interrupted" {
		t.Errorf("last: %+v, want end interrupted", e)
	}
	msgs := getMessages(t, c2, ch.ID)
	want := seen[1].Delta + content
	if len(msgs) != 2 || msgs[1].Status != "failed" || msgs[1].Content != want || !strings.HasPrefix(counted(200), want) {
		t.Errorf("saved %+v, want the reply failed with %q", msgs, want)
	}
	// The chat takes messages again.
	sendMessage(t, c2, ch.ID, map[string]any{"content": "hello again"})
}

// TestEventSourceReconnects follows a slow reply with go-sse's client
// through a proxy that cuts the first connection after a few events: the
// client reconnects by itself with Last-Event-ID and gets every event once.
func TestEventSourceReconnects(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "resume.eventsource@example.com")
	ch := newChat(t, c, map[string]any{})

	var conns atomic.Int32
	var lastIDs sync.Map
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := conns.Add(1)
		lastIDs.Store(n, r.Header.Get("Last-Event-ID"))
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, srv.API+r.URL.RequestURI(), nil)
		req.Header = r.Header.Clone()
		up, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer up.Body.Close()
		for k, v := range up.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(up.StatusCode)
		events := 0
		for ev, err := range sse.Read(up.Body, nil) {
			if err != nil {
				return
			}
			fmt.Fprintf(w, "id: %s\ndata: %s\n\n", ev.LastEventID, ev.Data)
			w.(http.Flusher).Flush()
			if events++; n == 1 && events == 3 {
				return // cut the first connection
			}
		}
	}))
	defer proxy.Close()

	resp, next, stop := startCount(t, context.Background(), c, ch.ID, userID, 20)
	defer resp.Body.Close()
	defer stop()
	if e, _, _ := next(); e.Type != "start" {
		t.Fatalf("first event %+v", e)
	}

	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", proxy.URL+"/api/chats/"+ch.ID+"/messages/stream", nil)
	for _, ck := range c.http.Jar.Cookies(mustURL(t, srv.API)) {
		req.AddCookie(ck)
	}
	client := &sse.Client{Backoff: sse.Backoff{InitialInterval: 50 * time.Millisecond, Jitter: -1}}
	conn := client.NewConnection(req)
	var mu sync.Mutex
	var got []streamEvent
	conn.SubscribeMessages(func(ev sse.Event) {
		mu.Lock()
		defer mu.Unlock()
		var e streamEvent
		for pe, err := range readEvents(t, strings.NewReader("id: "+ev.LastEventID+"\ndata: "+ev.Data+"\n\n")) {
			if err == nil {
				e = pe
			}
		}
		got = append(got, e)
		if e.Type == "end" {
			cancel()
		}
	})
	if err := conn.Connect(); ctx.Err() == nil || err == nil {
		t.Fatalf("connection ended with %v before the reply's end", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 {
		t.Fatal("no events")
	}
	content := checkSequence(t, got[0].MessageID, 1, got)
	if content != counted(20) || got[len(got)-1].Type != "end" {
		t.Errorf("events %+v, want every number once then end", got)
	}
	if conns.Load() < 2 {
		t.Errorf("%d connections: the client did not reconnect", conns.Load())
	}
	if v, _ := lastIDs.Load(int32(2)); v != got[2].ID {
		t.Errorf("the reconnection sent Last-Event-ID %q, want %q", v, got[2].ID)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestResumeFromSecondServer streams "count to 200 slowly" from one dev
// server and, while it runs, resumes it from a second dev server on the
// same store (DYNAMODB_ENDPOINT: one embedded engine serving both, as
// Lambda instances share DynamoDB): the resumed events join the ones the
// first connection got with none missing or repeated, both connections
// end completed, and the saved message is exactly the text streamed. How
// far the follower on the second server lags the generator on the first
// (the arrival of each event on both connections) is logged, not
// asserted: the writer waits at most job.MaxDelay before writing, a
// follower at most 150 ms between reads.
func TestResumeFromSecondServer(t *testing.T) {
	t.Parallel()
	eng, err := dynamolocal.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	env := []string{"DYNAMODB_ENDPOINT=" + eng.URL}
	srv1, srv2 := startServer(t, env...), startServer(t, env...)
	c := newClient(t, srv1.API)
	userID := signUpChatUser(t, c, "resume.second@example.com")
	token := c.sessionToken()
	ch := newChat(t, c, map[string]any{})
	resp, next, stop := startCount(t, context.Background(), c, ch.ID, userID, 200)
	defer resp.Body.Close()
	defer stop()
	var seen []streamEvent
	for e, err, ok := next(); ok && err == nil; e, err, ok = next() {
		seen = append(seen, e)
		if len(seen) == 21 { // start and 20 numbers
			break
		}
	}
	if len(seen) != 21 {
		t.Fatalf("first events: %+v", seen)
	}
	id := seen[0].MessageID

	// The rest of the first connection, with each event's arrival.
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	var rest []streamEvent
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		for e, err, ok := next(); ok && err == nil; e, err, ok = next() {
			mu.Lock()
			arrived[e.ID] = time.Now()
			rest = append(rest, e)
			mu.Unlock()
		}
	}()
	defer func() { resp.Body.Close(); <-firstDone }() // before stop, on every path

	c2 := withCookie(t, srv2.API, token)
	r2 := c2.openResume(context.Background(), ch.ID, seen[len(seen)-1].ID, false)
	if r2.StatusCode != 200 {
		b, _ := io.ReadAll(r2.Body)
		t.Fatalf("resume on the second server: %d %s", r2.StatusCode, b)
	}
	var resumed []streamEvent
	var lags []time.Duration
	for e, err := range readEvents(t, r2.Body) {
		if err != nil {
			t.Fatalf("resumed stream: %v", err)
		}
		now := time.Now()
		resumed = append(resumed, e)
		mu.Lock()
		if at, ok := arrived[e.ID]; ok {
			lags = append(lags, now.Sub(at))
		}
		mu.Unlock()
	}
	r2.Body.Close()
	<-firstDone

	content := checkSequence(t, id, len(seen)+1, resumed)
	if n := len(resumed); n == 0 || resumed[n-1].Type != "end" || resumed[n-1].Reason != "completed" {
		t.Fatalf("resumed events end with %+v, want end completed", resumed[max(n-1, 0):])
	}
	if n := len(rest); n == 0 || rest[n-1].Type != "end" || rest[n-1].Reason != "completed" {
		t.Fatalf("the first connection ends with %+v, want end completed", rest[max(n-1, 0):])
	}
	first := checkSequence(t, id, 1, seen)
	if got := first + content; got != counted(200) {
		t.Errorf("streamed text %q, want %q", got, counted(200))
	}
	for _, cl := range []*client{c, c2} {
		msgs := getMessages(t, cl, ch.ID)
		if len(msgs) != 2 || msgs[1].Status != "completed" || msgs[1].Content != counted(200) {
			t.Errorf("saved %+v, want the reply completed with the 200 numbers", msgs)
		}
	}
	if len(lags) > 0 {
		slices.Sort(lags)
		t.Logf("the follower on the second server lagged the first connection by p50 %v, max %v over %d events",
			lags[len(lags)/2], lags[len(lags)-1], len(lags))
	}
}
