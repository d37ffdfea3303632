package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/workflowchat/service/functions/assembly/signingkeys/signingkeystest"
	"github.com/workflowchat/service/shared/blob/s3blob/s3blobtest"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/oauth/accesstoken"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
)

const secretARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:signing-keys-AbCdEf"

// TestMcpGatewayFunctionEvents drives the function's real wiring with
// function URL events as they arrive through CloudFront: without a token
// it answers 401 pointing to the metadata under the viewer's origin; with
// a personal access token it answers tools/list as JSON, listing the
// token's user's workflow exposed as a tool (from the Data table; the tool
// server, unreachable here, would only refine its output schema). The list
// is the user's own, so it is marked cacheScope "private": a shared
// intermediary must not serve it to another user.
func TestMcpGatewayFunctionEvents(t *testing.T) {
	sm := signingkeystest.Start(t, secretARN, accesstoken.GenerateKeySet("k1"))
	db := storetest.New(t)
	ctx := context.Background()
	h, err := newHandler(ctx, db.Env(t, map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME": "McpGatewayFunction", "OAUTH_SIGNING_SECRET": secretARN, "AWS_ENDPOINT_URL_SECRETS_MANAGER": sm.URL, "LOG_LEVEL": "error",
		"RUNNER_FUNCTION": "RunnerFunction", "BLOB_BUCKET": "blobs", "BLOB_ENDPOINT": s3blobtest.Start(t, "blobs"), "MCP_URL": "http://127.0.0.1:1", "MCP_SERVICE_KEY": "mcp-gateway-test-key-0123456789",
	}))
	if err != nil {
		t.Fatal(err)
	}
	const token = oauth.PersonalTokenPrefix + "Xk2bL9qTz7Vw3Jd8sNc5Rf1Hy6Gm4Pa0Ue2Io7Kq3Ws"
	now := time.Now().UTC()
	if err := store.NewOAuth(db.DB, db.OAuth()).CreatePersonalToken(ctx, oauth.PersonalToken{ID: "00000000-0000-4000-8000-000000000001",
		UserID: "00000000-0000-4000-8000-0000000000aa", Name: "script", Hash: oauth.HashSecret(token), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, 20); err != nil {
		t.Fatal(err)
	}
	if err := store.NewWorkflows(db.DB, db.Data()).CreateWorkflow(ctx, workflow.Workflow{ID: "00000000-0000-4000-8000-0000000000bb",
		UserID: "00000000-0000-4000-8000-0000000000aa", Name: "Report", Description: "Weekly report", ToolName: "weekly_report", ExposeAsTool: true,
		Steps:   []workflow.Step{{ID: "s1", ToolID: "json_query", Inputs: map[string]any{"input": 1, "query": "."}, Outputs: []string{"result"}}},
		Version: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	invoke := lambdahttp.NewFunctionURLStreaming(h)
	event := func(auth string) *events.LambdaFunctionURLRequest {
		raw, err := os.ReadFile("testdata/tools-list.json")
		if err != nil {
			t.Fatal(err)
		}
		var ev events.LambdaFunctionURLRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		if auth == "" {
			delete(ev.Headers, "authorization")
		} else {
			ev.Headers["authorization"] = auth
		}
		return &ev
	}
	read := func(resp *events.LambdaFunctionURLStreamingResponse) string {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	resp, err := invoke(ctx, event(""))
	if err != nil {
		t.Fatal(err)
	}
	body := read(resp)
	want := `Bearer resource_metadata="https://api.workflowchat.example/.well-known/oauth-protected-resource/api/mcp"`
	if resp.StatusCode != 401 || resp.Headers["Www-Authenticate"] != want || !strings.Contains(body, `"code":"UNAUTHORIZED"`) {
		t.Errorf("no token: %d %v %s", resp.StatusCode, resp.Headers, body)
	}

	resp, err = invoke(ctx, event("Bearer "+token))
	if err != nil {
		t.Fatal(err)
	}
	body = read(resp)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Headers["Content-Type"], "application/json") ||
		!strings.Contains(body, `"name":"weekly_report"`) || !strings.Contains(body, `"description":"Weekly report"`) || !strings.Contains(body, `"outputSchema"`) ||
		!strings.Contains(body, `"cacheScope":"private"`) {
		t.Errorf("tools/list: %d %v %s", resp.StatusCode, resp.Headers, body)
	}
}
