package local_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/infra/cost/measure"
	"github.com/workflowchat/service/infra/latency"
	"github.com/workflowchat/service/infra/local"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/store"
)

// fixture is a stack on the embedded engine with a signed-up user.
type fixture struct {
	cfg     config.Config
	stack   *local.Stack
	counter *store.CallCounter
	meter   *store.CapacityMeter
	cookie  string
	userID  string
	chatID  string
}

func newFixture(tb testing.TB, extra ...string) *fixture {
	tb.Helper()
	return newFixtureAt(tb, nil, extra...)
}

// newFixtureAt is newFixture on the clock now (nil: time.Now).
func newFixtureAt(tb testing.TB, now func() time.Time, extra ...string) *fixture {
	tb.Helper()
	// The rate limits stay on, so that their DynamoDB call is counted, but
	// high enough for benchmark loops. extra are more NAME, value pairs.
	env := map[string]string{"RATE_LIMIT_MESSAGES": "1000000/m", "RATE_LIMIT_STREAMS": "1000000/m", "RATE_LIMIT_RUNS": "1000000/m", "RATE_LIMIT_RESUMES": "1000000/m"}
	if _, isTest := tb.(*testing.T); isTest {
		// Every call is held to its function's IAM policy (benchmarks
		// measure the engine without the check).
		env["LOCAL_IAM_TEMPLATE"] = templatePath
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		tb.Fatal(err)
	}
	counter, meter := &store.CallCounter{}, &store.CapacityMeter{}
	s, err := local.New(context.Background(), cfg, local.Options{Now: now, Counter: counter, Capacity: meter, Hasher: &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	tb.Cleanup(func() { checkIAM(tb, s) })
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/api/auth/sign-up/email", strings.NewReader(`{"email":"bench@example.com","password":"bench-pass-1","name":"Bench"}`))
	s.API.ServeHTTP(rec, req)
	if rec.Code != 200 {
		tb.Fatalf("sign-up: %d %s", rec.Code, rec.Body)
	}
	c := rec.Result().Cookies()[0]
	var body struct {
		Data struct{ User struct{ ID string } }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		tb.Fatal(err)
	}
	f := &fixture{cfg: cfg, stack: s, counter: counter, meter: meter, cookie: c.Name + "=" + c.Value, userID: body.Data.User.ID}
	rec = httptest.NewRecorder()
	s.API.ServeHTTP(rec, f.request("POST", "/api/chats", `{"title":"bench"}`))
	var created struct{ Data struct{ ID string } }
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil || rec.Code != 201 {
		tb.Fatalf("create chat: %d %s", rec.Code, rec.Body)
	}
	f.chatID = created.Data.ID
	return f
}

func (f *fixture) request(method, path, body string) *http.Request {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, path, nil)
	} else {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
	}
	r.Header.Set("Cookie", f.cookie)
	return r
}

// callBudget is a request and the DynamoDB calls it may make.
type callBudget struct {
	name, method, path, body string
	status                   int
	calls                    int64
}

// callBudgets are the DynamoDB calls each request may make: the session
// lookup (one read) plus what the endpoint itself needs. Posting a message
// and the stream also count the user's rate-limit window (one UpdateItem,
// shared/ratelimit). Posting a message takes the chat's generation lease
// (one conditional UpdateItem) before calling the model, and stores both
// messages with the lease's release in one transaction; the stream takes
// the lease (with its log's head, one conditional UpdateItem), stores its
// user message and the streaming reply in one transaction, reads the chat
// once (no delete began meanwhile), and at its end
// stores the reply, its last events and the lease's release, one write
// each. Each model
// call records its usage with one UpdateItem right after the call (its
// settle, shared/usage), so that a reply that fails to save still counts;
// without a budget nothing is reserved before the call.
func callBudgets(f *fixture) []callBudget {
	return []callBudget{
		{"liveness (no storage)", "GET", "/api/liveness", "", 200, 0},
		{"session", "GET", "/api/auth/session", "", 200, 1},
		{"models", "GET", "/api/models", "", 200, 1},
		{"set preference", "POST", "/api/users/" + f.userID + "/model-preference", `{"modelId":"builtin"}`, 200, 2},
		{"preference of another user", "POST", "/api/users/00000000-0000-4000-8000-000000000000/model-preference", `{"modelId":"builtin"}`, 403, 1},
		// + the user's MCP servers (one Query, then kept 5 s per function:
		// the first request of a user in each function pays it).
		{"tools (cached catalog)", "GET", "/api/tools", "", 200, 2},
		{"create chat", "POST", "/api/chats", `{"title":"x"}`, 201, 2},
		{"get chat", "GET", "/api/chats/" + f.chatID, "", 200, 2},
		{"rename chat", "PATCH", "/api/chats/" + f.chatID, `{"title":"y"}`, 200, 2},
		{"list chats", "GET", "/api/users/" + f.userID + "/chats?limit=10", "", 200, 2},
		{"list messages", "GET", "/api/chats/" + f.chatID + "/messages", "", 200, 2},
		{"post message", "POST", "/api/chats/" + f.chatID + "/messages", `{"content":"hi","modelId":"builtin"}`, 201, 7},
		{"post message, preferred model", "POST", "/api/chats/" + f.chatID + "/messages", `{"content":"hi"}`, 201, 7},
		{"stream", "POST", "/api/chats/" + f.chatID + "/messages/stream", `{"content":"hi","modelId":"builtin","userId":"` + f.userID + `"}`, 200, 11},
	}
}

