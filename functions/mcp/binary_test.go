//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/workflowchat/service/infra/gobuild"
	"github.com/workflowchat/service/shared/lambdahttp/lambdatest"
	"github.com/workflowchat/service/shared/sandbox/sandboxtest"
)

// TestMcpFunctionBinaryIsolatesTools builds McpFunction as it is deployed
// (production flags, no race detector) and runs it as Lambda does, behind
// a Runtime API served by the test, with its address space allowed to grow
// by 768 MiB, the function's memory (MemorySize in template.yaml, which
// Lambda passes as AWS_LAMBDA_FUNCTION_MEMORY_SIZE). So main's own wiring is under test:
// the binary starts itself as tool workers with their limits, a json_query
// allocating gigabytes is answered 500 TOOL_RESOURCE_LIMIT, and the next
// invocation is answered normally by the same process.
func TestMcpFunctionBinaryIsolatesTools(t *testing.T) {
	t.Parallel()
	bin := gobuild.ForTest(t, "bootstrap", ".", gobuild.LambdaFlags...)
	rt := newRuntimeAPI(t)
	cmd := exec.Command(bin)
	cmd.Env = []string{"AWS_LAMBDA_RUNTIME_API=" + rt.addr(), "AWS_LAMBDA_FUNCTION_NAME=McpFunction", "AWS_REGION=us-east-1",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=768",
		"MCP_SERVICE_KEY=" + testKey, "LOG_LEVEL=error"}
	var stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("function output:\n%s", stderr.String())
		}
	})
	select {
	case <-rt.ready:
	case err := <-exited:
		t.Fatalf("the function exited during init: %v\n%s", err, stderr.String())
	case <-time.After(patience):
		t.Fatal("the function did not ask for an event")
	}
	pid := cmd.Process.Pid
	if err := sandboxtest.LimitAddressSpace(pid, 768<<20); err != nil {
		t.Fatal(err)
	}

	event := lambdatest.LoadV2(t, "testdata/run-tool-json-query.json")
	bomb := event
	bomb.Body = `{"method":"runTool","params":{"toolId":"json_query","input":{"input":"x","query":"(. * 2000000000) | length"}}}`
	bomb.Headers = map[string]string{}
	for k, v := range event.Headers {
		if k != "content-length" {
			bomb.Headers[k] = v
		}
	}
	resp := rt.invoke(t, bomb)
	var e struct{ Error, Message, Code string }
	if err := json.Unmarshal([]byte(resp.Body), &e); err != nil || resp.StatusCode != 500 || e.Code != "TOOL_RESOURCE_LIMIT" || !strings.Contains(e.Message, "memory limit") {
		t.Fatalf("bomb: %d %s, want 500 TOOL_RESOURCE_LIMIT about the memory limit", resp.StatusCode, resp.Body)
	}

	resp = rt.invoke(t, event)
	if resp.StatusCode != 200 || !strings.Contains(resp.Body, `"result":{"result":["a"]}`) {
		t.Fatalf("json_query after the bomb: %d %s", resp.StatusCode, resp.Body)
	}
	// 768 MB holds 3 workers (mcpfn.SandboxSize); the one the bomb
	// stopped is replaced.
	for deadline := time.Now().Add(patience); len(sandboxtest.LimitedWorkers(pid)) != 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the function has tool workers %v with their limits (of %v), want 3", sandboxtest.LimitedWorkers(pid), sandboxtest.Workers(pid))
		}
	}
	select {
	case err := <-exited:
		t.Fatalf("the function exited: %v", err)
	default:
	}
}

// runtimeAPI is the part of the Lambda Runtime API a function's loop uses:
// it hands out one queued event per GET .../invocation/next and collects
// the responses.
type runtimeAPI struct {
	srv     *httptest.Server
	ready   chan struct{} // closed at the first GET .../next: init is over
	once    sync.Once
	events  chan invocation
	results chan invocation
	seq     atomic.Int64
}

type invocation struct {
	id   string
	body []byte
	err  bool // posted to .../error
}

func newRuntimeAPI(t *testing.T) *runtimeAPI {
	rt := &runtimeAPI{ready: make(chan struct{}), events: make(chan invocation), results: make(chan invocation, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		rt.once.Do(func() { close(rt.ready) })
		select {
		case ev := <-rt.events:
			w.Header().Set("Lambda-Runtime-Aws-Request-Id", ev.id)
			w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(40*time.Second).UnixMilli(), 10))
			w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:McpFunction")
			_, _ = w.Write(ev.body)
		case <-r.Context().Done():
		}
	})
	for _, kind := range []string{"response", "error"} {
		mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/"+kind, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			rt.results <- invocation{id: r.PathValue("id"), body: b, err: kind == "error"}
			w.WriteHeader(http.StatusAccepted)
		})
	}
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		t.Errorf("init error: %s", b)
		w.WriteHeader(http.StatusAccepted)
	})
	rt.srv = httptest.NewServer(mux)
	t.Cleanup(rt.srv.Close)
	return rt
}

func (rt *runtimeAPI) addr() string { return strings.TrimPrefix(rt.srv.URL, "http://") }

// invoke hands ev to the function and returns its response.
func (rt *runtimeAPI) invoke(t *testing.T, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("req-%d", rt.seq.Add(1))
	select {
	case rt.events <- invocation{id: id, body: body}:
	case <-time.After(patience):
		t.Fatal("the function did not ask for the event")
	}
	select {
	case res := <-rt.results:
		if res.id != id || res.err {
			t.Fatalf("invocation %s: got %s (error %v): %s", id, res.id, res.err, res.body)
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(res.body, &resp); err != nil {
			t.Fatalf("response %s: %v", res.body, err)
		}
		return resp
	case <-time.After(patience):
		t.Fatalf("no response within %s", patience)
	}
	return events.APIGatewayV2HTTPResponse{}
}

// patience bounds each wait for the function (to ask for an event, to
// answer it, to replace a worker): a bound for a stuck function, never a
// measure of its speed on a loaded machine.
const patience = 10 * time.Minute

// lockedBuffer collects the function's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
