package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/tmaxmax/go-sse"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

// TestStreamFunctionEvent drives the stream function with a recorded
// function URL event and reads the events from the streaming body as they
// arrive: start comes before the reply is finished (the assistant message
// is stored streaming at start, completed at the end), tool events follow,
// end closes. A client that leaves does not stop a reply, and a GET event
// with Last-Event-ID resumes it.
func TestStreamFunctionEvent(t *testing.T) {
	db := storetest.New(t)
	ctx := context.Background()
	const key = "stream-test-key-0123456789"
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{}))
	defer ts.Close()
	h, err := newHandler(ctx, db.Env(t, map[string]string{
		"BLOB_BUCKET": "blobs", "BLOB_ENDPOINT": startFakeS3(t, "blobs"),
		"AWS_LAMBDA_FUNCTION_NAME": "StreamFunction", "RUNNER_FUNCTION": "RunnerFunction", "MCP_URL": ts.URL, "MCP_SERVICE_KEY": key, "BUILTIN_CHUNK_DELAY": "100ms", "LOG_LEVEL": "error",
		"ALLOWED_ORIGINS": "https://app.workflowchat.example", // the recorded event's frontend
	}))
	if err != nil {
		t.Fatal(err)
	}
	users := store.NewUsers(db.DB, db.Users(), db.Sessions())
	me, err := auth.NewService(users, &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, nil).
		SignUp(ctx, auth.Credentials{Email: "s@example.com", Password: "password-1x", Name: "S"})
	if err != nil {
		t.Fatal(err)
	}
	chats := store.NewChats(db.DB, db.Data())
	c := chat.Chat{ID: "7f1c2d3e-4b5a-4c6d-8e9f-0a1b2c3d4e5f", UserID: me.User.ID, Title: "t", CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := chats.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}

	b, err := os.ReadFile("testdata/stream.json")
	if err != nil {
		t.Fatal(err)
	}
	raw := strings.ReplaceAll(strings.ReplaceAll(string(b), "CHAT_ID", c.ID), "USER_ID", me.User.ID)
	var ev events.LambdaFunctionURLRequest
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatal(err)
	}
	ev.Cookies = []string{auth.CookieName + "=" + me.Token}

	resp, err := lambdahttp.NewFunctionURLStreaming(h)(ctx, &ev)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Headers["Content-Type"] != "text/event-stream" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Headers)
	}
	var types []string
	var deltas strings.Builder
	var startID string
	for e, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			t.Fatal(err)
		}
		var got chat.Event
		if err := json.Unmarshal([]byte(e.Data), &got); err != nil {
			t.Fatal(err)
		}
		types = append(types, got.Type)
		switch got.Type {
		case "start":
			startID = got.MessageID
			// Streaming, not buffering: the reply is not finished yet.
			if _, msgs, err := chats.Conversation(ctx, c.ID); err != nil || len(msgs) != 2 || msgs[1].Status != chat.StatusStreaming {
				t.Errorf("at start: %+v (%v), want the user message and the reply streaming", msgs, err)
			}
		case "content":
			deltas.WriteString(got.Delta)
		case "tool_result":
			if string(got.Result) != `{"result":1}` {
				t.Errorf("tool result = %s", got.Result)
			}
		case "end":
			if got.MessageID != startID {
				t.Errorf("end id %s != start id %s", got.MessageID, startID)
			}
		}
	}
	if got := strings.Join(types, ","); !strings.HasPrefix(got, "start,content") || !strings.Contains(got, "tool_call,tool_result,content") || !strings.HasSuffix(got, ",end") {
		t.Errorf("event order = %s", got)
	}
	_, msgs, err := chats.Conversation(ctx, c.ID)
	if err != nil || len(msgs) != 2 || msgs[1].ID != startID || msgs[1].Content != deltas.String() || msgs[1].ModelID != model.BuiltinID {
		t.Errorf("stored = %+v, %v; deltas %q", msgs, err, deltas.String())
	}

	// Cross-site and non-JSON writes with the user's cookie: refused with a
	// plain JSON error before any event, and nothing is stored.
	for _, tc := range []struct {
		name, header, value string
		status              int
		code                string
	}{
		{"foreign origin", "origin", "https://evil.example", 403, "ORIGIN_NOT_ALLOWED"},
		{"sibling subdomain", "origin", "https://evil.workflowchat.example", 403, "ORIGIN_NOT_ALLOWED"},
		{"text/plain body", "content-type", "text/plain", 415, "UNSUPPORTED_MEDIA_TYPE"},
	} {
		bad := ev
		bad.Headers = maps.Clone(ev.Headers)
		bad.Headers[tc.header] = tc.value
		resp, err := lambdahttp.NewFunctionURLStreaming(h)(ctx, &bad)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Headers["Content-Type"], "application/json") || !strings.Contains(string(body), `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %v %s, want %d %s", tc.name, resp.StatusCode, resp.Headers, body, tc.status, tc.code)
		}
	}
	if _, msgs, err := chats.Conversation(ctx, c.ID); err != nil || len(msgs) != 2 {
		t.Errorf("after the refused requests: %d messages (%v), want the 2 of the first reply", len(msgs), err)
	}

	// A client that leaves: the runtime stops reading the body (the pipe
	// is closed), the handler's writes fail, and the reply is still
	// generated to its end and saved whole.
	slow := ev
	slow.Body = `{"content":"count to 10 slowly","modelId":"builtin","userId":"` + me.User.ID + `"}`
	resp, err = lambdahttp.NewFunctionURLStreaming(h)(ctx, &slow)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("slow reply: %+v %v", resp, err)
	}
	var replyID string
	for e, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			t.Fatal(err)
		}
		var got chat.Event
		_ = json.Unmarshal([]byte(e.Data), &got)
		replyID = got.MessageID
		break
	}
	resp.Body.(io.Closer).Close()
	deadline := time.Now().Add(10 * time.Minute) // a bound for a stuck reply, not a measure: it counts for 1 s
	msgs = nil
	for time.Now().Before(deadline) {
		if _, msgs, err = chats.Conversation(ctx, c.ID); err == nil && len(msgs) == 4 && msgs[3].Status != chat.StatusStreaming {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(msgs) != 4 || msgs[3].ID != replyID || msgs[3].Status != chat.StatusCompleted || msgs[3].Content != "1 2 3 4 5 6 7 8 9 10 " {
		t.Fatalf("after the client left: %+v, want the reply %s completed", msgs, replyID)
	}

	// Resume it through a GET function URL event with Last-Event-ID: the
	// events after 9, the last one the end.
	resume := ev
	resume.Body = ""
	resume.RequestContext.HTTP.Method = "GET"
	resume.Headers = map[string]string{"accept": "text/event-stream", "last-event-id": replyID + ":9", "host": ev.Headers["host"]}
	resp, err = lambdahttp.NewFunctionURLStreaming(h)(ctx, &resume)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("resume: %+v %v", resp, err)
	}
	var ids []string
	var last chat.Event
	for e, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.LastEventID)
		last = chat.Event{}
		_ = json.Unmarshal([]byte(e.Data), &last)
	}
	if len(ids) != 3 || ids[0] != replyID+":10" || ids[2] != replyID+":12" || last.Type != "end" || last.Reason != chat.ReasonCompleted {
		t.Errorf("resumed ids %v, last %+v: want 10..12, the last the end", ids, last)
	}

	// Anonymous: a plain JSON 401 before any event.
	ev.Cookies = nil
	resp, err = lambdahttp.NewFunctionURLStreaming(h)(ctx, &ev)
	if err != nil || resp.StatusCode != 401 || !strings.HasPrefix(resp.Headers["Content-Type"], "application/json") {
		t.Errorf("anonymous: %+v %v", resp, err)
	}
}

// startFakeS3 serves an in-memory S3 holding bucket, for BLOB_ENDPOINT.
func startFakeS3(t *testing.T, bucket string) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithoutVersioning()).Server())
	t.Cleanup(srv.Close)
	return srv.URL
}
