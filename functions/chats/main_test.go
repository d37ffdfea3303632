package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/lambdahttp/lambdatest"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

// TestChatsFunctionEvents creates a chat, posts a message and reads the
// conversation back through recorded API Gateway events.
func TestChatsFunctionEvents(t *testing.T) {
	db := storetest.New(t)
	ctx := context.Background()
	const key = "chats-test-key-0123456789"
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{}))
	defer ts.Close()
	h, err := newHandler(ctx, db.Env(t, map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "ChatsFunction", "MCP_URL": ts.URL, "MCP_SERVICE_KEY": key, "LOG_LEVEL": "error"}))
	if err != nil {
		t.Fatal(err)
	}
	invoke := lambdahttp.NewAPIGatewayV2(h)
	me, err := auth.NewService(store.NewUsers(db.DB, db.Users(), db.Sessions()), &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, nil).
		SignUp(ctx, auth.Credentials{Email: "l@example.com", Password: "password-1x", Name: "L"})
	if err != nil {
		t.Fatal(err)
	}
	cookie := []string{auth.CookieName + "=" + me.Token}

	ev := lambdatest.LoadV2(t, "testdata/create-chat.json")
	ev.Cookies = cookie
	resp, err := invoke(ctx, ev)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	var created struct {
		Data struct{ ID, Title, UserID string }
	}
	lambdatest.DecodeBody(t, resp, &created)
	if created.Data.Title != "From Lambda" || created.Data.UserID != me.User.ID {
		t.Errorf("chat = %+v", created.Data)
	}

	for _, name := range []string{"post-message", "list-messages"} {
		ev := lambdatest.LoadV2(t, "testdata/"+name+".json")
		ev.RawPath = strings.Replace(ev.RawPath, "CHAT_ID", created.Data.ID, 1)
		ev.RequestContext.HTTP.Path = ev.RawPath
		ev.Cookies = cookie
		resp, err := invoke(ctx, ev)
		if err != nil || resp.StatusCode/100 != 2 || !strings.Contains(resp.Body, "hello from lambda") {
			t.Fatalf("%s: %d %s %v", name, resp.StatusCode, resp.Body, err)
		}
		if name == "list-messages" && strings.Count(resp.Body, `"role"`) != 2 {
			t.Errorf("messages = %s", resp.Body)
		}
	}

	// Stopping a reply that was never streamed: 404 GENERATION_NOT_FOUND.
	ev = lambdatest.LoadV2(t, "testdata/stop-reply.json")
	ev.RawPath = strings.Replace(ev.RawPath, "CHAT_ID", created.Data.ID, 1)
	ev.RequestContext.HTTP.Path = ev.RawPath
	ev.Cookies = cookie
	resp, err = invoke(ctx, ev)
	if err != nil || resp.StatusCode != 404 || !strings.Contains(resp.Body, `"code":"GENERATION_NOT_FOUND"`) {
		t.Errorf("stop: %d %s %v", resp.StatusCode, resp.Body, err)
	}

	if _, err := newHandler(ctx, func(k string) string { return map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "x"}[k] }); err == nil ||
		!strings.Contains(err.Error(), "DATA_TABLE") || !strings.Contains(err.Error(), "MCP_URL") {
		t.Errorf("config error = %v", err)
	}
}