// TestDynamoDBCallBudget holds each endpoint to its DynamoDB call budget:
// an authenticated GET costs exactly the session read plus what the
// endpoint needs.
func TestDynamoDBCallBudget(t *testing.T) {
	f := newFixture(t)
	checkCalls(t, f, callBudgets(f))
}

// checkCalls makes each request of cases in turn and checks its status
// and its count of DynamoDB calls.
func checkCalls(t *testing.T, f *fixture, cases []callBudget) {
	t.Helper()
	for _, tt := range cases {
		f.counter.Reset()
		rec := httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, f.request(tt.method, tt.path, tt.body))
		if rec.Code != tt.status {
			t.Errorf("%s: status %d, want %d: %s", tt.name, rec.Code, tt.status, rec.Body)
		}
		if got := f.counter.Count(); got != tt.calls {
			t.Errorf("%s: %d DynamoDB calls, want %d", tt.name, got, tt.calls)
		}
	}
}

// TestDynamoDBCallBudgetLargeToolResult: a reply's DynamoDB calls do not
// depend on the size of its tool result. A reply that calls json_query
// costs 8 calls (the 6 of a reply, the tool gate's policy read, the
// second model turn's usage), whether the result is 100 bytes, exactly
// chat.ValueBound, one byte over (kept in the blob store, which is not
// DynamoDB) or 589 KB (the report's reproduction, which could not be
// saved). The stream's start and end are the same transactions whatever
// the size; its log writes follow its duration (BenchmarkReplyWrites).
func TestDynamoDBCallBudgetLargeToolResult(t *testing.T) {
	f := newFixture(t)
	query := func(q string) string {
		b, _ := json.Marshal(map[string]string{"modelId": "builtin",
			"content": `run json_query with {"input": 1, "query": ` + strconv.Quote(q) + `}`})
		return string(b)
	}
	x := func(n int) string { return `"x" * ` + strconv.Itoa(n-len(`{"result":""}`)) }
	path := "/api/chats/" + f.chatID + "/messages"
	checkCalls(t, f, []callBudget{
		// The first pays the Query of the user's MCP servers (kept 5 s).
		{"post message, 100-byte tool result", "POST", path, query(x(100)), 201, 9},
		{"post message, tool result at the bound", "POST", path, query(x(chat.ValueBound)), 201, 8},
		{"post message, tool result one byte over", "POST", path, query(x(chat.ValueBound + 1)), 201, 8},
		{"post message, 589 KB tool result", "POST", path, query(`[range(100000)] | map(tostring) | join(" ")`), 201, 8},
	})
}

