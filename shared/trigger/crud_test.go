package trigger_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/webhook"
)

func TestCRUD(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	base := "/api/workflows/" + wf + "/triggers"

	sched := e.create(t, "a", wf, `{"type":"schedule","schedule":"rate(5 minutes)","timezone":"Europe/Paris","input":{"city":"Lyon"}}`)
	if sched.Type != "schedule" || !sched.Enabled || sched.Schedule != "rate(5 minutes)" || sched.Timezone != "Europe/Paris" ||
		sched.Overlap != "skip" || sched.Input["city"] != "Lyon" || sched.WorkflowID != wf || sched.URL != "" || sched.Secret != "" {
		t.Errorf("schedule trigger = %+v", sched)
	}
	// A rate schedule first fires one period after it is created.
	if sched.NextFireAt == nil || !sched.NextFireAt.Equal(t0.Add(5*time.Minute)) { // 17:05:30
		t.Errorf("nextFireAt = %v, want %v", sched.NextFireAt, t0.Add(5*time.Minute))
	}
	e.clock.Advance(time.Second)
	hook := e.create(t, "a", wf, `{"type":"webhook"}`)
	if hook.Type != "webhook" || !hook.Enabled || hook.URL != "http://example.com/hooks/"+hook.ID ||
		!strings.HasPrefix(hook.Secret, webhook.SecretPrefix) || hook.Schedule != "" || hook.NextFireAt != nil {
		t.Errorf("webhook trigger = %+v", hook)
	}
	// The secret is shown once: never by GET or list.
	if got := e.get(t, "a", wf, hook.ID); got.Secret != "" || got.URL != hook.URL {
		t.Errorf("GET webhook = %+v", got)
	}
	var list struct{ Data struct{ Triggers []view } }
	decode(t, e.as(t, "a", "GET", base, ""), 200, &list)
	if len(list.Data.Triggers) != 2 || list.Data.Triggers[0].ID != hook.ID || list.Data.Triggers[1].ID != sched.ID {
		t.Fatalf("list = %+v, want the webhook then the schedule (newest first)", list.Data.Triggers)
	}
	for _, v := range list.Data.Triggers {
		if v.Secret != "" {
			t.Errorf("list shows a secret: %+v", v)
		}
	}

	// PATCH: disable, then change the schedule (its start moves to now).
	var upd struct{ Data view }
	decode(t, e.as(t, "a", "PATCH", base+"/"+sched.ID, `{"enabled":false}`), 200, &upd)
	if upd.Data.Enabled || upd.Data.NextFireAt != nil || upd.Data.Schedule != "rate(5 minutes)" || upd.Data.Input["city"] != "Lyon" {
		t.Errorf("disabled = %+v", upd.Data)
	}
	e.clock.Advance(time.Minute)
	upd.Data = view{}
	decode(t, e.as(t, "a", "PATCH", base+"/"+sched.ID, `{"enabled":true,"schedule":"cron(0 9 ? * MON-FRI *)","overlap":"buffer_one","input":null}`), 200, &upd)
	// Monday 9:00 in Paris (UTC+1 in March).
	if !upd.Data.Enabled || upd.Data.Schedule != "cron(0 9 ? * MON-FRI *)" || upd.Data.Overlap != "buffer_one" || upd.Data.Input != nil ||
		upd.Data.NextFireAt == nil || !upd.Data.NextFireAt.Equal(time.Date(2026, 3, 9, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("updated = %+v (next %v)", upd.Data, upd.Data.NextFireAt)
	}
	if got := e.get(t, "a", wf, sched.ID); got.Schedule != "cron(0 9 ? * MON-FRI *)" || got.Overlap != "buffer_one" {
		t.Errorf("GET after PATCH = %+v", got)
	}
	// The local scheduler holds the new schedule.
	e.clock.Advance(40 * time.Hour)
	due, err := e.due.Due(context.Background(), e.clock.Now(), 10)
	if err != nil || len(due) != 1 || due[0].Expression != "cron(0 9 ? * MON-FRI *)" || due[0].Version != 3 {
		t.Fatalf("due = %+v, %v", due, err)
	}

	// Rotate: a new secret, shown once; the old one stops working.
	var rot struct{ Data view }
	decode(t, e.as(t, "a", "POST", base+"/"+hook.ID+"/rotate-secret", ""), 200, &rot)
	if rot.Data.Secret == "" || rot.Data.Secret == hook.Secret || rot.Data.ID != hook.ID {
		t.Errorf("rotated = %+v", rot.Data)
	}
	body := []byte(`{"n":1}`)
	if code, _ := errorOf(t, e.hook(t, hook.ID, body, map[string]string{webhook.Header: webhook.Sign(hook.Secret, e.clock.Now(), body)}), 401); code != "INVALID_SIGNATURE" {
		t.Errorf("old secret after rotation: %s", code)
	}
	decode(t, e.hook(t, hook.ID, body, map[string]string{webhook.Header: webhook.Sign(rot.Data.Secret, e.clock.Now(), body)}), 202, nil)
	code, _ := errorOf(t, e.as(t, "a", "POST", base+"/"+sched.ID+"/rotate-secret", ""), 400)
	if code != trigger.CodeNotWebhook {
		t.Errorf("rotate a schedule: %s", code)
	}

	// DELETE: 204, then 404, and its schedule is gone.
	decode(t, e.as(t, "a", "DELETE", base+"/"+sched.ID, ""), 204, nil)
	if code, _ := errorOf(t, e.as(t, "a", "GET", base+"/"+sched.ID, ""), 404); code != trigger.CodeTriggerNotFound {
		t.Errorf("GET deleted: %s", code)
	}
	if code, _ := errorOf(t, e.as(t, "a", "DELETE", base+"/"+sched.ID, ""), 404); code != trigger.CodeTriggerNotFound {
		t.Errorf("DELETE deleted: %s", code)
	}
	if due, _ := e.due.Due(context.Background(), e.clock.Now().Add(365*24*time.Hour), 10); len(due) != 0 {
		t.Errorf("a deleted trigger's schedule is still due: %+v", due)
	}
}

func TestRotateGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	hook := e.create(t, "a", wf, `{"type":"webhook"}`)
	var rot struct{ Data view }
	decode(t, e.as(t, "a", "POST", "/api/workflows/"+wf+"/triggers/"+hook.ID+"/rotate-secret", `{"previousSecretValidSeconds":600}`), 200, &rot)
	sign := func(secret string, body []byte) map[string]string {
		return map[string]string{webhook.Header: webhook.Sign(secret, e.clock.Now(), body)}
	}
	// Within the grace period both secrets work.
	decode(t, e.hook(t, hook.ID, []byte(`{"n":1}`), sign(hook.Secret, []byte(`{"n":1}`))), 202, nil)
	decode(t, e.hook(t, hook.ID, []byte(`{"n":2}`), sign(rot.Data.Secret, []byte(`{"n":2}`))), 202, nil)
	e.clock.Advance(601 * time.Second)
	errorOf(t, e.hook(t, hook.ID, []byte(`{"n":3}`), sign(hook.Secret, []byte(`{"n":3}`))), 401)
	decode(t, e.hook(t, hook.ID, []byte(`{"n":4}`), sign(rot.Data.Secret, []byte(`{"n":4}`))), 202, nil)
	code, fields := errorOf(t, e.as(t, "a", "POST", "/api/workflows/"+wf+"/triggers/"+hook.ID+"/rotate-secret", `{"previousSecretValidSeconds":86401}`), 400)
	if code != "VALIDATION_FAILED" || !slices.Equal(fields, []string{"previousSecretValidSeconds"}) {
		t.Errorf("grace too long: %s %v", code, fields)
	}
}

