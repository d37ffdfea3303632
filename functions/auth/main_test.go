package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/lambdahttp/lambdatest"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestAuthFunctionEvents drives the function's real wiring with recorded
// API Gateway HTTP API events: sign up, read the session with the cookie,
// sign in with a base64 body, sign out, and be refused afterwards.
func TestAuthFunctionEvents(t *testing.T) {
	db := storetest.New(t)
	h, err := newHandler(context.Background(), db.Env(t, map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "AuthFunction"}))
	if err != nil {
		t.Fatal(err)
	}
	invoke := lambdahttp.NewAPIGatewayV2(h)
	ctx := context.Background()

	resp, err := invoke(ctx, lambdatest.LoadV2(t, "testdata/sign-up.json"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-up: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	c := lambdatest.Cookie(resp, "session_token")
	if c == nil || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.MaxAge != 7*24*3600 {
		t.Fatalf("session cookie = %+v (cookies %v)", c, resp.Cookies)
	}
	if resp.Headers["X-Request-Id"] == "" || !strings.HasPrefix(resp.Headers["Content-Type"], "application/json") {
		t.Errorf("headers = %v", resp.Headers)
	}

	ev := lambdatest.LoadV2(t, "testdata/session.json")
	ev.Cookies = append(ev.Cookies, "session_token="+c.Value)
	resp, err = invoke(ctx, ev)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("session: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	var body struct {
		Data struct {
			User struct{ Email, Name string }
		}
	}
	lambdatest.DecodeBody(t, resp, &body)
	if body.Data.User.Email != "lambda@example.com" || body.Data.User.Name != "Lambda" {
		t.Errorf("session user = %+v", body.Data.User)
	}

	resp, err = invoke(ctx, lambdatest.LoadV2(t, "testdata/sign-in-base64.json"))
	if err != nil || resp.StatusCode != http.StatusOK || lambdatest.Cookie(resp, "session_token") == nil {
		t.Fatalf("sign-in (base64 body): %d %s %v", resp.StatusCode, resp.Body, err)
	}

	out := lambdatest.LoadV2(t, "testdata/sign-out.json")
	out.Cookies = []string{"session_token=" + c.Value}
	resp, err = invoke(ctx, out)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-out: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	if cleared := lambdatest.Cookie(resp, "session_token"); cleared == nil || cleared.MaxAge >= 0 || cleared.Value != "" {
		t.Errorf("sign-out cookie = %+v, want cleared", cleared)
	}

	resp, err = invoke(ctx, ev)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Body, `"code":"UNAUTHORIZED"`) {
		t.Fatalf("session after sign-out: %d %s %v", resp.StatusCode, resp.Body, err)
	}

	bad := lambdatest.LoadV2(t, "testdata/sign-up.json")
	bad.Body = `{"email": "x@example.com", `
	resp, err = invoke(ctx, bad)
	if err != nil || resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, `"code":"INVALID_JSON"`) {
		t.Fatalf("malformed body: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	resp, err = invoke(ctx, lambdatest.LoadV2(t, "testdata/sign-up.json"))
	if err != nil || resp.StatusCode != http.StatusConflict || !strings.Contains(resp.Body, `"code":"EMAIL_TAKEN"`) {
		t.Fatalf("duplicate sign-up: %d %s %v", resp.StatusCode, resp.Body, err)
	}
}

func TestAuthFunctionConfig(t *testing.T) {
	t.Parallel()
	_, err := newHandler(context.Background(), func(k string) string {
		return map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "AuthFunction"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), "USERS_TABLE") || !strings.Contains(err.Error(), "SESSIONS_TABLE") {
		t.Fatalf("err = %v, want it to name USERS_TABLE and SESSIONS_TABLE", err)
	}
}
