// Package faults_test injects DynamoDB and tool server failures into the
// whole service, driven over real HTTP: every test starts its own embedded
// engine (dynamolocal.Start) behind a fault-injecting proxy, so that
// emulated failures never leak into other tests.
//
// The proxy sees every attempt the SDK makes (the store.CallCounter counts
// operations, once each however often they are retried), so that the
// difference between the two is the number of retries.
package faults_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/truora/minidyn/server"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/runnerfn"
	"github.com/workflowchat/service/functions/assembly/streamfn"
	"github.com/workflowchat/service/functions/assembly/workflowsfn"
	"github.com/workflowchat/service/infra/dynamolocal"
	"github.com/workflowchat/service/infra/local"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/proposal"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// ---------------------------------------------------------------------------
// DynamoDB fault proxy

// fault is an AWS JSON 1.0 error answer, as DynamoDB sends it.
type fault struct {
	status int
	body   string
	// drop closes the connection without an answer instead.
	drop bool
}

func awsError(status int, typ, msg string) fault {
	b, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + typ, "message": msg})
	return fault{status: status, body: string(b)}
}

// txCancelled is a TransactionCanceledException with the given reasons.
func txCancelled(reasons ...string) fault {
	type reason struct {
		Code    string
		Message string `json:",omitempty"`
	}
	rs := make([]reason, len(reasons))
	for i, r := range reasons {
		rs[i] = reason{Code: r}
		if r != "None" {
			rs[i].Message = r
		}
	}
	b, _ := json.Marshal(map[string]any{
		"__type":              "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
		"Message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(reasons, ", ") + "]",
		"CancellationReasons": rs,
	})
	return fault{status: http.StatusBadRequest, body: string(b)}
}

var (
	throttled  = awsError(400, "ThrottlingException", "Rate of requests exceeds the allowed throughput.")
	throughput = awsError(400, "ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded.")
	internal   = awsError(500, "InternalServerError", "Internal server error")
)

// rule fails the requests of one operation (and table): it lets the first
// skip matching requests through, then fails times of them (<0: all).
type rule struct {
	op, table   string
	skip, times int
	fault       fault
}

// wireCall is one request the proxy saw.
type wireCall struct {
	op       string
	tables   []string
	status   int
	injected bool
}

// ddbProxy forwards requests to the engine, failing those a rule matches.
type ddbProxy struct {
	srv *httptest.Server
	rp  *httputil.ReverseProxy

	mu    sync.Mutex
	rules []*rule
	calls []wireCall
}

func newDDBProxy(t *testing.T, engineURL string) *ddbProxy {
	u, err := url.Parse(engineURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &ddbProxy{rp: httputil.NewSingleHostReverseProxy(u)}
	p.rp.ErrorLog = nil
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *ddbProxy) add(r rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &r)
}

func (p *ddbProxy) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// mark returns the position in the call log, for since.
func (p *ddbProxy) mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

// since returns the calls logged after mark m.
func (p *ddbProxy) since(m int) []wireCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]wireCall(nil), p.calls[m:]...)
}

