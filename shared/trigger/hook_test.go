package trigger_test

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
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
