package trigger_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/trigger"
)

// scheduledOf returns the scheduled times of the runs started, recovered
// from their ids: each is FireRunID of the trigger and one of candidates.
func scheduledOf(t *testing.T, runs []trigger.TriggeredRun, triggerID string, candidates []time.Time) []time.Time {
	t.Helper()
	var out []time.Time
	for _, r := range runs {
		found := false
		for _, c := range candidates {
			if trigger.FireRunID(triggerID, c) == r.RunID {
				out, found = append(out, c), true
				break
			}
		}
		if !found {
			t.Fatalf("run %s is not the run of any expected fire", r.RunID)
		}
	}
	return out
}

// TestScheduleFiresOnFakeClock moves a fake clock forward a minute at a
// time, polling after each step, and checks that a rate and a cron
// schedule fire exactly when they should, each fire once.
func TestScheduleFiresOnFakeClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	// Created at 17:00:30: rate fires at 17:05:30, 17:10:30, ...
	rate := e.create(t, "a", wf, `{"type":"schedule","schedule":"rate(5 minutes)","overlap":"allow","input":{"k":"v"}}`)
	// cron fires at minutes 0, 10, ... of each hour (17:10, 17:20, ...).
	cron := e.create(t, "a", wf, `{"type":"schedule","schedule":"cron(0/10 * * * ? *)","overlap":"allow"}`)
	e.poll(t, 31, time.Minute) // to 17:31:30

	var rateWant, cronWant []time.Time
	for k := 1; k <= 6; k++ {
		rateWant = append(rateWant, t0.Add(time.Duration(k)*5*time.Minute))
	}
	for _, m := range []int{10, 20, 30} {
		cronWant = append(cronWant, time.Date(2026, 3, 7, 17, m, 0, 0, time.UTC))
	}
	var rateRuns, cronRuns []trigger.TriggeredRun
	for _, r := range e.engine.started() {
		switch r.TriggerID {
		case rate.ID:
			rateRuns = append(rateRuns, r)
		case cron.ID:
			cronRuns = append(cronRuns, r)
		default:
			t.Fatalf("run of an unknown trigger: %+v", r)
		}
		if r.TriggerType != "schedule" || r.WorkflowID != wf || r.UserID != e.users["a"].id {
			t.Errorf("run %+v", r)
		}
	}
	if got := scheduledOf(t, rateRuns, rate.ID, rateWant); !slices.EqualFunc(got, rateWant, time.Time.Equal) {
		t.Errorf("rate fired at %v, want %v", got, rateWant)
	}
	if got := scheduledOf(t, cronRuns, cron.ID, cronWant); !slices.EqualFunc(got, cronWant, time.Time.Equal) {
		t.Errorf("cron fired at %v, want %v", got, cronWant)
	}
	if rateRuns[0].Input["k"] != "v" || cronRuns[0].Input != nil {
		t.Errorf("inputs %v and %v", rateRuns[0].Input, cronRuns[0].Input)
	}
	// A second poller at the same instant fires nothing more.
	if n, err := e.poller.Poll(context.Background()); err != nil || n != 0 {
		t.Errorf("poll again: %d fired, %v", n, err)
	}
	// Disabled, it stops; enabled again, it resumes on its grid, the
	// missed fires not caught up.
	decode(t, e.as(t, "a", "PATCH", "/api/workflows/"+wf+"/triggers/"+rate.ID, `{"enabled":false}`), 200, nil)
	before := len(e.engine.started())
	e.poll(t, 30, time.Minute) // to 18:01:30
	var fired []string
	for _, r := range e.engine.started()[before:] {
		fired = append(fired, r.TriggerID)
	}
	if slices.Contains(fired, rate.ID) || len(fired) != 3 {
		t.Errorf("while disabled: fires of %v, want 3 of the cron trigger only", fired)
	}
	decode(t, e.as(t, "a", "PATCH", "/api/workflows/"+wf+"/triggers/"+rate.ID, `{"enabled":true}`), 200, nil)
	before = len(e.engine.started())
	e.poll(t, 5, time.Minute) // to 18:06:30: the rate grid point 18:05:30
	var rateAgain []trigger.TriggeredRun
	for _, r := range e.engine.started()[before:] {
		if r.TriggerID == rate.ID {
			rateAgain = append(rateAgain, r)
		}
	}
	want := []time.Time{t0.Add(65 * time.Minute)}
	if got := scheduledOf(t, rateAgain, rate.ID, want); !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("re-enabled rate fired at %v, want %v", got, want)
	}
}