// TestDynamoDBCallBudgetStreamedToolResult holds a streamed reply that
// calls json_query to its DynamoDB calls and write units, for tool results
// up to chat.ValueBound (the 32 KiB kept inline): the 10 of a streamed
// reply (session, rate limit, conversation Query, the chat's lease with
// the log's head, the start transaction with the user message and the
// reply, the chat's read, the usage of the model call, then the reply,
// the log's last events and the lease's release), the tool gate's policy
// read and the second model turn's usage: 12, plus one PutItem per write of the log
// that its events fill (job.BatchFill: a result larger than that is
// written as it comes, once, instead of twice in the end's transaction).
// The clock stands still, so the event log's writer never writes on its
// delay or its heartbeat: what it writes does not depend on the machine's
// speed.
func TestDynamoDBCallBudgetStreamedToolResult(t *testing.T) {
	at := time.Now()
	f := newFixtureAt(t, func() time.Time { return at })
	stream := func(q string) string {
		b, _ := json.Marshal(map[string]string{"modelId": "builtin", "userId": f.userID,
			"content": `run json_query with {"input": 1, "query": ` + strconv.Quote(q) + `}`})
		return string(b)
	}
	x := func(n int) string { return `"x" * ` + strconv.Itoa(n-len(`{"result":""}`)) }
	for _, tt := range []struct {
		size       int
		calls      int64
		writeUnits float64
	}{
		{100, 13, 16}, // the first pays the Query of the user's MCP servers (kept 5 s)
		{16 << 10, 16, 83},
		{chat.ValueBound, 17, 148},
	} {
		f.counter.Reset()
		f.meter.Reset()
		rec := httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, f.request("POST", "/api/chats/"+f.chatID+"/messages/stream", stream(x(tt.size))))
		calls, units := f.counter.Count(), f.meter.Snapshot().WriteUnits
		body := rec.Body.String()
		if rec.Code != 200 || !strings.Contains(body, `"type":"tool_result"`) || !strings.Contains(body, `"reason":"completed"`) || strings.Contains(body, `"truncated"`) {
			t.Fatalf("%d-byte tool result: %d %.500s", tt.size, rec.Code, body)
		}
		if calls != tt.calls || units != tt.writeUnits {
			t.Errorf("stream with a %d-byte tool result: %d DynamoDB calls and %v write units, want %d and %v", tt.size, calls, units, tt.calls, tt.writeUnits)
			for k, c := range f.meter.ByKind() {
				t.Logf("  %s: %d calls, %v write units", k, c.Calls(), c.WriteUnits)
			}
		}
	}
}

// TestDynamoDBCallBudgetWithTokenBudget: with USER_MONTHLY_TOKEN_BUDGET
// set, a reply costs one more call than without (above): the reservation
// of its model call, one conditional UpdateItem before anything is stored
// (a budget with room for the whole output cap needs no second try). The
// usage report is the session read and one GetItem.
func TestDynamoDBCallBudgetWithTokenBudget(t *testing.T) {
	f := newFixture(t, "USER_MONTHLY_TOKEN_BUDGET", "1000000000")
	checkCalls(t, f, []callBudget{
		{"post message", "POST", "/api/chats/" + f.chatID + "/messages", `{"content":"hi","modelId":"builtin"}`, 201, 8},
		{"stream", "POST", "/api/chats/" + f.chatID + "/messages/stream", `{"content":"hi","modelId":"builtin","userId":"` + f.userID + `"}`, 200, 12},
		{"usage", "GET", "/api/users/" + f.userID + "/usage", "", 200, 2},
	})
}

