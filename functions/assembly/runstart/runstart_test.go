package runstart_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/runstart"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/workflow"
)

// TestInvokerSendsAnAsyncInvoke builds the Invoker as a Lambda function
// does (RUNNER_FUNCTION, the credentials from the environment, Lambda at
// AWS_ENDPOINT_URL_LAMBDA) and hands it a run: a local endpoint that
// speaks the Invoke API sees POST /2015-03-31/functions/<name>/invocations,
// X-Amz-Invocation-Type Event, signed with the environment's key, the run
// reference as the payload; 202 is accepted, any other answer an error.
func TestInvokerSendsAnAsyncInvoke(t *testing.T) {
	// LoadDefaultConfig reads the process environment: not parallel.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDRUNNER")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	for _, c := range []struct {
		name    string
		status  int
		wantErr string
	}{
		{"accepted", http.StatusAccepted, ""},
		{"not found", http.StatusNotFound, "ResourceNotFoundException"},
		{"synchronous answer", http.StatusOK, "UnexpectedStatus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got struct {
				method, path, invocationType, auth string
				body                               []byte
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got.method, got.path = r.Method, r.URL.Path
				got.invocationType, got.auth = r.Header.Get("X-Amz-Invocation-Type"), r.Header.Get("Authorization")
				got.body, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "application/json")
				if c.status >= 400 {
					w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
					w.WriteHeader(c.status)
					_, _ = w.Write([]byte(`{"Type":"User","message":"Function not found"}`))
					return
				}
				w.WriteHeader(c.status)
			}))
			defer srv.Close()
			env := map[string]string{"RUNNER_FUNCTION": "stack-RunnerFunction-1", "AWS_ENDPOINT_URL_LAMBDA": srv.URL, "AWS_REGION": "eu-west-1"}
			cfg, err := config.Load(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			inv, err := runstart.Invoker(context.Background(), cfg, assembly.Deps{})
			if err != nil {
				t.Fatal(err)
			}
			ref := workflow.RunRef{RunID: "r1", Attempt: 2}
			err = inv.Invoke(context.Background(), ref)
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("Invoke: %v, want error %q", err, c.wantErr)
			}
			if got.method != http.MethodPost || got.path != "/2015-03-31/functions/stack-RunnerFunction-1/invocations" ||
				got.invocationType != "Event" || !strings.HasPrefix(got.auth, "AWS4-HMAC-SHA256 Credential=AKIDRUNNER/") ||
				!strings.Contains(got.auth, "/eu-west-1/lambda/aws4_request") {
				t.Fatalf("request %s %s, invocation type %q, auth %q", got.method, got.path, got.invocationType, got.auth)
			}
			var sent workflow.RunRef
			if err := json.Unmarshal(got.body, &sent); err != nil || sent != ref {
				t.Fatalf("payload %s (%v)", got.body, err)
			}
		})
	}
}

// TestInvokerNeedsTheRunnerFunction: without RUNNER_FUNCTION (and no
// in-process runner) the Invoker cannot be built, and the error names
// the variable.
func TestInvokerNeedsTheRunnerFunction(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runstart.Invoker(context.Background(), cfg, assembly.Deps{}); err == nil || !strings.Contains(err.Error(), "RUNNER_FUNCTION") {
		t.Fatalf("Invoker without RUNNER_FUNCTION: %v", err)
	}
}

// TestNoSchedulesRefuses: the keeper of the functions that keep no
// schedules fails both operations Internal, naming what is missing,
// rather than doing nothing.
func TestNoSchedulesRefuses(t *testing.T) {
	t.Parallel()
	for name, call := range map[string]func() error{
		"put": func() error {
			return runstart.NoSchedules.Put(context.Background(), trigger.ScheduleSpec{TriggerID: "t1"})
		},
		"delete": func() error { return runstart.NoSchedules.Delete(context.Background(), "t1") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := call()
			if !errs.Is(err, errs.Internal) || !strings.Contains(errors.Unwrap(err).Error(), "SCHEDULE_GROUP") {
				t.Errorf("err = %v, want Internal naming SCHEDULE_GROUP", err)
			}
		})
	}
}

// TestSecretsOfTheConfiguration: the webhook secrets are built from
// WEBHOOK_SIGNING_KEY, or outside Lambda from MCP_SERVICE_KEY; none
// without either (a function that serves no webhook); a malformed key
// fails naming the variable.
func TestSecretsOfTheConfiguration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cfg     config.Config
		want    bool
		wantErr string
	}{
		{name: "signing key", cfg: config.Config{Triggers: config.Triggers{WebhookSigningKey: strings.Repeat("k", 32)}}, want: true},
		{name: "derived outside Lambda", cfg: config.Config{Tools: config.Tools{MCPServiceKey: "service-key"}}, want: true},
		{name: "not derived in Lambda", cfg: config.Config{Tools: config.Tools{MCPServiceKey: "service-key"}, Runtime: config.Runtime{InLambda: true}}},
		{name: "none"},
		{name: "malformed", cfg: config.Config{Triggers: config.Triggers{WebhookSigningKey: "short"}}, wantErr: "WEBHOOK_SIGNING_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := runstart.Secrets(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || (s != nil) != tc.want || runstart.HasWebhookKey(tc.cfg) != tc.want {
				t.Errorf("Secrets = %v, %v; HasWebhookKey %v; want secrets %v", s, err, runstart.HasWebhookKey(tc.cfg), tc.want)
			}
		})
	}
}