// TestOverlapSkip: with a slow run, fires are skipped until the engine
// says the run ended.
func TestOverlapSkip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	tr := e.create(t, "a", wf, `{"type":"schedule","schedule":"rate(1 minute)"}`)
	e.poll(t, 1, time.Minute)
	runs := e.engine.started()
	if len(runs) != 1 {
		t.Fatalf("%d runs after the first fire", len(runs))
	}
	first := runs[0].RunID
	if got := e.get(t, "a", wf, tr.ID); got.ActiveRunID != first || got.LastFire.Outcome != "started" {
		t.Errorf("after the first fire: %+v", got)
	}
	e.poll(t, 3, time.Minute) // three fires while the run is active
	if n := len(e.engine.started()); n != 1 {
		t.Fatalf("%d runs started while one was active, want 1", n)
	}
	if got := e.get(t, "a", wf, tr.ID); got.LastFire.Outcome != "skipped" || got.ActiveRunID != first {
		t.Errorf("after skipped fires: %+v", got)
	}
	e.engine.end(first)
	if err := e.svc.RunEnded(context.Background(), tr.ID, first); err != nil {
		t.Fatal(err)
	}
	// Repeating the call is harmless.
	if err := e.svc.RunEnded(context.Background(), tr.ID, first); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, "a", wf, tr.ID); got.ActiveRunID != "" {
		t.Errorf("marker after the run ended: %+v", got)
	}
	e.poll(t, 1, time.Minute)
	runs = e.engine.started()
	if len(runs) != 2 || runs[1].RunID != trigger.FireRunID(tr.ID, t0.Add(5*time.Minute)) {
		t.Errorf("runs %+v, want a second one at the fifth minute", runs)
	}
}

// TestOverlapBufferOne: one fire waits while a run is active, further
// ones are skipped, and the waiting one starts when the run ends.
func TestOverlapBufferOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	tr := e.create(t, "a", wf, `{"type":"schedule","schedule":"rate(1 minute)","overlap":"buffer_one","input":{"x":1}}`)
	e.poll(t, 1, time.Minute)
	first := trigger.FireRunID(tr.ID, t0.Add(time.Minute))
	e.poll(t, 1, time.Minute)
	waiting := trigger.FireRunID(tr.ID, t0.Add(2*time.Minute))
	got := e.get(t, "a", wf, tr.ID)
	if got.ActiveRunID != first || got.BufferedRunID != waiting || got.LastFire.Outcome != "buffered" {
		t.Fatalf("after the second fire: active %q buffered %q last %+v", got.ActiveRunID, got.BufferedRunID, got.LastFire)
	}
	e.poll(t, 2, time.Minute)
	if got := e.get(t, "a", wf, tr.ID); got.BufferedRunID != waiting || got.LastFire.Outcome != "skipped" {
		t.Errorf("a third fire replaced the waiting one: %+v", got)
	}
	if n := len(e.engine.started()); n != 1 {
		t.Fatalf("%d runs while one was active", n)
	}
	e.engine.end(first)
	if err := e.svc.RunEnded(context.Background(), tr.ID, first); err != nil {
		t.Fatal(err)
	}
	runs := e.engine.started()
	if len(runs) != 2 || runs[1].RunID != waiting || runs[1].Input["x"] != float64(1) {
		t.Fatalf("after the end: %+v, want the waiting fire started", runs)
	}
	if got := e.get(t, "a", wf, tr.ID); got.ActiveRunID != waiting || got.BufferedRunID != "" {
		t.Errorf("markers after the waiting run started: %+v", got)
	}
	e.engine.end(waiting)
	if err := e.svc.RunEnded(context.Background(), tr.ID, waiting); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, "a", wf, tr.ID); got.ActiveRunID != "" {
		t.Errorf("marker after both ended: %+v", got)
	}
	e.poll(t, 1, time.Minute)
	if n := len(e.engine.started()); n != 3 {
		t.Errorf("%d runs, want a third", n)
	}
}

