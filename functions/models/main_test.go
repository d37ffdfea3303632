package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/lambdahttp/lambdatest"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

func TestModelsFunctionEvents(t *testing.T) {
	db := storetest.New(t)
	ctx := context.Background()
	h, err := newHandler(ctx, db.Env(t, map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "ModelsFunction"}))
	if err != nil {
		t.Fatal(err)
	}
	invoke := lambdahttp.NewAPIGatewayV2(h)
	users := store.NewUsers(db.DB, db.Users(), db.Sessions())
	svc := auth.NewService(users, &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, time.Now)
	me, err := svc.SignUp(ctx, auth.Credentials{Email: "m@example.com", Password: "password-1x", Name: "M"})
	if err != nil {
		t.Fatal(err)
	}
	cookie := "session_token=" + me.Token

	list := lambdatest.LoadV2(t, "testdata/models.json")
	resp, _ := invoke(ctx, list)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("models without cookie: %d %s", resp.StatusCode, resp.Body)
	}
	list.Cookies = []string{cookie}
	resp, _ = invoke(ctx, list)
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"id":"builtin"`) {
		t.Fatalf("models: %d %s", resp.StatusCode, resp.Body)
	}

	tests := []struct {
		name, userID, body string
		status             int
		code               string
	}{
		{"own preference", me.User.ID, `{"modelId":"builtin"}`, 200, ""},
		{"unknown model", me.User.ID, `{"modelId":"gpt-nope"}`, 400, "INVALID_MODEL"},
		{"missing model", me.User.ID, `{}`, 400, "VALIDATION_FAILED"},
		{"another user", "5d0f6f7e-3c1c-4b4a-9d55-0a3c1f0e9b11", `{"modelId":"builtin"}`, 403, "FORBIDDEN"},
	}
	for _, tt := range tests {
		ev := lambdatest.LoadV2(t, "testdata/model-preference.json")
		ev.RawPath = strings.Replace(ev.RawPath, "USER_ID", tt.userID, 1)
		ev.RequestContext.HTTP.Path = ev.RawPath
		ev.Body, ev.Cookies = tt.body, []string{cookie}
		resp, err := invoke(ctx, ev)
		if err != nil || resp.StatusCode != tt.status || (tt.code != "" && !strings.Contains(resp.Body, `"code":"`+tt.code+`"`)) {
			t.Errorf("%s: %d %s %v, want %d %s", tt.name, resp.StatusCode, resp.Body, err, tt.status, tt.code)
		}
	}
	if got, err := users.ModelPreference(ctx, me.User.ID); err != nil || got != "builtin" {
		t.Errorf("stored preference = %q, %v", got, err)
	}
}
