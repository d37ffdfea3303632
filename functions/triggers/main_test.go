package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob/s3blob/s3blobtest"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/lambdahttp/lambdatest"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/webhook"
	"github.com/workflowchat/service/shared/workflow"
)

// schedulerEndpoint records the EventBridge Scheduler calls the function
// makes; UpdateSchedule of an unknown schedule is 404, as on AWS.
type schedulerEndpoint struct {
	mu    sync.Mutex
	calls []string // "METHOD path"
	known map[string]bool
	last  map[string]any
}

func (s *schedulerEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, r.Method+" "+r.URL.Path)
	b, _ := io.ReadAll(r.Body)
	if len(b) > 0 {
		s.last = map[string]any{}
		_ = json.Unmarshal(b, &s.last)
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "PUT" && !s.known[r.URL.Path]:
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(404)
		_, _ = io.WriteString(w, `{"Message":"Schedule not found."}`)
		return
	case r.Method == "POST":
		s.known[r.URL.Path] = true
	case r.Method == "DELETE":
		delete(s.known, r.URL.Path)
	}
	_, _ = io.WriteString(w, `{"ScheduleArn":"arn:aws:scheduler:us-east-1:123456789012:schedule/g/x"}`)
}

// TestTriggersFunctionEvents drives TriggersFunction's Lambda handler with
// recorded API Gateway v2 events over the real store and the real
// EventBridge Scheduler client (against a fake endpoint): a schedule
// trigger (its schedule created in the stack's group), a webhook trigger
// and a signed call to it, which the function verifies and deduplicates:
// it starts one durable run (202 {runId}; the runner's endpoint is closed
// here, so the run waits for the sweeper), and a repeat of the call
// answers 200 with the same run.
func TestTriggersFunctionEvents(t *testing.T) {
	db := storetest.New(t)
	ctx := context.Background()
	sched := &schedulerEndpoint{known: map[string]bool{}}
	srv := httptest.NewServer(sched)
	defer srv.Close()
	// The SDK signs its requests: static credentials, no instance metadata.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	const group = "workflow-chat-triggers"
	h, err := newHandler(ctx, db.Env(t, map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME": "TriggersFunction", "LOG_LEVEL": "error",
		"WEBHOOK_SIGNING_KEY": "0123456789abcdef0123456789abcdef", "SCHEDULE_GROUP": group,
		"SCHEDULE_TARGET_ARN": "arn:aws:lambda:us-east-1:123456789012:function:fire",
		"SCHEDULE_ROLE_ARN":   "arn:aws:iam::123456789012:role/scheduler",
		"SCHEDULE_DLQ_ARN":    "arn:aws:sqs:us-east-1:123456789012:fire-dlq",
		"SCHEDULER_ENDPOINT":  srv.URL,
		"RUNNER_FUNCTION":     "RunnerFunction", "AWS_ENDPOINT_URL_LAMBDA": "http://127.0.0.1:1",
		"BLOB_BUCKET": "blobs", "BLOB_ENDPOINT": s3blobtest.Start(t, "blobs"),
	}))
	if err != nil {
		t.Fatal(err)
	}
	invoke := lambdahttp.NewAPIGatewayV2(h)
	me, err := auth.NewService(store.NewUsers(db.DB, db.Users(), db.Sessions()), &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, nil).
		SignUp(ctx, auth.Credentials{Email: "t@example.com", Password: "password-1x", Name: "T"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	wf := workflow.Workflow{ID: uuid.NewString(), UserID: me.User.ID, Name: "w", Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := store.NewWorkflows(db.DB, db.Data()).CreateWorkflow(ctx, wf); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{"WORKFLOW_ID": wf.ID}
	send := func(name string, status int, out any, edit func(*map[string]string, *string)) string {
		t.Helper()
		ev := lambdatest.LoadV2(t, "testdata/"+name+".json")
		for k, v := range ids {
			ev.RawPath = strings.ReplaceAll(ev.RawPath, k, v)
		}
		ev.RequestContext.HTTP.Path = ev.RawPath
		if !strings.HasPrefix(ev.RawPath, "/hooks/") {
			ev.Cookies = []string{auth.CookieName + "=" + me.Token}
		}
		if edit != nil {
			edit(&ev.Headers, &ev.Body)
		}
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
		Data struct {
			ID, Schedule, Timezone, URL, Secret string
			NextFireAt                          *time.Time
		}
	}
	send("create-schedule-trigger", 201, &created, nil)
	if created.Data.Schedule != "cron(0 9 ? * MON-FRI *)" || created.Data.NextFireAt == nil {
		t.Errorf("schedule trigger = %+v", created.Data)
	}
	path := "/schedules/" + created.Data.ID
	if got := strings.Join(sched.calls, ", "); got != "PUT "+path+", POST "+path {
		t.Errorf("scheduler calls: %s", got)
	}
	if sched.last["GroupName"] != group || sched.last["ScheduleExpressionTimezone"] != "Europe/Paris" {
		t.Errorf("CreateSchedule body %v", sched.last)
	}
	scheduleID := created.Data.ID

	send("create-webhook-trigger", 201, &created, nil)
	if created.Data.URL != "https://abc123def4.execute-api.us-east-1.amazonaws.com/hooks/"+created.Data.ID || created.Data.Secret == "" {
		t.Errorf("webhook trigger = %+v", created.Data)
	}
	ids["TRIGGER_ID"] = created.Data.ID
	var list struct {
		Data struct{ Triggers []map[string]any }
	}
	send("list-triggers", 200, &list, nil)
	if len(list.Data.Triggers) != 2 {
		t.Errorf("list: %+v", list.Data.Triggers)
	}

	signedAt := func(at time.Time) func(headers *map[string]string, body *string) {
		return func(headers *map[string]string, body *string) {
			(*headers)["x-signature"] = webhook.Sign(created.Data.Secret, at, []byte(*body))
		}
	}
	send("webhook-call", 401, nil, nil) // the recorded placeholder is no signature
	var hooked, keyed, again struct{ Data struct{ RunID string } }
	send("webhook-call", 202, &hooked, signedAt(time.Now()))
	// The same body signed at another second is another delivery (the
	// same signature would be a replay of the first, whatever its key).
	resigned := signedAt(time.Now().Add(-time.Minute))
	withKey := func(h *map[string]string, b *string) { (*h)["idempotency-key"] = "k1"; resigned(h, b) }
	send("webhook-call", 202, &keyed, withKey)
	send("webhook-call", 200, &again, withKey)
	if keyed.Data.RunID == hooked.Data.RunID || again.Data.RunID != keyed.Data.RunID {
		t.Errorf("runs %s, %s then the repeat's %s: want a new run, then the same", hooked.Data.RunID, keyed.Data.RunID, again.Data.RunID)
	}
	run, err := store.NewRuns(db.DB, db.Data()).Run(ctx, hooked.Data.RunID)
	if err != nil || run.Trigger == nil || run.Trigger.Type != "webhook" || run.Trigger.TriggerID != created.Data.ID || run.ChatID != "" {
		t.Errorf("the webhook's run: %+v %v", run, err)
	}

	sched.calls = nil
	ids["TRIGGER_ID"] = scheduleID
	send("delete-trigger", 204, nil, nil)
	if got := strings.Join(sched.calls, ", "); got != "DELETE "+path {
		t.Errorf("scheduler calls on delete: %s", got)
	}
}