// TestFireFailures: a run the engine refuses is visible on the trigger
// and releases the marker; a fire of an older version, or of a deleted
// trigger, does nothing; a fire delivered twice starts one run.
func TestFireFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	wf := e.workflow(t, "a")
	tr := e.create(t, "a", wf, `{"type":"schedule","schedule":"rate(1 minute)"}`)
	e.engine.failNext(errs.E("engine", errs.Invalid, "INVALID_INPUT", "input: name is required"))
	e.poll(t, 1, time.Minute)
	got := e.get(t, "a", wf, tr.ID)
	if got.LastFire == nil || got.LastFire.Outcome != "failed" || got.LastFire.Error.Code != "INVALID_INPUT" || got.ActiveRunID != "" {
		t.Fatalf("after a refused run: %+v (last %+v)", got, got.LastFire)
	}
	e.poll(t, 1, time.Minute)
	if n := len(e.engine.started()); n != 1 {
		t.Errorf("the next fire started %d runs", n)
	}

	// A storage failure of the engine is returned (Lambda retries the
	// event); the retry starts the same run once.
	e.engine.end(e.engine.started()[0].RunID)
	if err := e.svc.RunEnded(ctx, tr.ID, e.engine.started()[0].RunID); err != nil {
		t.Fatal(err)
	}
	ev := trigger.FireEvent{TriggerID: tr.ID, Version: 1, ScheduledTime: t0.Add(10 * time.Minute)}
	e.engine.failNext(errs.E("engine", errs.Unavailable, "STORAGE_UNAVAILABLE", "retry"))
	if out, err := e.svc.Fire(ctx, ev); err == nil || out != "failed" {
		t.Errorf("unavailable engine: %q %v", out, err)
	}
	for range 2 {
		if out, err := e.svc.Fire(ctx, ev); err != nil || out != "started" {
			t.Errorf("retried fire: %q %v", out, err)
		}
	}
	if n := len(e.engine.started()); n != 2 {
		t.Errorf("%d runs after a fire delivered twice, want 2", n)
	}

	// An older version (the schedule changed since) is ignored.
	if out, err := e.svc.Fire(ctx, trigger.FireEvent{TriggerID: tr.ID, Version: 0, ScheduledTime: t0.Add(11 * time.Minute)}); out != "" || err != nil {
		t.Errorf("stale fire: %q %v", out, err)
	}
	decode(t, e.as(t, "a", "DELETE", "/api/workflows/"+wf+"/triggers/"+tr.ID, ""), 204, nil)
	if out, err := e.svc.Fire(ctx, trigger.FireEvent{TriggerID: tr.ID, Version: 1, ScheduledTime: t0.Add(12 * time.Minute)}); out != "" || err != nil {
		t.Errorf("fire of a deleted trigger: %q %v", out, err)
	}
	if err := e.svc.RunEnded(ctx, tr.ID, e.engine.started()[1].RunID); err != nil {
		t.Errorf("RunEnded of a deleted trigger: %v", err)
	}
	if n := len(e.engine.started()); n != 2 {
		t.Errorf("%d runs", n)
	}
}

// TestStaleMarkers: a marker naming a run that never started (the process
// died between the marker and the start) is recovered by the next fire,
// which starts that run; a marker naming a run that ended without
// RunEnded reaching the trigger is released by the next fire.
func TestStaleMarkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	wf := e.workflow(t, "a")
	tr := e.create(t, "a", wf, `{"type":"schedule","schedule":"rate(1 minute)"}`)
	orphan := newID()
	if ok, err := e.triggers.SetActive(ctx, tr.ID, orphan, t0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	e.poll(t, 1, time.Minute)
	runs := e.engine.started()
	if len(runs) != 1 || runs[0].RunID != orphan {
		t.Fatalf("runs %+v, want the interrupted run started", runs)
	}
	if got := e.get(t, "a", wf, tr.ID); got.ActiveRunID != orphan || got.LastFire.Outcome != "skipped" {
		t.Errorf("after recovery: %+v", got)
	}
	// The run ends, but RunEnded is lost: the next fire ends the marker
	// and starts its own run.
	e.engine.end(orphan)
	e.poll(t, 1, time.Minute)
	runs = e.engine.started()
	if len(runs) != 2 || runs[1].RunID != trigger.FireRunID(tr.ID, t0.Add(2*time.Minute)) {
		t.Fatalf("runs %+v, want the second minute's fire", runs)
	}
	if got := e.get(t, "a", wf, tr.ID); got.ActiveRunID != runs[1].RunID {
		t.Errorf("marker %q, want %q", got.ActiveRunID, runs[1].RunID)
	}
}

