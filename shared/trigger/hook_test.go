package trigger_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/webhook"
)

type hookEnv struct {
	*env
	wf   string
	trig view
}

func newHookEnv(t *testing.T) hookEnv {
	t.Helper()
	e := newEnv(t)
	wf := e.workflow(t, "a")
	return hookEnv{env: e, wf: wf, trig: e.create(t, "a", wf, `{"type":"webhook"}`)}
}

// signed returns the headers of a call of body signed now, with key as
// its Idempotency-Key when not empty.
func (h hookEnv) signed(body []byte, key string) map[string]string {
	m := map[string]string{webhook.Header: webhook.Sign(h.trig.Secret, h.clock.Now(), body)}
	if key != "" {
		m["Idempotency-Key"] = key
	}
	return m
}

func TestHookStartsRun(t *testing.T) {
	t.Parallel()
	h := newHookEnv(t)
	body := []byte(`{"order":42,"items":["a","b"]}`)
	var out struct{ Data struct{ RunID string } }
	decode(t, h.hook(t, h.trig.ID, body, h.signed(body, "delivery-1")), 202, &out)
	started := h.engine.started()
	if len(started) != 1 {
		t.Fatalf("%d runs started", len(started))
	}
	r := started[0]
	if r.RunID != out.Data.RunID || r.TriggerType != "webhook" || r.TriggerID != h.trig.ID || r.WorkflowID != h.wf ||
		r.UserID != h.users["a"].id || r.Input["order"] != float64(42) {
		t.Errorf("started %+v for answer %q", r, out.Data.RunID)
	}
	if got := h.get(t, "a", h.wf, h.trig.ID); got.LastFire == nil || got.LastFire.Outcome != "started" || got.LastFire.RunID != out.Data.RunID {
		t.Errorf("lastFire = %+v", got.LastFire)
	}
}

