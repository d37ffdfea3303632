//go:build linux

package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/sandbox/sandboxtest"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

// TestToolResourceLimits sends the inputs that used to take the service
// down to a dev server whose address space may grow by at most 1 GiB
// after start: jq programs allocating gigabytes (alone and two at once), a
// text_template whose nested ranges double a string, and CPU bombs (an
// endless jq recursion, an expr expression of 2.7e10 steps). Each memory
// bomb fails with 500 TOOL_RESOURCE_LIMIT, each CPU bomb with 504
// TOOL_TIMEOUT after its worker process was killed, and the service keeps
// answering. It also checks from /proc that the evaluators run in worker
// processes with their own address space and CPU limits.
func TestToolResourceLimits(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	pid := srv.cmd.Process.Pid
	if err := sandboxtest.LimitAddressSpace(pid, 1<<30); err != nil {
		t.Fatalf("cap the dev server: %v", err)
	}

	// The report's reproduction, through the chat and the built-in model.
	c := newClient(t, srv.API)
	signUpChatUser(t, c, "bomber@example.com")
	chat := newChat(t, c, map[string]any{"title": "bombs"})
	ex := sendMessage(t, c, chat.ID, map[string]any{"modelId": "builtin",
		"content": `run json_query with {"input": "x", "query": "(. * 2000000000) | length"}`})
	if calls := ex.Response.ToolCalls; len(calls) != 1 || !strings.Contains(string(calls[0].Result), "memory limit") {
		t.Errorf("chat tool calls %+v, want one json_query call whose result reports the memory limit", calls)
	}

	// The workers are child processes with their own limits.
	eventually(t, "a tool worker with its limits", func() bool { return len(sandboxtest.LimitedWorkers(pid)) > 0 })

	jqRepeat := map[string]any{"input": "x", "query": "(. * 2000000000) | length"}
	jqDouble := map[string]any{"input": strings.Repeat("x", 64), "query": "reduce range(24) as $i (.; .+.) | length"}
	memoryBombs := []struct {
		name, tool string
		input      map[string]any
	}{
		{"jq string repeat", "json_query", jqRepeat},
		{"jq doubling", "json_query", jqDouble},
		{"text_template nested range", "text_template", map[string]any{
			"template": `{{$x := "xxxxxxxx"}}{{range .a}}{{range $.a}}{{$x = printf "%s%s" $x $x}}{{end}}{{end}}{{len $x}}`,
			"values":   map[string]any{"a": []int{1, 2, 3, 4, 5, 6}},
		}},
	}
	for _, b := range memoryBombs {
		status, body := runTool(t, srv, b.tool, b.input)
		expectToolError(t, b.name, status, body, http.StatusInternalServerError, "TOOL_RESOURCE_LIMIT", "memory limit")
	}

	// Two at once.
	var wg sync.WaitGroup
	for i, in := range []map[string]any{jqRepeat, jqDouble} {
		wg.Go(func() {
			status, body := runTool(t, srv, "json_query", in)
			expectToolError(t, fmt.Sprintf("concurrent bomb %d", i), status, body, http.StatusInternalServerError, "TOOL_RESOURCE_LIMIT", "memory limit")
		})
	}
	wg.Wait()

	// The same failure through MCP: a tools/call result with isError.
	status, body := mcpCall(t, srv, "json_query", jqRepeat)
	var rpc struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &rpc); status != 200 || err != nil || !rpc.Result.IsError || len(rpc.Result.Content) != 1 ||
		!strings.HasPrefix(rpc.Result.Content[0].Text, "TOOL_RESOURCE_LIMIT: ") {
		t.Errorf("MCP tools/call bomb: %d %s, want an isError result with TOOL_RESOURCE_LIMIT", status, body)
	}

	// CPU bombs run until their tool's deadline. Then either the pool
	// killed the worker running one (it outlived its deadline), so one of
	// the warm workers is gone, or the evaluation honoured the deadline
	// the worker was given and stopped by itself; either way no worker
	// goes on burning CPU for it.
	cpuBombs := []struct {
		name, tool string
		input      map[string]any
	}{
		{"jq endless recursion", "json_query", map[string]any{"input": nil, "query": "def f: f; f"}},
		{"expr nested count", "math_evaluate", map[string]any{"expression": "let a = [" + strings.Repeat("1,", 2999) + "1]; count(a, count(a, count(a, true) > 0) > 0)"}},
	}
	for _, b := range cpuBombs {
		var before []int
		eventually(t, "a full pool of idle workers", func() bool {
			before = sandboxtest.LimitedWorkers(pid)
			return len(before) == tools.SandboxWorkers
		})
		status, body := runTool(t, srv, b.tool, b.input)
		expectToolError(t, b.name, status, body, http.StatusGatewayTimeout, "TOOL_TIMEOUT", "did not finish")
		// The answer may leave before the pool has reaped the worker.
		eventually(t, b.name+": the worker that ran it stopped, or every worker is idle", func() bool {
			after := sandboxtest.Workers(pid)
			return slices.ContainsFunc(before, func(p int) bool { return !slices.Contains(after, p) }) || idle(after)
		})
	}

	// The service still answers, and runs tools.
	select {
	case <-srv.done:
		t.Fatalf("the dev server exited: %v", srv.err)
	default:
	}
	if r := newClient(t, srv.API).do("GET", "/api/liveness", nil); r.Status != 200 {
		t.Errorf("liveness after the bombs: %d %s", r.Status, r.Body)
	}
	status, body = runTool(t, srv, "json_query", map[string]any{"input": map[string]any{"a": []int{1, 2, 3}}, "query": ".a | add"})
	var ran struct {
		Data toolserver.RunResult `json:"data"`
	}
	if err := json.Unmarshal(body, &ran); status != 200 || err != nil || ran.Data.Result["result"] != float64(6) {
		t.Errorf("json_query after the bombs: %d %s", status, body)
	}
}

// eventually waits up to patience for cond, failing the test otherwise.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(patience); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, patience)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// idle reports whether none of the workers uses CPU over 300ms (at most
// 5 clock ticks each, a worker's housekeeping): no evaluation runs on.
func idle(workers []int) bool {
	before := make([]int64, len(workers))
	for i, w := range workers {
		before[i], _ = sandboxtest.CPUTicks(w)
	}
	time.Sleep(300 * time.Millisecond)
	for i, w := range workers {
		if after, ok := sandboxtest.CPUTicks(w); ok && after-before[i] > 5 {
			return false
		}
	}
	return true
}

// runTool calls runTool on the dev server's tool server.
func runTool(t *testing.T, srv *server, tool string, input map[string]any) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"method": "runTool", "params": map[string]any{"toolId": tool, "input": input}})
	return postMCP(t, srv, body, nil)
}

// mcpCall calls an MCP tools/call on the dev server's tool server.
func mcpCall(t *testing.T, srv *server, tool string, args map[string]any) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	return postMCP(t, srv, body, map[string]string{"Accept": "application/json, text/event-stream"})
}

func postMCP(t *testing.T, srv *server, body []byte, header map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", srv.MCP, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(toolserver.ServiceKeyHeader, srv.Key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: patience}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", srv.MCP, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// expectToolError checks a tool server error answer.
func expectToolError(t *testing.T, name string, status int, body []byte, wantStatus int, wantCode, inMessage string) {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil || status != wantStatus || e.Code != wantCode || !strings.Contains(e.Message, inMessage) {
		t.Errorf("%s: %d %s, want %d %s with %q in the message", name, status, body, wantStatus, wantCode, inMessage)
	}
}
