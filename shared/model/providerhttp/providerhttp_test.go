package providerhttp_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/model/providerhttp"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7},
		{"seconds with spaces", map[string]string{"Retry-After": " 7 "}, 7},
		{"fractional seconds round up", map[string]string{"Retry-After": "1.2"}, 2},
		{"zero", map[string]string{"Retry-After": "0"}, 0},
		{"negative", map[string]string{"Retry-After": "-5"}, 0},
		{"not a number", map[string]string{"Retry-After": "NaN"}, 0},
		{"infinite", map[string]string{"Retry-After": "+Inf"}, providerhttp.MaxRetryAfter},
		{"at the cap", map[string]string{"Retry-After": "3600"}, 3600},
		{"over the cap", map[string]string{"Retry-After": "3601"}, providerhttp.MaxRetryAfter},
		{"a day", map[string]string{"Retry-After": "86400"}, providerhttp.MaxRetryAfter},
		{"far over", map[string]string{"Retry-After": "1e300"}, providerhttp.MaxRetryAfter},
		{"a date", map[string]string{"Retry-After": date(90 * time.Second)}, 90},
		{"a date past", map[string]string{"Retry-After": date(-time.Minute)}, 0},
		{"a date now", map[string]string{"Retry-After": date(0)}, 0},
		{"a date over the cap", map[string]string{"Retry-After": date(48 * time.Hour)}, providerhttp.MaxRetryAfter},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"milliseconds", map[string]string{"Retry-After-Ms": "2500"}, 3},
		{"milliseconds over the cap", map[string]string{"Retry-After-Ms": "9000000"}, providerhttp.MaxRetryAfter},
		{"seconds win over milliseconds", map[string]string{"Retry-After": "4", "Retry-After-Ms": "100"}, 4},
		{"bad milliseconds", map[string]string{"Retry-After-Ms": "x"}, 0},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		if got := providerhttp.RetryAfter(h, now); got != tc.want {
			t.Errorf("%s: RetryAfter(%v) = %d, want %d", tc.name, tc.header, got, tc.want)
		}
	}
}

func TestStatusError(t *testing.T) {
	t.Parallel()
	cause := errors.New("openai: status N")
	for _, tc := range []struct {
		status int
		kind   errs.Kind
		code   string
		msg    string
		retry  int
	}{
		{0, errs.Unavailable, model.CodeUnavailable, providerhttp.MsgUnavailable, 5},
		{400, errs.Internal, model.CodeProviderError, providerhttp.MsgRejected, 0},
		{401, errs.Internal, model.CodeProviderError, providerhttp.MsgCredentials, 0},
		{403, errs.Internal, model.CodeProviderError, providerhttp.MsgCredentials, 0},
		{404, errs.Internal, model.CodeProviderError, providerhttp.MsgRejected, 0},
		{408, errs.Unavailable, model.CodeUnavailable, providerhttp.MsgUnavailable, 5},
		{413, errs.Internal, model.CodeProviderError, providerhttp.MsgRejected, 0},
		{422, errs.Internal, model.CodeProviderError, providerhttp.MsgRejected, 0},
		{429, errs.Unavailable, model.CodeUnavailable, providerhttp.MsgUnavailable, 5},
		{500, errs.Unavailable, model.CodeUnavailable, providerhttp.MsgUnavailable, 5},
		{503, errs.Unavailable, model.CodeUnavailable, providerhttp.MsgUnavailable, 5},
		{529, errs.Unavailable, model.CodeUnavailable, providerhttp.MsgUnavailable, 5},
	} {
		h := http.Header{"Retry-After": {"5"}}
		e := providerhttp.StatusError("op", tc.status, h, cause)
		if e.Kind != tc.kind || e.Code != tc.code || e.Message != tc.msg || e.RetryAfter != tc.retry || !errors.Is(e, cause) {
			t.Errorf("%d: %v (kind %v, retry %d), want %v %s %q retry %d", tc.status, e, e.Kind, e.RetryAfter, tc.kind, tc.code, tc.msg, tc.retry)
		}
	}
}

// TestAnswer: Record keeps the last answer's status and headers for a
// request made with WithAnswer's context, and nothing for another.
func TestAnswer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "9")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	ctx, a := providerhttp.WithAnswer(t.Context())
	if s, h := a.Get(); s != 0 || len(h) != 0 {
		t.Fatalf("before any answer: %d %v", s, h)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	providerhttp.Record(req, res)
	if s, h := a.Get(); s != 429 || h.Get("Retry-After") != "9" {
		t.Errorf("recorded %d %v", s, h)
	}
	// A request without an Answer, and a nil response, record nothing.
	plain, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL, nil)
	providerhttp.Record(plain, res)
	providerhttp.Record(req, nil)
	if s, _ := a.Get(); s != 429 {
		t.Errorf("after unrelated records: %d", s)
	}
	var none *providerhttp.Answer
	if s, h := none.Get(); s != 0 || h == nil {
		t.Errorf("nil answer: %d %v", s, h)
	}
}

// TestExcerpt: a long message is cut at a character boundary, never
// inside a multi-byte character, and marked.
func TestExcerpt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		cut      bool
	}{
		{"short", "rate limited", false},
		{"at the bound", strings.Repeat("a", 300), false},
		{"ascii over", strings.Repeat("a", 301), true},
		{"two-byte at the cut", strings.Repeat("a", 299) + "é" + "tail", true},
		{"three-byte at the cut", strings.Repeat("a", 299) + "€" + "tail", true},
		{"four-byte runs", strings.Repeat("😀", 100), true},
	} {
		got := providerhttp.Excerpt(tc.in)
		if !utf8.ValidString(got) {
			t.Errorf("%s: %q is not valid UTF-8", tc.name, got)
		}
		if tc.cut != strings.HasSuffix(got, "…") || (!tc.cut && got != tc.in) {
			t.Errorf("%s: %q, cut %v", tc.name, got, tc.cut)
		}
		if body := strings.TrimSuffix(got, "…"); len(body) > 300 || !strings.HasPrefix(tc.in, body) {
			t.Errorf("%s: kept %d bytes, not a prefix of at most 300", tc.name, len(body))
		}
	}
}
