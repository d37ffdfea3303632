package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob/s3blob/s3blobtest"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/lambdahttp/lambdatest"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/trigger/eventbridge/schedulertest"
)

// TestWorkflowsFunctionEvents creates a workflow, has the built-in model
// propose a step, applies it and reads the workflow back, through
// recorded API Gateway v2 events.
func TestWorkflowsFunctionEvents(t *testing.T) {
	db := storetest.New(t)
	ctx := context.Background()
	const key = "workflows-test-key-0123456789"
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{}))
	defer ts.Close()
	h, err := newHandler(ctx, db.Env(t, map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "WorkflowsFunction", "BLOB_BUCKET": "blobs", "BLOB_ENDPOINT": s3blobtest.Start(t, "blobs"), "MCP_URL": ts.URL, "MCP_SERVICE_KEY": key, "RUNNER_FUNCTION": "RunnerFunction", "LOG_LEVEL": "error",
		"SCHEDULE_GROUP": "workflow-chat-triggers", "SCHEDULER_ENDPOINT": schedulertest.Unused(t)}))
	if err != nil {
		t.Fatal(err)
	}
	invoke := lambdahttp.NewAPIGatewayV2(h)
	me, err := auth.NewService(store.NewUsers(db.DB, db.Users(), db.Sessions()), &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, nil).
		SignUp(ctx, auth.Credentials{Email: "w@example.com", Password: "password-1x", Name: "W"})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{"USER_ID": me.User.ID}
	send := func(name string, status int, out any) string {
		t.Helper()
		ev := lambdatest.LoadV2(t, "testdata/"+name+".json")
		for k, v := range ids {
			ev.RawPath = strings.ReplaceAll(ev.RawPath, k, v)
			ev.Body = strings.ReplaceAll(ev.Body, k, v)
		}
		ev.RequestContext.HTTP.Path = ev.RawPath
		ev.Cookies = []string{auth.CookieName + "=" + me.Token}
		resp, err := invoke(ctx, ev)
		if err != nil || resp.StatusCode != status {
			t.Fatalf("%s: %d %s %v", name, resp.StatusCode, resp.Body, err)
		}
		if out != nil {
			lambdatest.DecodeBody(t, resp, out)
		}
		return resp.Body
	}

	var created struct {
		Data struct{ ID, Name, UserID string }
	}
	send("create-workflow", 201, &created)
	if created.Data.Name != "From Lambda" || created.Data.UserID != me.User.ID {
		t.Errorf("workflow = %+v", created.Data)
	}
	ids["WORKFLOW_ID"] = created.Data.ID

	var ex struct {
		Data struct {
			AssistantMessage struct {
				Proposal *struct{ ID, Status string }
			}
		}
	}
	send("post-message", 201, &ex)
	if ex.Data.AssistantMessage.Proposal == nil || ex.Data.AssistantMessage.Proposal.Status != "pending" {
		t.Fatalf("no proposal: %+v", ex.Data)
	}
	ids["PROPOSAL_ID"] = ex.Data.AssistantMessage.Proposal.ID
	if body := send("apply-proposal", 200, nil); !strings.Contains(body, `"status":"applied"`) {
		t.Errorf("apply = %s", body)
	}
	if body := send("get-workflow", 200, nil); !strings.Contains(body, `"toolId":"hash"`) || !strings.Contains(body, `"outputs":["digest"]`) ||
		!strings.Contains(body, "hello from lambda") {
		t.Errorf("workflow = %s", body)
	}
	if body := send("list-workflows", 200, nil); !strings.Contains(body, `"total":1`) {
		t.Errorf("list = %s", body)
	}

	if _, err := newHandler(ctx, func(k string) string { return map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "x"}[k] }); err == nil ||
		!strings.Contains(err.Error(), "DATA_TABLE") || !strings.Contains(err.Error(), "MCP_URL") {
		t.Errorf("config error = %v", err)
	}
}