// BenchmarkEndpoints measures each endpoint in process against the
// embedded engine, reporting DynamoDB calls per request. The liveness
// endpoint (no storage) is the floor the others are compared against.
func BenchmarkEndpoints(b *testing.B) {
	f := newFixture(b)
	for _, tt := range callBudgets(f) {
		if tt.method == "POST" && tt.status/100 == 2 && !strings.Contains(tt.name, "preference") {
			continue // writes that grow the data would skew later iterations
		}
		b.Run(strings.NewReplacer(" ", "_", ",", "").Replace(tt.name), func(b *testing.B) {
			f.counter.Reset()
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				f.stack.API.ServeHTTP(rec, f.request(tt.method, tt.path, tt.body))
				if rec.Code != tt.status {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			b.ReportMetric(float64(f.counter.Count())/float64(b.N), "ddbcalls/op")
		})
	}
}

// BenchmarkStreamFirstByte measures, over real loopback HTTP with the
// built-in model, the time to the stream's first byte and to its start
// event (the user message is stored before start), reported as p50/p99.
func BenchmarkStreamFirstByte(b *testing.B) {
	f := newFixture(b)
	srv := httptest.NewServer(f.stack.API)
	defer srv.Close()
	body := `{"content":"hi","modelId":"builtin","userId":"` + f.userID + `"}`
	var ttfb, toStart []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		// A fresh chat per request keeps the conversation (read each time) small.
		rec := httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, f.request("POST", "/api/chats", `{}`))
		var c struct{ Data struct{ ID string } }
		_ = json.Unmarshal(rec.Body.Bytes(), &c)

		req, _ := http.NewRequest("POST", srv.URL+"/api/chats/"+c.Data.ID+"/messages/stream", strings.NewReader(body))
		req.Header.Set("Cookie", f.cookie)
		req.Header.Set("Accept", "text/event-stream")
		start := time.Now()
		resp, err := httpClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		rd := bufio.NewReader(resp.Body)
		if _, err := rd.Peek(1); err != nil {
			b.Fatal(err)
		}
		ttfb = append(ttfb, time.Since(start))
		line, err := rd.ReadString('\n')
		if strings.HasPrefix(line, "id: ") { // the start event's SSE id
			line, err = rd.ReadString('\n')
		}
		if err != nil || !strings.Contains(line, `"type":"start"`) {
			b.Fatalf("first data line %q: %v", line, err)
		}
		toStart = append(toStart, time.Since(start))
		_, _ = io.Copy(io.Discard, rd)
		resp.Body.Close()
	}
	b.ReportMetric(float64(latency.Percentile(ttfb, 0.5).Nanoseconds()), "ttfb-p50-ns")
	b.ReportMetric(float64(latency.Percentile(ttfb, 0.99).Nanoseconds()), "ttfb-p99-ns")
	b.ReportMetric(float64(latency.Percentile(toStart, 0.5).Nanoseconds()), "start-p50-ns")
	b.ReportMetric(float64(latency.Percentile(toStart, 0.99).Nanoseconds()), "start-p99-ns")
}

// streamReply streams "count to n slowly" in a fresh chat over srv to its
// end and returns the reply's message id.
func (f *fixture) streamReply(tb testing.TB, srv *httptest.Server, n int) string {
	tb.Helper()
	rec := httptest.NewRecorder()
	f.stack.API.ServeHTTP(rec, f.request("POST", "/api/chats", `{}`))
	var c struct{ Data struct{ ID string } }
	_ = json.Unmarshal(rec.Body.Bytes(), &c)
	f.chatID = c.Data.ID
	body := `{"content":"count to ` + strconv.Itoa(n) + ` slowly","modelId":"builtin","userId":"` + f.userID + `"}`
	req, _ := http.NewRequest("POST", srv.URL+"/api/chats/"+c.Data.ID+"/messages/stream", strings.NewReader(body))
	req.Header.Set("Cookie", f.cookie)
	resp, err := httpClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(raw), `"reason":"completed"`) || strings.Count(string(raw), `"type":"content"`) != n {
		tb.Fatalf("reply: %s", raw)
	}
	_, after, _ := strings.Cut(string(raw), `"messageId":"`)
	id, _, _ := strings.Cut(after, `"`)
	return id
}

// BenchmarkReplyWrites streams replies of the built-in model's "count to N
// slowly" (N content events, 100 ms apart) to their end over loopback
// HTTP and counts the DynamoDB calls of each whole request: the session
// read, the rate limit, the conversation Query, the start transaction,
// then the event log's writes and the end, and their write units. The
// log's writes follow the reply's duration (at most one per 400 ms) or its
// bytes (one per job.BatchFill), whichever comes first.
func BenchmarkReplyWrites(b *testing.B) {
	for _, n := range []int{10, 50, 200} {
		b.Run("count_to_"+strconv.Itoa(n), func(b *testing.B) {
			f := newFixture(b)
			srv := httptest.NewServer(f.stack.API)
			defer srv.Close()
			var calls int64
			var units float64
			for b.Loop() {
				f.counter.Reset()
				f.meter.Reset()
				f.streamReply(b, srv, n)
				calls += f.counter.Count()
				units += f.meter.Snapshot().WriteUnits
			}
			b.ReportMetric(float64(calls)/float64(b.N), "ddbcalls/op")
			b.ReportMetric(units/float64(b.N), "ddbwriteunits/op")
			b.ReportMetric(float64(n+2), "events/op")
			b.ReportMetric(float64(calls)/float64(b.N)/(float64(n)/10), "ddbcalls/streamed-s")
		})
	}
}

