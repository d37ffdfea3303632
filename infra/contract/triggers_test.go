package contract_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/webhook"
)

// TestTriggersConformToDocument drives the trigger routes and the webhook
// route of the real service through the checking Transport: every answer,
// success and error alike, must match docs/openapi.yaml: a signed webhook
// call starts a run (202 {runId}), its repeat answers 200 with the same
// run, and the same key with another body is 409.
func TestTriggersConformToDocument(t *testing.T) {
	spec := loadSpec(t)
	stack := startStack(t)
	srv := httptest.NewServer(stack.API)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Transport: spec.Transport(t, &http.Transport{}), Jar: jar}
	anon := &http.Client{Transport: spec.Transport(t, &http.Transport{})}

	call := func(c *http.Client, method, path, body string, header map[string]string, want int) []byte {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, srv.URL+path, r)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return b
	}
	field := func(b []byte, name string) string {
		var v struct{ Data map[string]any }
		_ = json.Unmarshal(b, &v)
		s, _ := v.Data[name].(string)
		return s
	}

	var up struct {
		Data struct{ User struct{ ID string } }
	}
	if err := json.Unmarshal(call(client, "POST", "/api/auth/sign-up/email", `{"email":"tr@example.com","password":"correct horse","name":"T"}`, nil, 200), &up); err != nil {
		t.Fatal(err)
	}
	wf := field(call(client, "POST", "/api/workflows", `{"name":"w","userId":"`+up.Data.User.ID+`"}`, nil, 201), "id")
	base := "/api/workflows/" + wf + "/triggers"

	sched := field(call(client, "POST", base, `{"type":"schedule","schedule":"rate(5 minutes)","timezone":"Europe/Paris","input":{"k":1},"overlap":"buffer_one"}`, nil, 201), "id")
	hookBody := call(client, "POST", base, `{"type":"webhook"}`, nil, 201)
	hook, secret := field(hookBody, "id"), field(hookBody, "secret")
	call(client, "GET", base, "", nil, 200)
	call(client, "GET", base+"/"+sched, "", nil, 200)
	call(client, "PATCH", base+"/"+sched, `{"enabled":false,"input":null}`, nil, 200)
	call(client, "POST", base, `{"type":"schedule","schedule":"cron(0 9 * * * *)"}`, nil, 400)
	call(client, "POST", base, `{"type":"schedule","schedule":"rate(5 minutes)","timezone":"Mars/Base"}`, nil, 400)
	call(client, "POST", "/api/workflows/00000000-0000-4000-8000-000000000009/triggers", `{"type":"webhook"}`, nil, 404)
	call(client, "GET", base+"/00000000-0000-4000-8000-000000000009", "", nil, 404)
	call(client, "GET", base+"/nope", "", nil, 400)
	call(anon, "GET", base, "", nil, 401)
	call(client, "POST", base+"/"+hook+"/rotate-secret", `{"previousSecretValidSeconds":60}`, nil, 200)
	call(client, "POST", base+"/"+sched+"/rotate-secret", "", nil, 400)

	body := `{"order":42}`
	call(anon, "POST", "/hooks/"+hook, body, nil, 401)
	call(anon, "POST", "/hooks/"+hook, body, map[string]string{webhook.Header: webhook.Sign(secret, time.Now().Add(-time.Hour), []byte(body))}, 401)
	call(anon, "POST", "/hooks/00000000-0000-4000-8000-000000000009", body, nil, 404)
	call(anon, "POST", "/hooks/"+hook, `{"x":"`+strings.Repeat("a", 300<<10)+`"}`, nil, 413)
	call(anon, "POST", "/hooks/"+hook, "[1]", map[string]string{webhook.Header: webhook.Sign(secret, time.Now(), []byte("[1]"))}, 400)
	first := field(call(anon, "POST", "/hooks/"+hook, body, map[string]string{webhook.Header: webhook.Sign(secret, time.Now(), []byte(body)), "Idempotency-Key": "k-1"}, 202), "runId")
	if again := field(call(anon, "POST", "/hooks/"+hook, body, map[string]string{webhook.Header: webhook.Sign(secret, time.Now(), []byte(body)), "Idempotency-Key": "k-1"}, 200), "runId"); again != first || first == "" {
		t.Errorf("a repeated call's run %q, the first's %q", again, first)
	}
	call(anon, "POST", "/hooks/"+hook, `{"order":43}`, map[string]string{webhook.Header: webhook.Sign(secret, time.Now(), []byte(`{"order":43}`)), "Idempotency-Key": "k-1"}, 409)
	call(anon, "POST", "/hooks/"+hook, body, map[string]string{"Content-Type": "text/plain"}, 415)
	call(client, "DELETE", base+"/"+sched, "", nil, 204)
	call(client, "DELETE", base+"/"+sched, "", nil, 404)
}
