package eventbridge_test

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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/trigger/eventbridge"
)

// request is one call the fake EventBridge Scheduler endpoint received.
type request struct {
	Method, Path, Query string
	Body                map[string]any
}

// endpoint answers EventBridge Scheduler's REST-JSON protocol: each call
// gets the next of answers (status and X-Amzn-ErrorType; 200 by default).
type endpoint struct {
	mu       sync.Mutex
	requests []request
	answers  []answer
}

type answer struct {
	status  int
	errType string
	message string
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	req := request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &req.Body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
	}
	e.requests = append(e.requests, req)
	a := answer{status: 200}
	if len(e.answers) > 0 {
		a, e.answers = e.answers[0], e.answers[1:]
	}
	if a.status == 0 {
		a.status = 200
	}
	w.Header().Set("Content-Type", "application/json")
	if a.status != 200 {
		w.Header().Set("X-Amzn-ErrorType", a.errType)
		w.WriteHeader(a.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"Message": a.message})
		return
	}
	_, _ = io.WriteString(w, `{"ScheduleArn":"arn:aws:scheduler:us-east-1:123456789012:schedule/group/x"}`)
}

var cfg = eventbridge.Config{
	Group:         "stack-triggers",
	TargetARN:     "arn:aws:lambda:us-east-1:123456789012:function:stack-TriggerFireFunction-abc",
	RoleARN:       "arn:aws:iam::123456789012:role/stack-TriggerSchedulerRole-abc",
	DeadLetterARN: "arn:aws:sqs:us-east-1:123456789012:stack-TriggerFireDeadLetterQueue-abc",
}

var now = time.Date(2026, 3, 7, 17, 0, 30, 0, time.UTC)

// newScheduler returns a Scheduler whose real SDK client talks to a fake
// endpoint with the given answers.
func newScheduler(t *testing.T, answers ...answer) (*eventbridge.Scheduler, *endpoint) {
	t.Helper()
	ep := &endpoint{answers: answers}
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	client := scheduler.New(scheduler.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient:       &http.Client{Transport: &http.Transport{}},
		RetryMaxAttempts: 1,
	})
	return eventbridge.New(client, cfg, func() time.Time { return now }), ep
}

func str(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, _ := v.(map[string]any)
		v = mm[p]
	}
	return v
}

