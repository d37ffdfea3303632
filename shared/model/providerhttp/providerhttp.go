// Package providerhttp is the error plumbing the HTTP model providers
// (OpenAI, Anthropic) share: keeping the status and headers of a
// provider's answer, which the SDKs' errors drop (Answer, Record); the
// wait a provider asks for (RetryAfter, one cap for all); and the mapping
// of an error answer's status to the service's error (StatusError).
package providerhttp

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/truncate"
)

// Client-safe messages of StatusError.
const (
	MsgUnavailable = "the model provider is unavailable; retry shortly"
	MsgCredentials = "the model provider rejected the service's credentials"
	MsgRejected    = "the model provider could not handle the request"
)

// MaxRetryAfter bounds RetryAfter: a provider asking for a longer wait is
// told to the client as this one (an hour).
const MaxRetryAfter = 3600

// maxExcerpt bounds the provider's error message kept in a cause, in
// bytes.
const maxExcerpt = 300

// Excerpt returns the start of a provider's error message to keep in a
// cause: at most 300 bytes, cut at a character boundary and marked "…"
// when cut.
func Excerpt(message string) string { return truncate.Ellipsis(message, maxExcerpt) }

// Answer receives the status and headers of the provider's last answer to
// a request. Its methods are safe for concurrent use.
type Answer struct {
	mu     sync.Mutex
	status int
	header http.Header
}

type answerKey struct{}

// WithAnswer returns ctx carrying a new Answer, which Record fills for
// every request made with the returned context.
func WithAnswer(ctx context.Context) (context.Context, *Answer) {
	a := &Answer{}
	return context.WithValue(ctx, answerKey{}, a), a
}

// Record keeps res's status and headers in the Answer of req's context,
// if it has one and res is not nil.
func Record(req *http.Request, res *http.Response) {
	a, ok := req.Context().Value(answerKey{}).(*Answer)
	if !ok || res == nil {
		return
	}
	a.mu.Lock()
	a.status, a.header = res.StatusCode, res.Header
	a.mu.Unlock()
}

// Get returns the recorded status and headers: 0 and empty headers when
// no answer came (or a is nil).
func (a *Answer) Get() (int, http.Header) {
	if a == nil {
		return 0, http.Header{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.header == nil {
		return a.status, http.Header{}
	}
	return a.status, a.header
}

// RetryAfter returns the wait in whole seconds, rounded up, that h asks
// for at now: Retry-After in seconds or as an HTTP date, else OpenAI's
// Retry-After-Ms; at most MaxRetryAfter; 0 when it asks for none, a past
// date or a value it cannot read.
func RetryAfter(h http.Header, now time.Time) int {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			return ceilSeconds(s)
		}
		if t, err := http.ParseTime(v); err == nil {
			return ceilSeconds(t.Sub(now).Seconds())
		}
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil {
			return ceilSeconds(ms / 1000)
		}
	}
	return 0
}

func ceilSeconds(s float64) int {
	if math.IsNaN(s) || s <= 0 {
		return 0
	}
	return int(math.Ceil(min(s, MaxRetryAfter)))
}

// StatusError maps an error answer of the provider by its status: 401 and
// 403 are Internal MODEL_PROVIDER_ERROR (the service's credentials); 408,
// 429 and 5xx (Anthropic's 529 "overloaded" included) are Unavailable
// MODEL_UNAVAILABLE with RetryAfter from header; other 4xx are Internal
// MODEL_PROVIDER_ERROR (the request); no status (an error in a stream
// that answered 200) is Unavailable. cause is for the logs and must hold
// neither the API key nor a raw body.
func StatusError(op string, status int, header http.Header, cause error) *errs.Error {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return errs.E(op, errs.Internal, model.CodeProviderError, MsgCredentials).WithCause(cause)
	case status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests:
		return errs.E(op, errs.Internal, model.CodeProviderError, MsgRejected).WithCause(cause)
	}
	e := errs.E(op, errs.Unavailable, model.CodeUnavailable, MsgUnavailable).WithCause(cause)
	e.RetryAfter = RetryAfter(header, time.Now())
	return e
}