// TestDeletedAccountsTriggersStop: from the moment an account's deletion
// begins (its deletion record written, as DELETE /api/users/{id} does),
// before its erasure deletes anything, its webhook answers 404
// TRIGGER_NOT_FOUND to a well signed call and its schedule's fires are
// ignored: no run starts; another user's triggers go on.
func TestDeletedAccountsTriggersStop(t *testing.T) {
	t.Parallel()
	h := newHookEnv(t)
	sched := h.create(t, "a", h.wf, `{"type":"schedule","schedule":"rate(1 minute)","overlap":"allow"}`)
	wfB := h.workflow(t, "b")
	other := h.create(t, "b", wfB, `{"type":"webhook"}`)
	accounts := store.NewAccounts(h.db.DB, h.db.Users(), h.db.Sessions(), h.db.Data(), h.db.OAuth())
	if err := accounts.BeginDeletion(context.Background(), auth.User{ID: h.users["a"].id, Email: "a@example.com", CreatedAt: t0}, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"n":1}`)
	if code, _ := errorOf(t, h.hook(t, h.trig.ID, body, h.signed(body, "")), 404); code != trigger.CodeTriggerNotFound {
		t.Errorf("a signed call of the deleted account's webhook: %s, want %s", code, trigger.CodeTriggerNotFound)
	}
	h.poll(t, 3, time.Minute)
	signedB := map[string]string{webhook.Header: webhook.Sign(other.Secret, h.clock.Now(), body)}
	decode(t, h.hook(t, other.ID, body, signedB), 202, nil)
	for _, r := range h.engine.started() {
		if r.TriggerID == h.trig.ID || r.TriggerID == sched.ID {
			t.Errorf("a run of the deleted account's trigger started: %+v", r)
		}
	}
	if n := len(h.engine.started()); n != 1 {
		t.Errorf("%d runs started, want 1 (user b's webhook call)", n)
	}
}

// TestHookIdempotency: the same Idempotency-Key (or, without one, the
// same signature) within 24 h answers 200 with the same run and starts
// nothing; another key starts another run.
func TestHookIdempotency(t *testing.T) {
	t.Parallel()
	h := newHookEnv(t)
	body := []byte(`{"n":1}`)
	var first, again, other struct{ Data struct{ RunID string } }
	decode(t, h.hook(t, h.trig.ID, body, h.signed(body, "key-1")), 202, &first)
	h.clock.Advance(time.Hour) // re-signed later, same key
	decode(t, h.hook(t, h.trig.ID, body, h.signed(body, "key-1")), 200, &again)
	if again.Data.RunID != first.Data.RunID {
		t.Errorf("replay: run %q, want %q", again.Data.RunID, first.Data.RunID)
	}
	h.clock.Advance(time.Second) // a new signature (the same t would be the same call)
	decode(t, h.hook(t, h.trig.ID, body, h.signed(body, "key-2")), 202, &other)
	if other.Data.RunID == first.Data.RunID {
		t.Error("another key got the same run")
	}
	if n := len(h.engine.started()); n != 2 {
		t.Errorf("%d runs started, want 2", n)
	}
	// The same key with another body is refused.
	body2 := []byte(`{"n":2}`)
	if code, _ := errorOf(t, h.hook(t, h.trig.ID, body2, h.signed(body2, "key-1")), 409); code != trigger.CodeIdempotencyKeyReused {
		t.Errorf("key reused with another body: %s", code)
	}
	// Without a key, the signature deduplicates: the same signed request
	// sent twice starts one run.
	sig := h.signed(body2, "")
	var s1, s2 struct{ Data struct{ RunID string } }
	decode(t, h.hook(t, h.trig.ID, body2, sig), 202, &s1)
	decode(t, h.hook(t, h.trig.ID, body2, sig), 200, &s2)
	if s1.Data.RunID != s2.Data.RunID {
		t.Errorf("same signature: runs %q and %q", s1.Data.RunID, s2.Data.RunID)
	}
	// After 24 hours the key is forgotten.
	h.clock.Advance(trigger.DeliveryTTL + time.Second)
	var later struct{ Data struct{ RunID string } }
	decode(t, h.hook(t, h.trig.ID, body, h.signed(body, "key-1")), 202, &later)
	if later.Data.RunID == first.Data.RunID {
		t.Error("a key older than 24 h still deduplicates")
	}
	if n := len(h.engine.started()); n != 4 {
		t.Errorf("%d runs started, want 4", n)
	}
}

// TestHookReplayVariants: a captured call, with or without an
// Idempotency-Key, sent again with any key or reformatted, answers 200
// with the same run or 401, and never starts a second run.
func TestHookReplayVariants(t *testing.T) {
	t.Parallel()
	for _, origKey := range []string{"", "original-key"} {
		t.Run("key="+origKey, func(t *testing.T) {
			t.Parallel()
			h := newHookEnv(t)
			body := []byte(`{"order":7}`)
			captured := h.signed(body, origKey)
			var first struct{ Data struct{ RunID string } }
			decode(t, h.hook(t, h.trig.ID, body, captured), 202, &first)
			sig := captured[webhook.Header]
			ts, v1, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",v1=")
			h.clock.Advance(10 * time.Second) // still within the tolerance
			withKey := func(header, key string) map[string]string {
				m := map[string]string{webhook.Header: header}
				if key != "" {
					m["Idempotency-Key"] = key
				}
				return m
			}
			other := strings.Repeat("ab", 32) // well-formed, matches nothing
			for _, tc := range []struct {
				name   string
				header map[string]string
				status int // 200: the same run; 401: refused
			}{
				{"as captured", withKey(sig, origKey), 200},
				{"with no key", withKey(sig, ""), 200},
				{"with a new key", withKey(sig, "attacker-1"), 200},
				{"with another new key", withKey(sig, "attacker-2"), 200},
				{"v1 before t", withKey("v1="+v1+",t="+ts, "attacker-3"), 200},
				{"v1 twice", withKey(sig+",v1="+v1, "attacker-4"), 200},
				{"a non-matching v1 added", withKey(sig+",v1="+other, "attacker-5"), 200},
				{"a non-matching v1 first", withKey("t="+ts+",v1="+other+",v1="+v1, "attacker-6"), 200},
				{",x=1 appended", withKey(sig+",x=1", "attacker-7"), 401},
				{",v1=00 appended", withKey(sig+",v1=00", "attacker-8"), 401},
				{"upper-case hex", withKey("t="+ts+",v1="+strings.ToUpper(v1), "attacker-9"), 401},
				{"a space after the comma", withKey("t="+ts+", v1="+v1, "attacker-10"), 401},
				{"t with a leading zero", withKey("t=0"+ts+",v1="+v1, "attacker-11"), 401},
				{"a trailing comma", withKey(sig+",", "attacker-12"), 401},
			} {
				rec := h.hook(t, h.trig.ID, body, tc.header)
				if tc.status == 401 {
					if code, _ := errorOf(t, rec, 401); code != webhook.CodeInvalidSignature {
						t.Errorf("%s: %s, want INVALID_SIGNATURE", tc.name, code)
					}
					continue
				}
				var again struct{ Data struct{ RunID string } }
				decode(t, rec, 200, &again)
				if again.Data.RunID != first.Data.RunID {
					t.Errorf("%s: run %q, want %q", tc.name, again.Data.RunID, first.Data.RunID)
				}
			}
			// The same replay sent many times at once, each with its own
			// key: still the one run.
			var wg sync.WaitGroup
			codes := make([]int, 8)
			for i := range codes {
				wg.Go(func() {
					codes[i] = h.hook(t, h.trig.ID, body, withKey(sig, fmt.Sprintf("burst-%d", i))).Code
				})
			}
			wg.Wait()
			for i, c := range codes {
				if c != 200 {
					t.Errorf("burst %d: status %d, want 200", i, c)
				}
			}
			if started := h.engine.started(); len(started) != 1 || started[0].RunID != first.Data.RunID {
				t.Errorf("started %d runs (%+v), want the one run %q", len(started), started, first.Data.RunID)
			}
		})
	}
}

// TestHookReplayOfARepeat: a call that repeated an earlier one through
// its Idempotency-Key (re-signed later), captured and replayed with
// another key, names that same run: its signature was recorded too.
func TestHookReplayOfARepeat(t *testing.T) {
	t.Parallel()
	h := newHookEnv(t)
	body := []byte(`{"n":1}`)
	var first, second, replay struct{ Data struct{ RunID string } }
	decode(t, h.hook(t, h.trig.ID, body, h.signed(body, "k")), 202, &first)
	h.clock.Advance(time.Minute)
	repeat := h.signed(body, "k")
	decode(t, h.hook(t, h.trig.ID, body, repeat), 200, &second)
	repeat["Idempotency-Key"] = "another"
	decode(t, h.hook(t, h.trig.ID, body, repeat), 200, &replay)
	if second.Data.RunID != first.Data.RunID || replay.Data.RunID != first.Data.RunID {
		t.Errorf("runs %q, %q, %q: want one", first.Data.RunID, second.Data.RunID, replay.Data.RunID)
	}
	// A key reused with another body is refused and records nothing: its
	// signature, sent again with a fresh key, is a first call.
	body2 := []byte(`{"n":2}`)
	reused := h.signed(body2, "k")
	if code, _ := errorOf(t, h.hook(t, h.trig.ID, body2, reused), 409); code != trigger.CodeIdempotencyKeyReused {
		t.Errorf("key reused with another body: %s", code)
	}
	reused["Idempotency-Key"] = "fresh"
	var fresh struct{ Data struct{ RunID string } }
	decode(t, h.hook(t, h.trig.ID, body2, reused), 202, &fresh)
	if n := len(h.engine.started()); n != 2 {
		t.Errorf("%d runs started, want 2", n)
	}
}

// TestHookReplayDuringRotation: a call signed with both secrets of a
// rotation is recorded under both values, so that a replay keeping only
// one of them names the same run.
func TestHookReplayDuringRotation(t *testing.T) {
	t.Parallel()
	h := newHookEnv(t)
	var rot struct{ Data view }
	decode(t, h.as(t, "a", "POST", "/api/workflows/"+h.wf+"/triggers/"+h.trig.ID+"/rotate-secret", `{"previousSecretValidSeconds":600}`), 200, &rot)
	body := []byte(`{"n":1}`)
	oldSig := webhook.Sign(h.trig.Secret, h.clock.Now(), body)
	newSig := webhook.Sign(rot.Data.Secret, h.clock.Now(), body)
	_, oldV1, _ := strings.Cut(oldSig, ",v1=")
	var first struct{ Data struct{ RunID string } }
	decode(t, h.hook(t, h.trig.ID, body, map[string]string{webhook.Header: newSig + ",v1=" + oldV1}), 202, &first)
	for i, sig := range []string{oldSig, newSig} {
		var again struct{ Data struct{ RunID string } }
		decode(t, h.hook(t, h.trig.ID, body, map[string]string{webhook.Header: sig, "Idempotency-Key": fmt.Sprint("k", i)}), 200, &again)
		if again.Data.RunID != first.Data.RunID {
			t.Errorf("replay %d: run %q, want %q", i, again.Data.RunID, first.Data.RunID)
		}
	}
	if n := len(h.engine.started()); n != 1 {
		t.Errorf("%d runs started, want 1", n)
	}
}

// TestHookRecoversInterruptedStart: the delivery was stored with its run
// id but the run did not start (here the engine is unavailable; in life,
// the process died between the two). A retry with the same key starts
// that same run.
func TestHookRecoversInterruptedStart(t *testing.T) {
	t.Parallel()
	h := newHookEnv(t)
	body := []byte(`{"n":1}`)
	h.engine.failNext(errs.E("engine", errs.Unavailable, "STORAGE_UNAVAILABLE", "try again"))
	if code, _ := errorOf(t, h.hook(t, h.trig.ID, body, h.signed(body, "k")), 503); code != "STORAGE_UNAVAILABLE" {
		t.Fatalf("first call: %s", code)
	}
	if n := len(h.engine.started()); n != 0 {
		t.Fatalf("%d runs started", n)
	}
	var out struct{ Data struct{ RunID string } }
	decode(t, h.hook(t, h.trig.ID, body, h.signed(body, "k")), 200, &out)
	started := h.engine.started()
	if len(started) != 1 || started[0].RunID != out.Data.RunID || started[0].RunID != h.engine.calls[0].RunID {
		t.Errorf("retry started %+v, answered %q; the first call chose %q", started, out.Data.RunID, h.engine.calls[0].RunID)
	}
}

// TestHookRunRefused: the engine's refusals reach the caller and are
// visible on the trigger.
func TestHookRunRefused(t *testing.T) {
	t.Parallel()
	h := newHookEnv(t)
	body := []byte(`{"n":1}`)
	limited := errs.E("engine", errs.RateLimited, "RATE_LIMITED", "too many runs")
	limited.RetryAfter = 30
	h.engine.failNext(limited)
	rec := h.hook(t, h.trig.ID, body, h.signed(body, "a"))
	if code, _ := errorOf(t, rec, 429); code != "RATE_LIMITED" || rec.Header().Get("Retry-After") != "30" {
		t.Errorf("rate limited: %s, Retry-After %q", code, rec.Header().Get("Retry-After"))
	}
	h.engine.failNext(errs.E("engine", errs.Invalid, "INVALID_INPUT", "input: name is required"))
	if code, _ := errorOf(t, h.hook(t, h.trig.ID, body, h.signed(body, "b")), 400); code != "INVALID_INPUT" {
		t.Errorf("invalid input: %s", code)
	}
	got := h.get(t, "a", h.wf, h.trig.ID)
	if got.LastFire == nil || got.LastFire.Outcome != "failed" || got.LastFire.Error == nil || got.LastFire.Error.Code != "INVALID_INPUT" ||
		got.LastFire.Error.Message != "input: name is required" {
		t.Errorf("lastFire = %+v", got.LastFire)
	}
}

func TestHookRefusals(t *testing.T) {
	t.Parallel()
	h := newHookEnv(t)
	now := h.clock.Now()
	body := []byte(`{"n":1}`)
	sched := h.create(t, "a", h.wf, `{"type":"schedule","schedule":"rate(1 hour)"}`)
	disabled := h.create(t, "a", h.wf, `{"type":"webhook","enabled":false}`)
	big := []byte(`{"x":"` + strings.Repeat("a", trigger.MaxWebhookBody) + `"}`)
	sign := func(b []byte, at time.Time) map[string]string {
		return map[string]string{webhook.Header: webhook.Sign(h.trig.Secret, at, b)}
	}
	for _, tc := range []struct {
		name   string
		id     string
		body   []byte
		header map[string]string
		status int
		code   string
	}{
		{"malformed id", "nope", body, sign(body, now), 400, "INVALID_ID"},
		{"unknown trigger", newID(), body, sign(body, now), 404, trigger.CodeTriggerNotFound},
		{"disabled", disabled.ID, body, map[string]string{webhook.Header: webhook.Sign(disabled.Secret, now, body)}, 404, trigger.CodeTriggerNotFound},
		{"a schedule trigger", sched.ID, body, sign(body, now), 404, trigger.CodeTriggerNotFound},
		{"no signature", h.trig.ID, body, nil, 401, webhook.CodeInvalidSignature},
		{"malformed signature", h.trig.ID, body, map[string]string{webhook.Header: "sha256=abc"}, 401, webhook.CodeInvalidSignature},
		{"wrong secret", h.trig.ID, body, map[string]string{webhook.Header: webhook.Sign("whsec_guess", now, body)}, 401, webhook.CodeInvalidSignature},
		{"tampered body", h.trig.ID, []byte(`{"n":2}`), sign(body, now), 401, webhook.CodeInvalidSignature},
		{"expired: 301 s old", h.trig.ID, body, sign(body, now.Add(-301*time.Second)), 401, webhook.CodeSignatureExpired},
		{"expired: 301 s ahead", h.trig.ID, body, sign(body, now.Add(301*time.Second)), 401, webhook.CodeSignatureExpired},
		{"body over 256 KiB", h.trig.ID, big, sign(big, now), 413, "PAYLOAD_TOO_LARGE"},
		{"not JSON", h.trig.ID, []byte(`order=42`), sign([]byte(`order=42`), now), 400, "INVALID_JSON"},
		{"JSON but not an object", h.trig.ID, []byte(`[1,2]`), sign([]byte(`[1,2]`), now), 400, "INVALID_JSON"},
		{"empty body", h.trig.ID, nil, sign(nil, now), 400, "INVALID_JSON"},
		{"text/plain", h.trig.ID, body, map[string]string{webhook.Header: webhook.Sign(h.trig.Secret, now, body), "Content-Type": "text/plain"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"bad Idempotency-Key", h.trig.ID, body, map[string]string{webhook.Header: webhook.Sign(h.trig.Secret, now, body), "Idempotency-Key": "has space"}, 400, trigger.CodeInvalidIdempotencyKey},
		{"long Idempotency-Key", h.trig.ID, body, map[string]string{webhook.Header: webhook.Sign(h.trig.Secret, now, body), "Idempotency-Key": strings.Repeat("k", 256)}, 400, trigger.CodeInvalidIdempotencyKey},
	} {
		rec := h.hook(t, tc.id, tc.body, tc.header)
		if code, _ := errorOf(t, rec, tc.status); code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, rec.Code, code, tc.status, tc.code)
		}
	}
	if n := len(h.engine.calls); n != 0 {
		t.Errorf("refused calls reached the engine %d times", n)
	}
	// At the edges of the window, and with a charset, calls pass.
	for i, at := range []time.Time{now.Add(-300 * time.Second), now.Add(300 * time.Second)} {
		b := []byte(`{"edge":` + string(rune('0'+i)) + `}`)
		decode(t, h.hook(t, h.trig.ID, b, sign(b, at)), 202, nil)
	}
	b := []byte(`{"charset":true}`)
	hdr := sign(b, now)
	hdr["Content-Type"] = "application/json; charset=utf-8"
	decode(t, h.hook(t, h.trig.ID, b, hdr), 202, nil)
	// A body of exactly 256 KiB is taken.
	exact := []byte(`{"x":"` + strings.Repeat("a", trigger.MaxWebhookBody-8) + `"}`)
	if len(exact) != trigger.MaxWebhookBody {
		t.Fatalf("exact body has %d bytes", len(exact))
	}
	decode(t, h.hook(t, h.trig.ID, exact, sign(exact, now)), 202, nil)
	// A browser's cross-site request is not a webhook sender's: refused.
	hdr = sign(body, now)
	hdr["Origin"], hdr["Sec-Fetch-Site"] = "https://evil.example", "cross-site"
	errorOf(t, h.hook(t, h.trig.ID, body, hdr), 403)
	if n := len(h.engine.started()); n != 4 {
		t.Errorf("%d runs, want 4", n)
	}
}

// TestHookBodyTooLarge: a body over MaxWebhookBody is 413
// PAYLOAD_TOO_LARGE naming the limit, whether its length is declared or
// only found while reading (a chunked body).
func TestHookBodyTooLarge(t *testing.T) {
	t.Parallel()
	h := newHookEnv(t)
	big := []byte(`{"x":"` + strings.Repeat("a", trigger.MaxWebhookBody) + `"}`)
	for _, declared := range []bool{true, false} {
		req := httptest.NewRequest("POST", "/hooks/"+h.trig.ID, bytes.NewReader(big))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhook.Header, webhook.Sign(h.trig.Secret, h.clock.Now(), big))
		if !declared {
			req.ContentLength = -1
		}
		rec := httptest.NewRecorder()
		h.api.ServeHTTP(rec, req)
		var body httpapi.ErrorBody
		decode(t, rec, 413, &body)
		if body.Code != "PAYLOAD_TOO_LARGE" || !strings.Contains(body.Message, "256 KiB (262144 bytes)") {
			t.Errorf("declared length %v: %s %q, want PAYLOAD_TOO_LARGE naming 256 KiB (262144 bytes)", declared, body.Code, body.Message)
		}
	}
	if n := len(h.engine.calls); n != 0 {
		t.Errorf("oversized calls reached the engine %d times", n)
	}
}