func (p *ddbProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	tables := tablesOf(body)
	p.mu.Lock()
	var hit *fault
	for _, ru := range p.rules {
		if (ru.op != "" && ru.op != op) || (ru.table != "" && !contains(tables, ru.table)) {
			continue
		}
		if ru.skip > 0 {
			ru.skip--
			continue
		}
		if ru.times == 0 {
			continue
		}
		if ru.times > 0 {
			ru.times--
		}
		f := ru.fault
		hit = &f
		break
	}
	if hit != nil {
		p.calls = append(p.calls, wireCall{op: op, tables: tables, status: hit.status, injected: true})
		p.mu.Unlock()
		if hit.drop {
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-Requestid", "fault-injected")
		w.WriteHeader(hit.status)
		_, _ = io.WriteString(w, hit.body)
		return
	}
	p.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w, status: 200}
	p.rp.ServeHTTP(sw, r)
	p.mu.Lock()
	p.calls = append(p.calls, wireCall{op: op, tables: tables, status: sw.status})
	p.mu.Unlock()
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// tablesOf returns the tables a request names: TableName anywhere and the
// keys of RequestItems.
func tablesOf(body []byte) []string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	set := map[string]bool{}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, c := range x {
				switch k {
				case "TableName":
					if s, ok := c.(string); ok {
						set[s] = true
					}
				case "RequestItems":
					if m, ok := c.(map[string]any); ok {
						for t := range m {
							set[t] = true
						}
					}
				case "Item", "Key", "ExpressionAttributeValues":
					continue // data, not structure
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	return out
}

// ---------------------------------------------------------------------------
// Tool server front

// toolFront serves the stack's tool server on a URL known before the stack
// exists. It can be made slow (runTool waits for the caller to give up) or
// shut (its port closed: connection refused).
type toolFront struct {
	srv       *httptest.Server
	h         atomic.Pointer[http.Handler]
	slow      atomic.Bool
	closeOnce sync.Once
}

func newToolFront(t *testing.T) *toolFront {
	f := &toolFront{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if f.slow.Load() && bytes.Contains(body, []byte(`"runTool"`)) {
			select { // far longer than any client timeout of these tests
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
		(*f.h.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(f.shut)
	return f
}

// shut closes the tool server's port.
func (f *toolFront) shut() { f.closeOnce.Do(f.srv.Close) }

// closedURL returns the URL of a loopback port nobody listens on.
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

// ---------------------------------------------------------------------------
// The environment: a private engine, the proxy, the stack.

type envOptions struct {
	// toolURL, when set, is the tool server URL instead of the front's
	// (e.g. a closed port).
	toolURL string
	// toolTimeout bounds a tool server call of the wf server (chat stream
	// with tools, workflow runs); zero means 5 s.
	toolTimeout time.Duration
	// stepTimeout is the workflow step timeout; zero means the default.
	stepTimeout time.Duration
	// lease is GENERATION_LEASE (the lease of replies and durable runs);
	// empty means the default.
	lease string
}

type env struct {
	t       *testing.T
	engine  *dynamolocal.Engine
	proxy   *ddbProxy
	tools   *toolFront
	cfg     config.Config
	counter *store.CallCounter
	stack   *local.Stack
	// api serves stack.API: the REST API and the chat stream, as
	// local.New composes them.
	api *httptest.Server
	// wf serves the workflow function and the chat stream again, built by
	// the same builders, with toolTimeout on their tool server calls and
	// the step timeout of the options.
	wf     *httptest.Server
	userID string
	cookie string
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	eng, err := dynamolocal.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	e := &env{t: t, engine: eng, proxy: newDDBProxy(t, eng.URL), tools: newToolFront(t), counter: &store.CallCounter{}}
	toolURL := e.tools.srv.URL
	if o.toolURL != "" {
		toolURL = o.toolURL
	}
	vars := map[string]string{"DYNAMODB_ENDPOINT": e.proxy.srv.URL, "AWS_REGION": "us-east-1", "GENERATION_LEASE": o.lease}
	e.cfg, err = config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	hasher := &auth.Hasher{Memory: 64, Time: 1, Threads: 1}
	e.stack, err = local.New(context.Background(), e.cfg, local.Options{Counter: e.counter, Hasher: hasher, Logger: logger,
		ToolServerURL: toolURL, PingInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.stack.Close() })
	h := e.stack.Tools
	e.tools.h.Store(&h)
	e.api = httptest.NewServer(e.stack.API)
	t.Cleanup(e.api.Close)
	e.wf = httptest.NewServer(e.workflowStack(toolURL, hasher, logger, o))
	t.Cleanup(e.wf.Close)

	resp, body := e.call(e.api, "", "POST", "/api/auth/sign-up/email", `{"email":"owner@example.com","password":"password-1","name":"Owner"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("sign-up: %d %s", resp.StatusCode, body)
	}
	var su struct {
		Data struct{ User struct{ ID string } }
	}
	mustJSON(t, body, &su)
	e.userID = su.Data.User.ID
	for _, c := range resp.Cookies() {
		e.cookie = c.Name + "=" + c.Value
	}
	return e
}

// workflowStack mounts WorkflowsFunction and StreamFunction, built by their
// Lambda builders, on the stack's client and tables, with toolTimeout on
// their tool server calls and the step timeout of o, and a runner of
// their own with the same options.
func (e *env) workflowStack(toolURL string, hasher *auth.Hasher, logger *slog.Logger, o envOptions) http.Handler {
	t := e.t
	if o.toolTimeout == 0 {
		o.toolTimeout = 5 * time.Second
	}
	cfg := e.cfg
	cfg.MCPURL, cfg.MCPServiceKey = toolURL, e.stack.ServiceKey
	d := assembly.Deps{DB: e.stack.DB, Logger: logger, Hasher: hasher, ToolHTTP: &http.Client{Timeout: o.toolTimeout},
		PingInterval: time.Minute, StepTimeout: o.stepTimeout, Blobs: e.stack.Blobs}
	// The runs these functions start execute on a runner of the same
	// options (as RunnerFunction has its own tool client and step limit).
	inproc := &runs.InProcess{}
	d.Runs = inproc
	runner, err := runnerfn.Runner(context.Background(), cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	inproc.Runner = runner
	t.Cleanup(inproc.Wait)
	api := httpapi.NewRouter()
	for _, f := range []assembly.Function{workflowsfn.Workflows, streamfn.Stream} {
		r, err := f.Build(context.Background(), cfg, d)
		if err != nil {
			t.Fatal(err)
		}
		api.Mount(r, r.Patterns()...)
	}
	return httpapi.Stack(api, httpapi.Options{Logger: logger})
}

// call sends a request to srv with cookie ("" for none) and returns the
// response with its body read.
func (e *env) call(srv *httptest.Server, cookie, method, path, body string) (*http.Response, []byte) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp, b
}

// as calls srv as the signed-up user.
func (e *env) as(srv *httptest.Server, method, path, body string) (*http.Response, []byte) {
	e.t.Helper()
	return e.call(srv, e.cookie, method, path, body)
}

// ok calls srv as the user and requires a 2xx answer, decoding its data
// into out (when not nil).
func (e *env) ok(srv *httptest.Server, method, path, body string, out any) {
	e.t.Helper()
	resp, b := e.as(srv, method, path, body)
	if resp.StatusCode/100 != 2 {
		e.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		var env struct{ Data json.RawMessage }
		mustJSON(e.t, b, &env)
		mustJSON(e.t, env.Data, out)
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// withBackend runs fn on the engine's minidyn server (failure emulation).
func (e *env) withBackend(fn func(*server.Server)) { e.engine.WithBackend(fn) }

// ---------------------------------------------------------------------------
// Domain helpers

func (e *env) createChat() string {
	var c struct{ ID string }
	e.ok(e.api, "POST", "/api/chats", `{"title":"faults"}`, &c)
	return c.ID
}

func (e *env) postMessage(chatID string) {
	e.ok(e.api, "POST", "/api/chats/"+chatID+"/messages", `{"content":"hello"}`, nil)
}

func (e *env) chatTotal() (int, int) {
	var page struct {
		Chats []struct{ ID string }
		Total int
	}
	e.ok(e.api, "GET", "/api/users/"+e.userID+"/chats", "", &page)
	return page.Total, len(page.Chats)
}

func (e *env) messages(chatID string) []chat.Message {
	var l struct{ Messages []chat.Message }
	e.ok(e.api, "GET", "/api/chats/"+chatID+"/messages", "", &l)
	return l.Messages
}

func (e *env) createWorkflow() string {
	var w struct{ ID string }
	e.ok(e.wf, "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":"Faults"}`, e.userID), &w)
	return w.ID
}

// addStepMessage is a workflow chat message the built-in model answers
// with a proposal adding a json_query step.
const addStepMessage = `{"content":"add a step using json_query with {\"query\": \".a\", \"input\": {\"a\": 1}}","modelId":"builtin"}`

// propose posts addStepMessage and returns the proposal's id.
func (e *env) propose(wfID string) string {
	var ex proposal.Exchange
	e.ok(e.wf, "POST", "/api/workflows/"+wfID+"/messages", addStepMessage, &ex)
	if ex.AssistantMessage.Proposal == nil {
		e.t.Fatalf("no proposal in %+v", ex.AssistantMessage)
	}
	return ex.AssistantMessage.Proposal.ID
}

func (e *env) getWorkflow(id string) workflow.Workflow {
	var w workflow.Workflow
	e.ok(e.wf, "GET", "/api/workflows/"+id, "", &w)
	return w
}

func (e *env) wfMessages(id string) []workflow.Message {
	var l struct{ Messages []workflow.Message }
	e.ok(e.wf, "GET", "/api/workflows/"+id+"/messages", "", &l)
	return l.Messages
}

func (e *env) workflowTotal() int {
	var page struct{ Total int }
	e.ok(e.wf, "GET", "/api/users/"+e.userID+"/workflows", "", &page)
	return page.Total
}

// workflowWithStep returns a workflow whose one step runs json_query.
func (e *env) workflowWithStep() string { return e.workflowWithSteps(1) }

// workflowWithSteps returns a workflow of n json_query steps, each added
// by applying a proposal.
func (e *env) workflowWithSteps(n int) string {
	id := e.createWorkflow()
	for range n {
		p := e.propose(id)
		e.ok(e.wf, "POST", "/api/workflows/"+id+"/messages/apply", fmt.Sprintf(`{"proposalId":%q}`, p), nil)
	}
	return id
}

func (e *env) runs(chatID string) []workflow.Run {
	var l struct{ WorkflowRuns []workflow.Run }
	e.ok(e.wf, "GET", "/api/chats/"+chatID+"/workflow-runs", "", &l)
	return l.WorkflowRuns
}

// partition returns the sort keys of every item under pk in the Data
// table, read straight from the engine (not through the proxy).
func (e *env) partition(pk string) []string {
	e.t.Helper()
	db, err := store.Open(context.Background(), store.Options{Region: "us-east-1", Endpoint: e.engine.URL})
	if err != nil {
		e.t.Fatal(err)
	}
	var items []struct{ SK string }
	if err := db.Table(e.cfg.DataTable).Get("PK", pk).Consistent(true).All(context.Background(), &items); err != nil {
		e.t.Fatal(err)
	}
	sks := []string{}
	for _, it := range items {
		sks = append(sks, it.SK)
	}
	return sks
}

// ---------------------------------------------------------------------------
// Assertions

// errorBody is the standard error body.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Code    string `json:"code"`
}

// expectUnavailable requires a 503 STORAGE_UNAVAILABLE with Retry-After: 1
// and the standard error body.
func expectUnavailable(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	var eb errorBody
	_ = json.Unmarshal(body, &eb)
	if resp.StatusCode != http.StatusServiceUnavailable || eb.Code != "STORAGE_UNAVAILABLE" {
		t.Fatalf("got %d %s, want 503 STORAGE_UNAVAILABLE", resp.StatusCode, body)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
	if eb.Error != "Service Unavailable" || eb.Message == "" {
		t.Errorf("error body %s: want error \"Service Unavailable\" and a message", body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	if bytes.Contains(body, []byte("emulated")) || bytes.Contains(body, []byte("Throttling")) || bytes.Contains(body, []byte("InternalServerError")) {
		t.Errorf("the DynamoDB cause leaked to the client: %s", body)
	}
}

// quiesce waits until neither the wire nor the call counter has moved for
// a few hundred milliseconds: no DynamoDB call of work running in the
// background (a started run) is in flight. It gives up after patience;
// the comparison that follows then reports what it sees.
func (e *env) quiesce() {
	deadline := time.Now().Add(patience)
	calls, ops, still := e.proxy.mark(), e.counter.Count(), 0
	for still < 3 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		c, o := e.proxy.mark(), e.counter.Count()
		if c == calls && o == ops {
			still++
			continue
		}
		calls, ops, still = c, o, 0
	}
}

// expectRetries checks the attempts of the calls logged since mark m
// against the operations counted since ops: every failed operation was
// attempted exactly store.MaxAttempts times (failedOps of them; < 0: at
// least one), and the wire saw one attempt more than the counter counted
// operations per retry: MaxAttempts-1 per failed operation, none for the
// others.
func (e *env) expectRetries(t *testing.T, m int, ops int64, failedOps int) {
	t.Helper()
	calls := e.proxy.since(m)
	failed := 0
	for _, c := range calls {
		// A 400 from the engine (a failed condition) is an answer, not a
		// fault: it is not retried.
		if c.injected || c.status >= 500 {
			failed++
		}
	}
	operations := e.counter.Count() - ops
	retries := int64(len(calls)) - operations
	switch {
	case failedOps >= 0 && failed != failedOps*store.MaxAttempts,
		failedOps < 0 && (failed == 0 || failed%store.MaxAttempts != 0):
		t.Errorf("%d failed attempts on the wire, want MaxAttempts (%d) per failed operation (%d): %+v", failed, store.MaxAttempts, failedOps, calls)
	}
	if want := int64(failed / store.MaxAttempts * (store.MaxAttempts - 1)); retries != want {
		t.Errorf("%d retries (%d attempts on the wire − %d operations), want %d", retries, len(calls), operations, want)
	}
}

// ---------------------------------------------------------------------------
// Server-Sent Events

type event struct {
	Type     string          `json:"type"`
	ToolName string          `json:"toolName"`
	Result   json.RawMessage `json:"result"`
	Error    string          `json:"error"`
	Message  string          `json:"message"`
	Delta    string          `json:"delta"`
	Reason   string          `json:"reason"`
}

// stream posts a stream request to srv and reads its events until the
// stream ends, failing the test when it is not over within deadline.
func (e *env) stream(srv *httptest.Server, chatID, body string, deadline time.Duration) (*http.Response, []event, []byte) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/api/chats/"+chatID+"/messages/stream", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Cookie", e.cookie)
	start := time.Now()
	resp, err := httpClient.Do(req)
	if err != nil {
		e.t.Fatalf("stream: %v (after %s)", err, time.Since(start))
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return resp, nil, b
	}
	var events []event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			e.t.Fatalf("event %q: %v", line, err)
		}
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		e.t.Fatalf("stream did not end within %s: %v; events so far %+v", deadline, err, events)
	}
	if len(events) == 0 || events[len(events)-1].Type != chat.EventEnd {
		e.t.Fatalf("stream closed without an end event: %+v", events)
	}
	return resp, events, nil
}

func streamBody(e *env, content string, workflowID string) string {
	m := map[string]any{"content": content, "modelId": "builtin", "userId": e.userID}
	if workflowID != "" {
		m["workflowId"] = workflowID
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func eventsOf(evs []event, typ string) []event {
	var out []event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// httpClient is the tests' client, on a transport of its own: every
// httptest.Server.Close calls CloseIdleConnections on
// http.DefaultTransport, which breaks a request of a parallel test that is
// about to reuse one of its connections.
var httpClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