// BenchmarkResumeFirstEvent measures, over loopback HTTP, the time from a
// resume request (GET .../messages/stream with Last-Event-ID) to its first
// replayed event, on a finished reply of 50 events: the session read, the
// rate limit, the chat read and one Query of the log. Its floor,
// liveness_over_http, is GET /api/liveness over the same loopback HTTP.
// Reported as p50/p99.
func BenchmarkResumeFirstEvent(b *testing.B) {
	f := newFixture(b)
	srv := httptest.NewServer(f.stack.API)
	defer srv.Close()
	id := f.streamReply(b, srv, 48)
	b.Run("liveness_over_http", func(b *testing.B) {
		var d []time.Duration
		for b.Loop() {
			start := time.Now()
			resp, err := http.Get(srv.URL + "/api/liveness")
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			d = append(d, time.Since(start))
		}
		latency.Report(b, d)
	})
	b.Run("resume_first_event", func(b *testing.B) {
		var d []time.Duration
		f.counter.Reset()
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest("GET", srv.URL+"/api/chats/"+f.chatID+"/messages/stream", nil)
			req.Header.Set("Cookie", f.cookie)
			req.Header.Set("Last-Event-ID", id+":10")
			start := time.Now()
			resp, err := httpClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			rd := bufio.NewReader(resp.Body)
			line, err := rd.ReadString('\n')
			if err != nil || line != "id: "+id+":11\n" {
				b.Fatalf("first line %q: %v", line, err)
			}
			d = append(d, time.Since(start))
			_, _ = io.Copy(io.Discard, rd)
			resp.Body.Close()
		}
		b.ReportMetric(float64(f.counter.Count())/float64(b.N), "ddbcalls/op")
		latency.Report(b, d)
	})
}

// BenchmarkListMessages1000 reads a chat of 1,000 messages (one Query of
// its item collection, paged by DynamoDB's 1 MB limit) and reports p50/p99.
func BenchmarkListMessages1000(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	chats := store.NewChats(f.stack.DB, "data")
	c, err := chats.Chat(ctx, f.chatID)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().UTC()
	for i := 0; i < 1000; i += 2 {
		u := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "question number " + strconv.Itoa(i), CreatedAt: t0.Add(time.Duration(i) * time.Millisecond)}
		a := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "assistant", Content: strings.Repeat("answer ", 30), ModelID: "builtin", CreatedAt: t0.Add(time.Duration(i+1) * time.Millisecond)}
		if err := chats.AddMessages(ctx, c, u, a); err != nil {
			b.Fatal(err)
		}
	}
	var d []time.Duration
	f.counter.Reset()
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		rec := httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, f.request("GET", "/api/chats/"+f.chatID+"/messages", ""))
		d = append(d, time.Since(start))
		if rec.Code != 200 || strings.Count(rec.Body.String(), `"role"`) != 1000 {
			b.Fatalf("status %d, %d messages", rec.Code, strings.Count(rec.Body.String(), `"role"`))
		}
	}
	b.ReportMetric(float64(f.counter.Count())/float64(b.N), "ddbcalls/op")
	latency.Report(b, d)
}

// BenchmarkApplyProposal measures applying a proposal (one consistent read
// of the workflow and the proposal, one transaction) in process, with its
// DynamoDB calls per apply (the session read included); making each
// proposal is outside the timing.
func BenchmarkApplyProposal(b *testing.B) {
	f := newFixture(b)
	var calls int64
	var d []time.Duration
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// A workflow per proposal keeps the collection the proposal is
		// made from (its conversation) the same size every time.
		rec := httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, f.request("POST", "/api/workflows", `{"userId":"`+f.userID+`","name":"bench"}`))
		var wf struct{ Data struct{ ID string } }
		if err := json.Unmarshal(rec.Body.Bytes(), &wf); err != nil || rec.Code != 201 {
			b.Fatalf("create workflow: %d %s", rec.Code, rec.Body)
		}
		rec = httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, f.request("POST", "/api/workflows/"+wf.Data.ID+"/messages", `{"content":"rename workflow to bench `+strconv.Itoa(i)+`","modelId":"builtin"}`))
		var msg struct {
			Data struct {
				AssistantMessage struct{ Proposal struct{ ID string } } `json:"assistantMessage"`
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &msg); err != nil || msg.Data.AssistantMessage.Proposal.ID == "" {
			b.Fatalf("propose: %d %s", rec.Code, rec.Body)
		}
		f.counter.Reset()
		b.StartTimer()
		start := time.Now()
		rec = httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, f.request("POST", "/api/workflows/"+wf.Data.ID+"/messages/apply", `{"proposalId":"`+msg.Data.AssistantMessage.Proposal.ID+`"}`))
		d = append(d, time.Since(start))
		if rec.Code != 200 {
			b.Fatalf("apply: %d %s", rec.Code, rec.Body)
		}
		calls += f.counter.Count()
	}
	b.ReportMetric(float64(calls)/float64(b.N), "ddbcalls/op")
	latency.Report(b, d)
}

