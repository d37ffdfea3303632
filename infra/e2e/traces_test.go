package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/workflowchat/service/shared/tracing"
	"github.com/workflowchat/service/shared/tracing/otlp/otlptest"
)

// TestRunTrace runs one durable workflow run through the dev server
// binary with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an in-process OTLP
// receiver, stops the server (which exports what is left) and checks the
// span tree the receiver decoded: the request's server span, linked to
// the run's trace, whose id is the run id's bytes; the run's first span
// and its attempt under it; one span per step under the attempt; under
// each step the tool gate's span, the tool server client's span and,
// joined through traceparent over HTTP, the tool server's own spans. No
// attribute carries the steps' inputs.
func TestRunTrace(t *testing.T) {
	t.Parallel()
	recv := otlptest.NewReceiver(t)
	srv := durableServer(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+recv.URL, "OTEL_SERVICE_NAME=")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "traces@example.com")
	k := uuid.NewString() // the steps' input: must appear in no span
	wfID, chatID := countWorkflow(t, c, userID, countStep("test_count", k+"a", ""), countStep("test_count", k+"b", ""))

	r := c.do("POST", "/api/chats/"+chatID+"/workflow-runs", map[string]string{"workflowId": wfID})
	if r.Status != http.StatusCreated {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	var started struct{ Data durableRunJSON }
	r.decode(t, &started)
	run := started.Data
	if run.Status != "completed" {
		t.Fatalf("run %+v", run)
	}
	stopServer(t, srv) // exports the spans still batched
	spans := recv.Spans()

	runTrace := tracing.RunTraceID(run.ID).String()
	if runTrace != strings.ReplaceAll(run.ID, "-", "") {
		t.Fatalf("trace id %s, want run id %s's bytes", runTrace, run.ID)
	}
	t.Logf("the run's trace:\n%s", otlptest.Tree(spans, runTrace, "workflowchat.run.attempt", "workflowchat.step.index",
		"workflowchat.step.status", "rpc.method", "http.route", "http.response.status_code"))

	// The request that started the run: a server span of its own trace,
	// linked to the run's first span.
	var req *otlptest.Span
	for i, s := range spans {
		if s.Name == "POST /api/chats/{chatId}/workflow-runs" {
			req = &spans[i]
		}
	}
	if req == nil || req.Kind != tracepb.Span_SPAN_KIND_SERVER || req.Attrs["http.response.status_code"] != int64(201) ||
		req.Attrs["http.route"] != "/api/chats/{chatId}/workflow-runs" || req.Service != "workflowchat-devserver" {
		t.Fatalf("request span %+v", req)
	}
	t.Logf("the request's trace:\n%s", otlptest.Tree(spans, req.TraceID, "http.route", "http.response.status_code", "workflowchat.run.id"))
	runSpanID := tracing.RunSpanID(run.ID).String()
	if len(req.Links) != 1 || req.Links[0].TraceID != runTrace || req.Links[0].SpanID != runSpanID {
		t.Fatalf("request links %+v, want the run's span %s/%s", req.Links, runTrace, runSpanID)
	}

	// The run's trace, by parent.
	children := map[string][]otlptest.Span{}
	var root []otlptest.Span
	for _, s := range spans {
		if s.TraceID != runTrace {
			continue
		}
		if s.ParentSpanID == "" {
			root = append(root, s)
		}
		children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
	}
	named := func(parent, name string, kind tracepb.Span_SpanKind) []otlptest.Span {
		var out []otlptest.Span
		for _, s := range children[parent] {
			if s.Name == name && s.Kind == kind {
				out = append(out, s)
			}
		}
		return out
	}
	internal, client, server := tracepb.Span_SPAN_KIND_INTERNAL, tracepb.Span_SPAN_KIND_CLIENT, tracepb.Span_SPAN_KIND_SERVER
	if len(root) != 1 || root[0].Name != "workflow.run" || root[0].SpanID != runSpanID || len(root[0].Links) != 1 ||
		root[0].Links[0].SpanID != req.SpanID {
		t.Fatalf("roots of the run's trace %+v: want the one workflow.run span %s, linked to the request", root, runSpanID)
	}
	attempts := named(runSpanID, "workflow.run.attempt", internal)
	if len(attempts) != 1 || attempts[0].Attrs["workflowchat.run.attempt"] != int64(1) || attempts[0].Attrs["workflowchat.run.id"] != run.ID {
		t.Fatalf("attempts under the run's span: %+v", attempts)
	}
	steps := named(attempts[0].SpanID, "workflow.step test_count", internal)
	if len(steps) != 2 {
		t.Fatalf("%d step spans under the attempt, want 2", len(steps))
	}
	for i, step := range steps {
		if step.Attrs["workflowchat.step.index"] != int64(i) || step.Attrs["workflowchat.step.status"] != "completed" ||
			step.Attrs["gen_ai.tool.name"] != "test_count" {
			t.Errorf("step %d: %+v", i, step.Attrs)
		}
		gate := named(step.SpanID, "execute_tool test_count", internal)
		if len(gate) != 1 || gate[0].Attrs["gen_ai.operation.name"] != "execute_tool" {
			t.Fatalf("step %d: tool gate spans %+v", i, gate)
		}
		var call *otlptest.Span
		for _, s := range named(gate[0].SpanID, "POST /mcp", client) {
			if s.Attrs["rpc.method"] == "runTool" {
				call = &s
			}
		}
		if call == nil || call.Attrs["gen_ai.tool.name"] != "test_count" || call.Attrs["http.response.status_code"] != int64(200) {
			t.Fatalf("step %d: no runTool client span under the gate: %+v", i, children[gate[0].SpanID])
		}
		// The tool server continued the trace from the traceparent it got.
		toolServer := named(call.SpanID, "POST /mcp", server)
		if len(toolServer) != 1 || toolServer[0].Attrs["http.route"] != "/mcp" {
			t.Fatalf("step %d: tool server spans under the call %+v", i, children[call.SpanID])
		}
		if ran := named(toolServer[0].SpanID, "run_tool test_count", internal); len(ran) != 1 {
			t.Fatalf("step %d: the tool server's run_tool span: %+v", i, children[toolServer[0].SpanID])
		}
	}

	// Nothing of the user's input, session or address is in a span.
	for _, s := range spans {
		for key, v := range s.Attrs {
			if text := fmt.Sprint(v); strings.Contains(text, k) || strings.Contains(text, "traces@example.com") {
				t.Errorf("%s: attribute %s carries user content: %s", s.Name, key, text)
			}
		}
	}
}
