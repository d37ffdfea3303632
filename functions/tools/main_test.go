package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/lambdahttp/lambdatest"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

const serviceKey = "tools-function-test-key-0123456789"

func TestToolsFunctionEvents(t *testing.T) {
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	mcp := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, serviceKey), httpapi.Options{Logger: slog.New(slog.DiscardHandler)}))
	defer mcp.Close()

	db := storetest.New(t)
	ctx := context.Background()
	h, err := newHandler(ctx, db.Env(t, map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME": "ToolsFunction", "MCP_URL": mcp.URL, "MCP_SERVICE_KEY": serviceKey, "LOG_LEVEL": "error",
	}))
	if err != nil {
		t.Fatal(err)
	}
	invoke := lambdahttp.NewAPIGatewayV2(h)
	svc := auth.NewService(store.NewUsers(db.DB, db.Users(), db.Sessions()), &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, time.Now)
	me, err := svc.SignUp(ctx, auth.Credentials{Email: "t@example.com", Password: "password-1x", Name: "T"})
	if err != nil {
		t.Fatal(err)
	}
	cookie := auth.CookieName + "=" + me.Token

	tests := []struct {
		name, event string
		anonymous   bool
		toolID      string // replaces json_query in the path
		status      int
		contains    []string
	}{
		{"list", "testdata/list-tools.json", false, "", 200, []string{`"tools":[`, `"id":"json_query"`, `"inputSchema":{`, `"category":"data"`}},
		{"search", "testdata/search-tools.json", false, "", 200, []string{`{"data":{"tools":[{"id":"json_query"`, `"total":`}},
		{"get", "testdata/get-tool.json", false, "", 200, []string{`"id":"json_query"`, `"outputSchema":{`, `"result"`}},
		{"get unknown", "testdata/get-tool.json", false, "no_such_tool", 404, []string{`"code":"TOOL_NOT_FOUND"`}},
		{"list without a session", "testdata/list-tools.json", true, "", 401, []string{`"code":"UNAUTHORIZED"`}},
		{"search without a session", "testdata/search-tools.json", true, "", 401, []string{`"code":"UNAUTHORIZED"`}},
		{"get without a session", "testdata/get-tool.json", true, "", 401, []string{`"code":"UNAUTHORIZED"`}},
	}
	for _, tt := range tests {
		ev := lambdatest.LoadV2(t, tt.event)
		if !tt.anonymous {
			ev.Cookies = []string{cookie}
		}
		if tt.toolID != "" {
			ev.RawPath = strings.Replace(ev.RawPath, "json_query", tt.toolID, 1)
			ev.RequestContext.HTTP.Path = ev.RawPath
			ev.PathParameters = map[string]string{"toolId": tt.toolID}
		}
		resp, err := invoke(ctx, ev)
		if err != nil || resp.StatusCode != tt.status {
			t.Errorf("%s: %d %s %v, want %d", tt.name, resp.StatusCode, resp.Body, err, tt.status)
			continue
		}
		for _, s := range tt.contains {
			if !strings.Contains(resp.Body, s) {
				t.Errorf("%s: body %s lacks %s", tt.name, resp.Body, s)
			}
		}
		if resp.StatusCode >= 400 && strings.Contains(resp.Body, serviceKey) {
			t.Errorf("%s: body leaks the service key", tt.name)
		}
	}
}

func TestToolsFunctionConfig(t *testing.T) {
	base := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "ToolsFunction", "USERS_TABLE": "u", "SESSIONS_TABLE": "s",
		"MCP_URL": "https://abc.lambda-url.us-east-1.on.aws/", "MCP_SERVICE_KEY": serviceKey}
	for _, missing := range []string{"USERS_TABLE", "SESSIONS_TABLE", "MCP_URL", "MCP_SERVICE_KEY"} {
		env := map[string]string{}
		for k, v := range base {
			if k != missing {
				env[k] = v
			}
		}
		_, err := newHandler(context.Background(), func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("without %s: err = %v", missing, err)
		}
		if err != nil && strings.Contains(err.Error(), serviceKey) {
			t.Errorf("the config error leaks the service key: %v", err)
		}
	}
	// Everything ToolsFunction receives in AWS is enough.
	if _, err := newHandler(context.Background(), func(k string) string { return base[k] }); err != nil {
		t.Errorf("with the template's environment: %v", err)
	}
}