func TestPutCreatesRateSchedule(t *testing.T) {
	t.Parallel()
	s, ep := newScheduler(t, answer{status: 404, errType: "ResourceNotFoundException", message: "Schedule x does not exist."})
	start := now.Add(-12 * time.Minute) // set 12 minutes ago: fires at -7, -2, +3, ...
	spec := trigger.ScheduleSpec{TriggerID: "0b0e7a4e-0000-4000-8000-000000000001", Version: 2, Expression: "rate(5 minutes)",
		Timezone: "Europe/Paris", Start: start, Enabled: true}
	if err := s.Put(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if len(ep.requests) != 2 {
		t.Fatalf("%d requests, want UpdateSchedule then CreateSchedule", len(ep.requests))
	}
	upd, create := ep.requests[0], ep.requests[1]
	if upd.Method != "PUT" || upd.Path != "/schedules/"+spec.TriggerID || create.Method != "POST" || create.Path != "/schedules/"+spec.TriggerID {
		t.Fatalf("requests %s %s, %s %s", upd.Method, upd.Path, create.Method, create.Path)
	}
	for _, r := range []request{upd, create} {
		b := r.Body
		wantInput := `{"triggerId":"` + spec.TriggerID + `","version":2,"scheduledTime":"<aws.scheduler.scheduled-time>"}`
		for path, want := range map[string]any{
			"GroupName":                                   cfg.Group,
			"ScheduleExpression":                          "rate(5 minutes)",
			"ScheduleExpressionTimezone":                  "Europe/Paris",
			"State":                                       "ENABLED",
			"ActionAfterCompletion":                       "NONE",
			"FlexibleTimeWindow.Mode":                     "OFF",
			"Target.Arn":                                  cfg.TargetARN,
			"Target.RoleArn":                              cfg.RoleARN,
			"Target.DeadLetterConfig.Arn":                 cfg.DeadLetterARN,
			"Target.Input":                                wantInput,
			"Target.RetryPolicy.MaximumRetryAttempts":     float64(5),
			"Target.RetryPolicy.MaximumEventAgeInSeconds": float64(3600),
			// The next fire on the grid, never in the past.
			"StartDate": float64(now.Add(3 * time.Minute).Unix()),
		} {
			if got := str(b, strings.Split(path, ".")...); got != want {
				t.Errorf("%s %s: %v, want %v", r.Method, path, got, want)
			}
		}
	}
	if got := create.Body["ClientToken"]; got != spec.TriggerID+"-2" {
		t.Errorf("ClientToken %v", got)
	}
	// The input, once Scheduler fills in the time, is the fire handler's
	// event.
	raw := strings.Replace(str(create.Body, "Target", "Input").(string), eventbridge.ScheduledTimeAttribute, "2026-03-07T17:03:30Z", 1)
	var ev trigger.FireEvent
	if err := json.Unmarshal([]byte(raw), &ev); err != nil || ev.TriggerID != spec.TriggerID || ev.Version != 2 ||
		!ev.ScheduledTime.Equal(time.Date(2026, 3, 7, 17, 3, 30, 0, time.UTC)) {
		t.Errorf("fire event %+v, %v", ev, err)
	}
}

func TestPutUpdatesCronAndAt(t *testing.T) {
	t.Parallel()
	s, ep := newScheduler(t)
	id := "0b0e7a4e-0000-4000-8000-000000000002"
	if err := s.Put(context.Background(), trigger.ScheduleSpec{TriggerID: id, Version: 5, Expression: "cron(0 9 ? * MON-FRI *)",
		Timezone: "America/New_York", Start: now, Enabled: false}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), trigger.ScheduleSpec{TriggerID: id, Version: 6, Expression: "at(2026-04-01T09:00:00)",
		Timezone: "UTC", Start: now, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if len(ep.requests) != 2 {
		t.Fatalf("%d requests, want two UpdateSchedule", len(ep.requests))
	}
	cron, at := ep.requests[0], ep.requests[1]
	if cron.Method != "PUT" || cron.Body["State"] != "DISABLED" || cron.Body["ScheduleExpression"] != "cron(0 9 ? * MON-FRI *)" ||
		cron.Body["ScheduleExpressionTimezone"] != "America/New_York" || cron.Body["StartDate"] != nil || cron.Body["ActionAfterCompletion"] != "NONE" {
		t.Errorf("cron: %s %v", cron.Method, cron.Body)
	}
	if at.Body["ActionAfterCompletion"] != "DELETE" || at.Body["State"] != "ENABLED" || at.Body["StartDate"] != nil {
		t.Errorf("at: %v", at.Body)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	s, ep := newScheduler(t, answer{}, answer{status: 404, errType: "ResourceNotFoundException", message: "gone"})
	for range 2 {
		if err := s.Delete(context.Background(), "0b0e7a4e-0000-4000-8000-000000000003"); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range ep.requests {
		if r.Method != "DELETE" || r.Path != "/schedules/0b0e7a4e-0000-4000-8000-000000000003" || !strings.Contains(r.Query, "groupName="+cfg.Group) {
			t.Errorf("request %+v", r)
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	spec := trigger.ScheduleSpec{TriggerID: "0b0e7a4e-0000-4000-8000-000000000004", Version: 1, Expression: "rate(1 hour)", Timezone: "UTC", Start: now, Enabled: true}
	notFound := answer{status: 404, errType: "ResourceNotFoundException", message: "gone"}
	for _, tc := range []struct {
		name    string
		answers []answer
		kind    errs.Kind
		code    string
	}{
		{"expression refused", []answer{{status: 400, errType: "ValidationException", message: "Invalid Schedule Expression rate(1 hour)."}}, errs.Invalid, "VALIDATION_FAILED"},
		{"throttled", []answer{{status: 429, errType: "ThrottlingException", message: "Rate exceeded"}}, errs.Unavailable, "SCHEDULER_UNAVAILABLE"},
		{"internal", []answer{{status: 500, errType: "InternalServerException", message: "oops"}}, errs.Unavailable, "SCHEDULER_UNAVAILABLE"},
		{"quota on create", []answer{notFound, {status: 402, errType: "ServiceQuotaExceededException", message: "quota"}}, errs.Unavailable, "SCHEDULER_QUOTA"},
		{"created meanwhile", []answer{notFound, {status: 409, errType: "ConflictException", message: "exists"}, {}}, errs.Internal, ""},
		{"misconfigured role", []answer{{status: 400, errType: "ValidationException", message: "The execution role you provide must allow AWS EventBridge Scheduler to assume the role."}}, errs.Internal, "INTERNAL_ERROR"},
		{"access denied", []answer{{status: 403, errType: "AccessDeniedException", message: "no"}}, errs.Internal, "INTERNAL_ERROR"},
	} {
		s, ep := newScheduler(t, tc.answers...)
		if tc.code == "" {
			if err := s.Put(context.Background(), spec); err != nil || len(ep.requests) != 3 || ep.requests[2].Method != "PUT" {
				t.Errorf("%s: %v after %d requests, want create's conflict to end in an update", tc.name, err, len(ep.requests))
			}
			continue
		}
		err := s.Put(context.Background(), spec)
		if errs.KindOf(err) != tc.kind || errs.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %v %s", tc.name, err, tc.kind, tc.code)
		}
		var e *errs.Error
		if tc.kind == errs.Invalid && (!errorsAs(err, &e) || len(e.Details) != 1 || e.Details[0].Field != "schedule") {
			t.Errorf("%s: details %+v", tc.name, e)
		}
	}
	// An expression the parser refuses never reaches AWS.
	s, ep := newScheduler(t)
	bad := spec
	bad.Expression = "rate(1 hours)"
	if err := s.Put(context.Background(), bad); errs.KindOf(err) != errs.Invalid || len(ep.requests) != 0 {
		t.Errorf("bad expression: %v, %d requests", err, len(ep.requests))
	}
}

func errorsAs(err error, e **errs.Error) bool {
	if err == nil {
		return false
	}
	v, ok := err.(*errs.Error)
	*e = v
	return ok
}