// TestAtScheduleFiresOnce: a one-time schedule fires at its time, once,
// and then has nothing due.
func TestAtScheduleFiresOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	tr := e.create(t, "a", wf, `{"type":"schedule","schedule":"at(2026-03-07T18:05:00)","timezone":"Europe/Paris"}`)
	if tr.NextFireAt == nil || !tr.NextFireAt.Equal(time.Date(2026, 3, 7, 17, 5, 0, 0, time.UTC)) {
		t.Fatalf("nextFireAt %v", tr.NextFireAt)
	}
	e.poll(t, 10, time.Minute)
	runs := e.engine.started()
	if len(runs) != 1 || runs[0].RunID != trigger.FireRunID(tr.ID, time.Date(2026, 3, 7, 17, 5, 0, 0, time.UTC)) {
		t.Fatalf("runs %+v", runs)
	}
	if due, err := e.due.Due(context.Background(), e.clock.Now().Add(1000*time.Hour), 10); err != nil || len(due) != 0 {
		t.Errorf("still due: %+v %v", due, err)
	}
	if got := e.get(t, "a", wf, tr.ID); got.NextFireAt != nil {
		t.Errorf("nextFireAt after the fire: %v", got.NextFireAt)
	}
}

// TestConcurrentFires: fires of a skip trigger racing each other start
// one run: the marker is taken by one conditional write.
func TestConcurrentFires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	tr := e.create(t, "a", wf, `{"type":"schedule","schedule":"rate(1 minute)"}`)
	var wg sync.WaitGroup
	outcomes := make([]string, 8)
	for i := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.svc.Fire(context.Background(), trigger.FireEvent{TriggerID: tr.ID, Version: 1, ScheduledTime: t0.Add(time.Duration(i+1) * time.Minute)})
			if err != nil {
				t.Error(err)
			}
			outcomes[i] = out
		}()
	}
	wg.Wait()
	started := 0
	for _, o := range outcomes {
		if o == trigger.OutcomeStarted {
			started++
		} else if o != trigger.OutcomeSkipped {
			t.Errorf("outcome %q", o)
		}
	}
	if started != 1 || len(e.engine.started()) != 1 {
		t.Errorf("%d fires started, %d runs; want 1", started, len(e.engine.started()))
	}
}

// TestConcurrentCreatesKeepTheLimit: creations racing at the limit stop
// at exactly 20.
func TestConcurrentCreatesKeepTheLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	var wg sync.WaitGroup
	codes := make([]int, trigger.MaxPerUser+6)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = e.as(t, "a", "POST", "/api/workflows/"+wf+"/triggers", `{"type":"webhook"}`).Code
		}()
	}
	wg.Wait()
	created := 0
	for _, c := range codes {
		switch c {
		case 201:
			created++
		case 409, 503: // the limit, or a transaction conflict under the race
		default:
			t.Errorf("status %d", c)
		}
	}
	ts, err := e.triggers.WorkflowTriggers(context.Background(), wf)
	if err != nil || len(ts) != created || created > trigger.MaxPerUser {
		t.Fatalf("%d created, %d stored (%v); at most %d", created, len(ts), err, trigger.MaxPerUser)
	}
	// The counter agrees with what is stored: exactly the rest fit.
	for range trigger.MaxPerUser - created {
		e.create(t, "a", wf, `{"type":"webhook"}`)
	}
	errorOf(t, e.as(t, "a", "POST", "/api/workflows/"+wf+"/triggers", `{"type":"webhook"}`), 409)
}