// TestBadInput sends bodies that must be refused with 400 naming the
// field, and checks that nothing was stored.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	base := "/api/workflows/" + wf + "/triggers"
	bigInput := `{"type":"schedule","schedule":"rate(1 hour)","input":{"x":"` + strings.Repeat("a", trigger.MaxInputBytes) + `"}}`
	for _, tc := range []struct {
		name, body string
		code       string
		fields     []string
	}{
		{"no type", `{"schedule":"rate(5 minutes)"}`, "VALIDATION_FAILED", []string{"type"}},
		{"unknown type", `{"type":"email"}`, "VALIDATION_FAILED", []string{"type"}},
		{"schedule missing", `{"type":"schedule"}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"bad cron", `{"type":"schedule","schedule":"cron(0 9 * * * *)"}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"cron with seconds", `{"type":"schedule","schedule":"cron(0 0 9 * * ? *)"}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"unix cron", `{"type":"schedule","schedule":"*/5 * * * *"}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"too frequent", `{"type":"schedule","schedule":"rate(30 seconds)"}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"singular unit", `{"type":"schedule","schedule":"rate(1 minutes)"}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"never fires", `{"type":"schedule","schedule":"cron(0 0 1 1 ? 2020)"}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"at in the past", `{"type":"schedule","schedule":"at(2026-03-07T16:00:00)"}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"unknown timezone", `{"type":"schedule","schedule":"rate(5 minutes)","timezone":"Moon/Tranquility"}`, "VALIDATION_FAILED", []string{"timezone"}},
		{"Local timezone", `{"type":"schedule","schedule":"rate(5 minutes)","timezone":"Local"}`, "VALIDATION_FAILED", []string{"timezone"}},
		{"both wrong", `{"type":"schedule","schedule":"daily","timezone":"Nowhere"}`, "VALIDATION_FAILED", []string{"timezone", "schedule"}},
		{"bad overlap", `{"type":"schedule","schedule":"rate(5 minutes)","overlap":"queue"}`, "VALIDATION_FAILED", []string{"overlap"}},
		{"input not an object", `{"type":"schedule","schedule":"rate(5 minutes)","input":[1,2]}`, "VALIDATION_FAILED", []string{"input"}},
		{"input too large", bigInput, "VALIDATION_FAILED", []string{"input"}},
		{"schedule wrongly typed", `{"type":"schedule","schedule":5}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"webhook with a schedule", `{"type":"webhook","schedule":"rate(5 minutes)"}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"webhook with an input", `{"type":"webhook","input":{}}`, "VALIDATION_FAILED", []string{"input"}},
		{"malformed JSON", `{"type":`, "INVALID_JSON", nil},
	} {
		code, fields := errorOf(t, e.as(t, "a", "POST", base, tc.body), 400)
		if code != tc.code || !slices.Equal(fields, tc.fields) {
			t.Errorf("%s: %s %v, want %s %v", tc.name, code, fields, tc.code, tc.fields)
		}
	}
	var list struct{ Data struct{ Triggers []view } }
	decode(t, e.as(t, "a", "GET", base, ""), 200, &list)
	if len(list.Data.Triggers) != 0 {
		t.Errorf("refused bodies stored triggers: %+v", list.Data.Triggers)
	}

	s := e.create(t, "a", wf, `{"type":"schedule","schedule":"rate(5 minutes)"}`)
	h := e.create(t, "a", wf, `{"type":"webhook","enabled":false}`)
	if h.Enabled {
		t.Error("enabled:false was not kept")
	}
	for _, tc := range []struct {
		name, id, body string
		code           string
		fields         []string
	}{
		{"nothing to change", s.ID, `{}`, "VALIDATION_FAILED", []string{"body"}},
		{"bad cron", s.ID, `{"schedule":"cron(61 * * * ? *)"}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"unknown timezone", s.ID, `{"timezone":"Atlantis/Capital"}`, "VALIDATION_FAILED", []string{"timezone"}},
		{"change the type", s.ID, `{"type":"webhook","enabled":true}`, "VALIDATION_FAILED", []string{"type"}},
		{"bad overlap", s.ID, `{"overlap":"never"}`, "VALIDATION_FAILED", []string{"overlap"}},
		{"webhook schedule", h.ID, `{"schedule":"rate(5 minutes)"}`, "VALIDATION_FAILED", []string{"schedule"}},
		{"webhook overlap", h.ID, `{"overlap":"allow"}`, "VALIDATION_FAILED", []string{"overlap"}},
	} {
		code, fields := errorOf(t, e.as(t, "a", "PATCH", base+"/"+tc.id, tc.body), 400)
		if code != tc.code || !slices.Equal(fields, tc.fields) {
			t.Errorf("PATCH %s: %s %v, want %s %v", tc.name, code, fields, tc.code, tc.fields)
		}
	}
	if got := e.get(t, "a", wf, s.ID); got.Schedule != "rate(5 minutes)" || got.Timezone != "UTC" || got.Overlap != "skip" {
		t.Errorf("refused PATCHes changed the trigger: %+v", got)
	}
}

// TestCheckOrder: 401, then 400 (ids, body), then 404, then 403.
func TestCheckOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wfA, wfB := e.workflow(t, "a"), e.workflow(t, "b")
	trB := e.create(t, "b", wfB, `{"type":"schedule","schedule":"rate(1 hour)"}`)
	trA := e.create(t, "a", wfA, `{"type":"webhook"}`)
	good := `{"type":"webhook"}`
	for _, tc := range []struct {
		name, user, method, path, body string
		status                         int
		code                           string
	}{
		{"no session", "", "POST", "/api/workflows/" + wfA + "/triggers", good, 401, "UNAUTHORIZED"},
		{"no session, bad id", "", "GET", "/api/workflows/nope/triggers", "", 401, "UNAUTHORIZED"},
		{"bad workflow id", "a", "POST", "/api/workflows/nope/triggers", good, 400, "INVALID_ID"},
		{"bad trigger id", "a", "GET", "/api/workflows/" + wfA + "/triggers/nope", "", 400, "INVALID_ID"},
		{"bad trigger id before the body", "a", "PATCH", "/api/workflows/" + wfA + "/triggers/nope", `{`, 400, "INVALID_ID"},
		{"bad body before existence", "a", "POST", "/api/workflows/" + newID() + "/triggers", `{"type":"x"}`, 400, "VALIDATION_FAILED"},
		{"unknown workflow", "a", "POST", "/api/workflows/" + newID() + "/triggers", good, 404, trigger.CodeWorkflowNotFound},
		{"unknown workflow list", "a", "GET", "/api/workflows/" + newID() + "/triggers", "", 404, trigger.CodeWorkflowNotFound},
		{"unknown trigger", "a", "GET", "/api/workflows/" + wfA + "/triggers/" + newID(), "", 404, trigger.CodeTriggerNotFound},
		{"trigger of another workflow", "a", "GET", "/api/workflows/" + wfA + "/triggers/" + trB.ID, "", 404, trigger.CodeTriggerNotFound},
		{"other user's workflow: create", "a", "POST", "/api/workflows/" + wfB + "/triggers", good, 403, "FORBIDDEN"},
		{"other user's workflow: list", "a", "GET", "/api/workflows/" + wfB + "/triggers", "", 403, "FORBIDDEN"},
		{"other user's trigger: get", "a", "GET", "/api/workflows/" + wfB + "/triggers/" + trB.ID, "", 403, "FORBIDDEN"},
		{"other user's trigger: patch", "a", "PATCH", "/api/workflows/" + wfB + "/triggers/" + trB.ID, `{"enabled":false}`, 403, "FORBIDDEN"},
		{"other user's trigger: delete", "a", "DELETE", "/api/workflows/" + wfB + "/triggers/" + trB.ID, "", 403, "FORBIDDEN"},
		{"other user's trigger: rotate", "b", "POST", "/api/workflows/" + wfA + "/triggers/" + trA.ID + "/rotate-secret", "", 403, "FORBIDDEN"},
	} {
		cookie := ""
		if tc.user != "" {
			cookie = e.users[tc.user].cookie
		}
		code, _ := errorOf(t, e.do(t, cookie, tc.method, tc.path, tc.body, nil), tc.status)
		if code != tc.code {
			t.Errorf("%s: %s, want %d %s", tc.name, code, tc.status, tc.code)
		}
	}
	if got := e.get(t, "b", wfB, trB.ID); !got.Enabled {
		t.Error("another user disabled b's trigger")
	}
}

// TestLimit: a user has at most 20 triggers over all workflows; the
// counter follows deletes, and refused creations store nothing.
func TestLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf1, wf2 := e.workflow(t, "a"), e.workflow(t, "a")
	var ids []string
	for i := range trigger.MaxPerUser {
		wf := wf1
		if i%2 == 1 {
			wf = wf2
		}
		ids = append(ids, e.create(t, "a", wf, `{"type":"webhook"}`).ID)
	}
	code, _ := errorOf(t, e.as(t, "a", "POST", "/api/workflows/"+wf1+"/triggers", `{"type":"schedule","schedule":"rate(5 minutes)"}`), 409)
	if code != trigger.CodeTriggerLimit {
		t.Fatalf("21st trigger: %s", code)
	}
	// Another user is not limited by a's triggers.
	e.create(t, "b", e.workflow(t, "b"), `{"type":"webhook"}`)
	// The refused one stored nothing.
	ts, err := e.triggers.WorkflowTriggers(context.Background(), wf1)
	if err != nil || len(ts) != 10 {
		t.Fatalf("wf1 has %d triggers (%v), want 10", len(ts), err)
	}
	decode(t, e.as(t, "a", "DELETE", "/api/workflows/"+wf1+"/triggers/"+ids[0], ""), 204, nil)
	e.create(t, "a", wf1, `{"type":"webhook"}`)
	errorOf(t, e.as(t, "a", "POST", "/api/workflows/"+wf1+"/triggers", `{"type":"webhook"}`), 409)

	// Deleting a workflow deletes its triggers and frees their places.
	decode(t, e.as(t, "a", "DELETE", "/api/workflows/"+wf2, ""), 204, nil)
	for i := 1; i < len(ids); i += 2 { // wf2's
		if _, err := e.triggers.Trigger(context.Background(), ids[i]); !errs.Is(err, errs.NotFound) {
			t.Errorf("trigger %s of the deleted workflow: %v, want NotFound", ids[i], err)
		}
	}
	for range 10 {
		e.create(t, "a", wf1, `{"type":"webhook"}`)
	}
	errorOf(t, e.as(t, "a", "POST", "/api/workflows/"+wf1+"/triggers", `{"type":"webhook"}`), 409)
}

// TestWorkflowDeleteRemovesSchedules: the workflow's delete removes its
// schedule triggers from the scheduler too, and a trigger can no longer
// be created on it.
func TestWorkflowDeleteRemovesSchedules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	s := e.create(t, "a", wf, `{"type":"schedule","schedule":"rate(1 minute)"}`)
	h := e.create(t, "a", wf, `{"type":"webhook"}`)
	ctx := auth.WithSession(context.Background(), auth.Session{User: auth.User{ID: e.users["a"].id}})
	if err := e.workflows.Delete(ctx, wf); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{s.ID, h.ID} {
		if _, err := e.triggers.Trigger(context.Background(), id); !errs.Is(err, errs.NotFound) {
			t.Errorf("trigger %s: %v, want NotFound", id, err)
		}
	}
	e.poll(t, 3, time.Minute)
	if n := len(e.engine.started()); n != 0 {
		t.Errorf("%d runs started by a deleted workflow's trigger", n)
	}
	if code, _ := errorOf(t, e.as(t, "a", "POST", "/api/workflows/"+wf+"/triggers", `{"type":"webhook"}`), 404); code != trigger.CodeWorkflowNotFound {
		t.Errorf("create on a deleted workflow: %s", code)
	}
	// The webhook URL answers 404.
	body := []byte(`{}`)
	errorOf(t, e.hook(t, h.ID, body, map[string]string{webhook.Header: webhook.Sign(h.Secret, e.clock.Now(), body)}), 404)
}

// TestCreateOnDeletingWorkflow: while a workflow is being deleted (its
// item marked), creating a trigger on it is refused by the transaction's
// condition, so none is left behind.
func TestCreateOnDeletingWorkflow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	ctx := context.Background()
	if err := e.db.Table(e.db.Data()).Update("PK", "WF#"+wf).Range("SK", "WF").Set("deleting", true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	tr := trigger.Trigger{ID: newID(), UserID: e.users["a"].id, WorkflowID: wf, Type: trigger.TypeWebhook, Enabled: true, Version: 1, CreatedAt: t0, UpdatedAt: t0}
	if err := e.triggers.CreateTrigger(ctx, tr, trigger.MaxPerUser); errs.CodeOf(err) != trigger.CodeWorkflowNotFound {
		t.Errorf("create on a deleting workflow: %v", err)
	}
	if _, err := e.triggers.Trigger(ctx, tr.ID); !errs.Is(err, errs.NotFound) {
		t.Errorf("a trigger was stored: %v", err)
	}
	tr.UserID = e.users["b"].id
	if err := e.triggers.CreateTrigger(ctx, tr, trigger.MaxPerUser); errs.CodeOf(err) != trigger.CodeWorkflowNotFound {
		t.Errorf("another user on a deleting workflow: %v", err)
	}
}

// TestUpdateUndoneWhenSchedulerFails: a PATCH whose schedule the scheduler
// refuses (an expression it does not take, or it is unreachable) answers
// the scheduler's error and leaves the trigger as it was, still fired by
// its previous schedule; repeating the PATCH once the scheduler takes it
// applies it.
func TestUpdateUndoneWhenSchedulerFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"refused expression", errs.Fields("eventbridge.Put", errs.FieldError{Field: "schedule", Message: "refused by EventBridge Scheduler"}), 400, "VALIDATION_FAILED"},
		{"unavailable", errs.E("eventbridge.Put", errs.Unavailable, "SCHEDULER_UNAVAILABLE", "the scheduler is busy"), 503, "SCHEDULER_UNAVAILABLE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			wf := e.workflow(t, "a")
			path := "/api/workflows/" + wf + "/triggers/"
			before := e.create(t, "a", wf, `{"type":"schedule","schedule":"rate(5 minutes)","input":{"n":1}}`)
			e.sched.failNextPut(tc.err)
			patch := `{"schedule":"rate(7 minutes)","overlap":"allow","input":{"n":2}}`
			if code, _ := errorOf(t, e.as(t, "a", "PATCH", path+before.ID, patch), tc.status); code != tc.code {
				t.Errorf("PATCH: %s, want %d %s", code, tc.status, tc.code)
			}
			after := e.get(t, "a", wf, before.ID)
			if after.Schedule != "rate(5 minutes)" || after.Overlap != "skip" || after.Input["n"] != float64(1) ||
				after.NextFireAt == nil || !after.NextFireAt.Equal(*before.NextFireAt) {
				t.Errorf("after a refused PATCH: %+v, want it unchanged: %+v", after, before)
			}
			// The previous schedule still fires the trigger.
			e.poll(t, 5, time.Minute)
			if n := len(e.engine.started()); n != 1 {
				t.Fatalf("%d runs started by the previous schedule, want 1", n)
			}
			var upd struct{ Data view }
			decode(t, e.as(t, "a", "PATCH", path+before.ID, patch), 200, &upd)
			if upd.Data.Schedule != "rate(7 minutes)" || upd.Data.Overlap != "allow" || upd.Data.Input["n"] != float64(2) {
				t.Errorf("PATCH repeated: %+v", upd.Data)
			}
			e.poll(t, 7, time.Minute)
			if n := len(e.engine.started()); n != 2 {
				t.Errorf("%d runs started, want 2 (the new schedule fires)", n)
			}
		})
	}
}

// TestWebhookURLUnderPublicOrigin: a webhook trigger's URL is under the
// service's public origin as oauth.BaseURL names it (the viewer's host
// that CloudFront passes on, https when the proxy says so), not the host
// name the function was reached by.
func TestWebhookURLUnderPublicOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	base := "/api/workflows/" + wf + "/triggers"
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   string
	}{
		{"the request's host", nil, "http://example.com"},
		{"the viewer's host", map[string]string{"X-Viewer-Host": "Chat.Example.org", "X-Forwarded-Proto": "https"}, "https://chat.example.org"},
	} {
		var out struct{ Data view }
		decode(t, e.do(t, e.users["a"].cookie, "POST", base, `{"type":"webhook"}`, tc.header), 201, &out)
		if want := tc.want + "/hooks/" + out.Data.ID; out.Data.URL != want {
			t.Errorf("%s: url %q, want %q", tc.name, out.Data.URL, want)
		}
		var got struct{ Data view }
		decode(t, e.do(t, e.users["a"].cookie, "GET", base+"/"+out.Data.ID, "", tc.header), 200, &got)
		if got.Data.URL != out.Data.URL {
			t.Errorf("%s: GET url %q, want %q", tc.name, got.Data.URL, out.Data.URL)
		}
	}
}