// httpClient is the tests' client, on a transport of its own: every
// httptest.Server.Close calls CloseIdleConnections on
// http.DefaultTransport, which breaks a request of a parallel test that is
// about to reuse one of its connections.
var httpClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

// replyBudget is a streamed reply of the stand-in model (make cost's) and
// the DynamoDB calls and write units it may cost.
type replyBudget struct {
	name, model string
	tokens      int
	calls       int64
	writeUnits  float64
}

// TestDynamoDBReplyBudget holds make cost's two streamed replies (150
// and 1,200 tokens of the stand-in model, here as fast as it streams) to
// their DynamoDB calls and write units, as the embedded engine reports
// them (ReturnConsumedCapacity, DynamoDB's rules). The clock stands
// still, so the event log writes only when its events fill a write
// (job.BatchFill): at make cost's pace (60 tokens a second, a write at
// most every 500 ms) the same writes happen, plus one lease renewal every
// 15 s. The calls: the session, the rate limit, the conversation Query,
// the chat's generation mark (the log's head), the start transaction
// (user message, reply), the read of the chat that tells no delete began
// meanwhile, one PutItem per filled
// write of the log, the usage of the model call, then the end: the reply,
// the last events, the mark's release.
func TestDynamoDBReplyBudget(t *testing.T) {
	w := measure.Workload{Short: 150, Long: 1200, Pace: measure.Pace{TokensPerSecond: 1e6}}
	model := measure.StartModel(w)
	defer model.Close()
	at := time.Now()
	var env []string
	for k, v := range measure.Env(model.URL) {
		env = append(env, k, v)
	}
	f := newFixtureAt(t, func() time.Time { return at }, env...)
	for _, tt := range []replyBudget{
		// The first pays the Query of the user's MCP servers (kept 5 s).
		{"short reply", measure.ShortModel, w.Short, 17, 22},
		{"long reply", measure.LongModel, w.Long, 62, 71},
	} {
		f.counter.Reset()
		f.meter.Reset()
		body, _ := json.Marshal(map[string]string{"content": "Answer at the length you were made for.", "modelId": "openai/" + tt.model, "userId": f.userID})
		rec := httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, f.request("POST", "/api/chats/"+f.chatID+"/messages/stream", string(body)))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"reason":"completed"`) {
			t.Fatalf("%s: %d %.500s", tt.name, rec.Code, rec.Body)
		}
		got := f.meter.Snapshot()
		if calls := f.counter.Count(); calls != tt.calls || got.WriteUnits != tt.writeUnits {
			t.Errorf("%s: %d DynamoDB calls and %v write units, want %d and %v", tt.name, calls, got.WriteUnits, tt.calls, tt.writeUnits)
			for k, c := range f.meter.ByKind() {
				t.Logf("  %s: %d calls, %v write units", k, c.Calls(), c.WriteUnits)
			}
		}
	}
}

// templatePath is the SAM template whose IAM policies the tests' stacks
// enforce (LOCAL_IAM_TEMPLATE).
const templatePath = "../../template.yaml"

// checkIAM fails tb for every DynamoDB call of s that its function's
// IAM policy refused, including the calls whose error the code logged
// and went on from.
func checkIAM(tb testing.TB, s *local.Stack) {
	tb.Helper()
	if s.IAM == nil {
		return
	}
	for _, d := range s.IAM.Denied() {
		tb.Errorf("AccessDenied in AWS: %s", d)
	}
}
