package lambdahttp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/logging"
)

// wait bounds every step that could hang if the adapter buffered instead of
// streaming: the tests fail rather than hang.
const wait = 5 * time.Minute

const (
	getFixture  = "testdata/function-url-get-stream.json"
	postFixture = "testdata/function-url-post-base64.json"
	urlDomain   = "k3x7q2m9vhd4tz8wbn5rlcy6pa1eofgu.lambda-url.us-east-1.on.aws"
	convPath    = "/api/conversations/0b8e6f2c-4d1a-4c7e-9f3b-2a5d8c1e7f90"
	errorBody   = `{"error":"Internal Server Error","message":"internal error","code":"INTERNAL_ERROR"}` + "\n"
)

func readFixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadEvent(t *testing.T, path string) *events.LambdaFunctionURLRequest {
	t.Helper()
	var ev events.LambdaFunctionURLRequest
	if err := json.Unmarshal(readFixture(t, path), &ev); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &ev
}

// invoke runs the adapter for h, failing the test if it does not return
// within wait.
func invoke(t *testing.T, ctx context.Context, h http.Handler, ev *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	t.Helper()
	type result struct {
		resp *events.LambdaFunctionURLStreamingResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := lambdahttp.NewFunctionURLStreaming(h)(ctx, ev)
		done <- result{resp, err}
	}()
	select {
	case res := <-done:
		return res.resp, res.err
	case <-time.After(wait):
		t.Fatal("the adapter did not return")
		return nil, nil
	}
}

// mustInvoke is invoke for a call that must succeed.
func mustInvoke(t *testing.T, h http.Handler, ev *events.LambdaFunctionURLRequest) *events.LambdaFunctionURLStreamingResponse {
	t.Helper()
	return mustInvokeCtx(t, t.Context(), h, ev)
}

// mustInvokeCtx is mustInvoke with the invocation context ctx.
func mustInvokeCtx(t *testing.T, ctx context.Context, h http.Handler, ev *events.LambdaFunctionURLRequest) *events.LambdaFunctionURLStreamingResponse {
	t.Helper()
	resp, err := invoke(t, ctx, h, ev)
	if err != nil {
		t.Fatal(err)
	}
	if resp == nil || resp.Body == nil {
		t.Fatalf("response %+v has no body", resp)
	}
	return resp
}

// within runs f, failing the test if it does not return within wait.
func within[T any](t *testing.T, what string, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case res := <-done:
		return res.v, res.err
	case <-time.After(wait):
		t.Fatalf("%s did not finish", what)
		var zero T
		return zero, nil
	}
}

// readBody reads the rest of resp's body, failing the test if it does not
// end within wait.
func readBody(t *testing.T, resp *events.LambdaFunctionURLStreamingResponse) (string, error) {
	t.Helper()
	b, err := within(t, "reading the body", func() ([]byte, error) { return io.ReadAll(resp.Body) })
	return string(b), err
}

// mustReadBody is readBody for a body that must end cleanly.
func mustReadBody(t *testing.T, resp *events.LambdaFunctionURLStreamingResponse) string {
	t.Helper()
	s, err := readBody(t, resp)
	if err != nil {
		t.Fatalf("body %q: %v", s, err)
	}
	return s
}

// lockedBuffer is a log sink safe for the handler goroutine and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logCtx returns a context whose logger writes into the returned buffer, as
// a function's invocation context would carry its logger.
func logCtx(t *testing.T) (context.Context, *lockedBuffer) {
	logs := &lockedBuffer{}
	return logging.WithLogger(t.Context(), slog.New(slog.NewTextHandler(logs, nil))), logs
}

func TestFunctionURLStreamingStreamsTheBodyAsItIsWritten(t *testing.T) {
	t.Parallel()
	first := "event: token\ndata: {\"text\":\"Hel\"}\n\n"
	rest := "event: token\ndata: {\"text\":\"lo\"}\n\nevent: done\ndata: {}\n\n"
	gotHeaders := make(chan struct{})
	readFirst := make(chan struct{})
	handlerErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlerErr <- func() error {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			if _, ok := w.(http.Flusher); !ok {
				return errors.New("the ResponseWriter is not an http.Flusher")
			}
			// A flush before any body sends the headers.
			if err := http.NewResponseController(w).Flush(); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
			select {
			case <-gotHeaders:
			case <-time.After(wait):
				return errors.New("the adapter did not return the response at the first flush")
			}
			if _, err := io.WriteString(w, first); err != nil {
				return err
			}
			if err := http.NewResponseController(w).Flush(); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
			select {
			case <-readFirst:
			case <-time.After(wait):
				return errors.New("the test never read the first event: the body is not streamed")
			}
			_, err := io.WriteString(w, rest)
			return err
		}()
	})

	resp := mustInvoke(t, h, loadEvent(t, getFixture))
	close(gotHeaders)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d, want 200", resp.StatusCode)
	}
	if got := resp.Headers["Content-Type"]; got != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", got)
	}

	buf := make([]byte, len(first))
	if _, err := within(t, "reading the first event", func() (int, error) { return io.ReadFull(resp.Body, buf) }); err != nil {
		t.Fatalf("first event: %v", err)
	}
	if string(buf) != first {
		t.Errorf("first event %q, want %q", buf, first)
	}
	close(readFirst)
	if got := mustReadBody(t, resp); got != rest {
		t.Errorf("rest of the body %q, want %q", got, rest)
	}
	if err := <-handlerErr; err != nil {
		t.Error(err)
	}
}

func TestFunctionURLStreamingStatusHeadersAndCookies(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("Vary", "Origin")
		w.Header().Add("Vary", "Cookie")
		w.Header().Add("Set-Cookie", "wc_session=abc; Path=/; HttpOnly; Secure")
		http.SetCookie(w, &http.Cookie{Name: "theme", Value: "dark", Path: "/", SameSite: http.SameSiteLaxMode})
		w.WriteHeader(http.StatusCreated)
		// Frozen: neither of these reaches the response.
		w.Header().Set("X-Late", "1")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"data":{"id":"m1"}}`)
	})

	resp := mustInvoke(t, h, loadEvent(t, postFixture))
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("status %d, want 201", resp.StatusCode)
	}
	wantHeaders := map[string]string{"Content-Type": "application/json", "Vary": "Origin, Cookie"}
	if !reflect.DeepEqual(resp.Headers, wantHeaders) {
		t.Errorf("headers %v, want %v", resp.Headers, wantHeaders)
	}
	wantCookies := []string{"wc_session=abc; Path=/; HttpOnly; Secure", "theme=dark; Path=/; SameSite=Lax"}
	if !reflect.DeepEqual(resp.Cookies, wantCookies) {
		t.Errorf("cookies %q, want %q", resp.Cookies, wantCookies)
	}
	if got := mustReadBody(t, resp); got != `{"data":{"id":"m1"}}` {
		t.Errorf("body %q", got)
	}
}

func TestFunctionURLStreamingContentTypeIsSniffedWhenUnset(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "<!DOCTYPE html><html></html>")
	})
	resp := mustInvoke(t, h, loadEvent(t, getFixture))
	if got := resp.Headers["Content-Type"]; got != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q, want text/html; charset=utf-8", got)
	}
	mustReadBody(t, resp)
}

// seenRequest is what a handler saw of its request.
type seenRequest struct {
	Method, Path, EscapedPath, RawQuery, RequestURI string
	Host, RemoteAddr, Proto                         string
	Header                                          http.Header
	Query                                           map[string][]string
	ThemeCookie                                     string
	Body                                            string
	ContentLength                                   int64
	TLS                                             bool
	AWSRequestID                                    string
}

func captureRequest(seen chan<- seenRequest) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s := seenRequest{
			Method: r.Method, Path: r.URL.Path, EscapedPath: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
			RequestURI: r.RequestURI, Host: r.Host, RemoteAddr: r.RemoteAddr, Proto: r.Proto,
			Header: r.Header.Clone(), Query: r.URL.Query(), Body: string(b), ContentLength: r.ContentLength,
			TLS: r.TLS != nil,
		}
		if c, err := r.Cookie("theme"); err == nil {
			s.ThemeCookie = c.Value
		}
		if lc, ok := lambdacontext.FromContext(r.Context()); ok {
			s.AWSRequestID = lc.AwsRequestID
		}
		seen <- s
		w.WriteHeader(http.StatusNoContent)
	})
}

func TestFunctionURLStreamingRequest(t *testing.T) {
	t.Parallel()
	see := func(t *testing.T, ev *events.LambdaFunctionURLRequest) seenRequest {
		t.Helper()
		seen := make(chan seenRequest, 1)
		ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "aws-req-1"})
		resp, err := invoke(t, ctx, captureRequest(seen), ev)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("status %d, want 204", resp.StatusCode)
		}
		mustReadBody(t, resp)
		return <-seen
	}
	single := func(t *testing.T, h http.Header, key, want string) {
		t.Helper()
		if got := h.Values(key); len(got) != 1 || got[0] != want {
			t.Errorf("%s header %q, want the one value %q", key, got, want)
		}
	}

	t.Run("POST with a base64 body", func(t *testing.T) {
		t.Parallel()
		s := see(t, loadEvent(t, postFixture))
		if s.Method != http.MethodPost || s.Path != convPath+"/messages" || s.RawQuery != "stream=true" {
			t.Errorf("request %s %s ? %s", s.Method, s.Path, s.RawQuery)
		}
		if s.RequestURI != convPath+"/messages?stream=true" {
			t.Errorf("RequestURI %q", s.RequestURI)
		}
		if want := `{"content":"Hello, wörld","attachments":[]}`; s.Body != want {
			t.Errorf("body %q, want %q", s.Body, want)
		}
		if s.ContentLength != 44 {
			t.Errorf("ContentLength %d, want 44", s.ContentLength)
		}
		// The event's cookies field and its cookie header agree; the
		// cookies are not sent twice.
		single(t, s.Header, "Cookie", "wc_session=s3ss10n.t0k3n; wc_csrf=c5rf-9d8e7f")
		single(t, s.Header, "Content-Type", "application/json")
		single(t, s.Header, "X-Forwarded-For", "203.0.113.7, 10.0.0.12")
		single(t, s.Header, "X-Forwarded-Proto", "https")
		if s.Host != urlDomain {
			t.Errorf("Host %q, want %q", s.Host, urlDomain)
		}
		if _, ok := s.Header["Host"]; ok {
			t.Error("the Host header stayed in r.Header")
		}
		if s.RemoteAddr != "203.0.113.7" {
			t.Errorf("RemoteAddr %q", s.RemoteAddr)
		}
		if !s.TLS {
			t.Error("r.TLS is nil")
		}
		if s.Proto != "HTTP/1.1" {
			t.Errorf("Proto %q", s.Proto)
		}
		if s.AWSRequestID != "aws-req-1" {
			t.Errorf("lambdacontext request id %q: the request context is not the invocation context", s.AWSRequestID)
		}
	})

	t.Run("GET with the cookies field only", func(t *testing.T) {
		t.Parallel()
		s := see(t, loadEvent(t, getFixture))
		if s.Method != http.MethodGet || s.Path != convPath+"/stream" {
			t.Errorf("request %s %s", s.Method, s.Path)
		}
		if s.RawQuery != "after=evt_41&lang=en%2DUS" {
			t.Errorf("raw query %q", s.RawQuery)
		}
		if want := map[string][]string{"after": {"evt_41"}, "lang": {"en-US"}}; !reflect.DeepEqual(s.Query, want) {
			t.Errorf("query %v, want %v", s.Query, want)
		}
		single(t, s.Header, "Cookie", "wc_session=s3ss10n.t0k3n; theme=dark")
		if s.ThemeCookie != "dark" {
			t.Errorf("r.Cookie(theme) %q, want dark", s.ThemeCookie)
		}
		// Function URL headers are comma-joined single values; kept so.
		single(t, s.Header, "Accept-Encoding", "gzip, deflate, br")
		single(t, s.Header, "Last-Event-Id", "evt_41")
		if s.Body != "" || s.ContentLength != 0 {
			t.Errorf("body %q (length %d), want none", s.Body, s.ContentLength)
		}
		if s.Host != urlDomain || s.RemoteAddr != "198.51.100.23" || !s.TLS {
			t.Errorf("Host %q RemoteAddr %q TLS %v", s.Host, s.RemoteAddr, s.TLS)
		}
	})

	t.Run("minimal event", func(t *testing.T) {
		t.Parallel()
		ev := loadEvent(t, getFixture)
		ev.Cookies = nil
		delete(ev.Headers, "x-forwarded-proto")
		ev.RequestContext.DomainName = ""
		ev.Headers["host"] = "chat.example.com"
		ev.Headers["cookie"] = "theme=light"
		s := see(t, ev)
		single(t, s.Header, "X-Forwarded-Proto", "https")
		single(t, s.Header, "Cookie", "theme=light")
		if s.Host != "chat.example.com" {
			t.Errorf("Host %q, want the host header", s.Host)
		}
	})
}

func TestFunctionURLStreamingBadEvents(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the handler ran") })
	for name, mutate := range map[string]func(*events.LambdaFunctionURLRequest){
		"invalid base64 body": func(ev *events.LambdaFunctionURLRequest) { ev.Body = "not base64!" },
		"invalid method":      func(ev *events.LambdaFunctionURLRequest) { ev.RequestContext.HTTP.Method = "GET /" },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ev := loadEvent(t, postFixture)
			mutate(ev)
			resp, err := invoke(t, t.Context(), h, ev)
			if err == nil || resp != nil {
				t.Errorf("got %+v, %v; want an error", resp, err)
			}
		})
	}
}

func TestFunctionURLStreamingHandlerWritesNoBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		h           http.HandlerFunc
		wantStatus  int
		wantHeaders map[string]string
	}{
		{"writes nothing", func(w http.ResponseWriter, r *http.Request) {}, http.StatusOK, nil},
		{"only WriteHeader(204)", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}, http.StatusNoContent, nil},
		{"headers only", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/api/conversations")
		}, http.StatusOK, map[string]string{"Location": "/api/conversations"}},
		{"1xx then nothing", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
		}, http.StatusOK, nil},
		{"body after 204 is refused", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
			if _, err := io.WriteString(w, "x"); !errors.Is(err, http.ErrBodyNotAllowed) {
				t.Errorf("Write after 204: %v, want http.ErrBodyNotAllowed", err)
			}
		}, http.StatusNoContent, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := mustInvoke(t, tc.h, loadEvent(t, getFixture))
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if !reflect.DeepEqual(resp.Headers, tc.wantHeaders) {
				t.Errorf("headers %v, want %v", resp.Headers, tc.wantHeaders)
			}
			if len(resp.Cookies) != 0 {
				t.Errorf("cookies %q", resp.Cookies)
			}
			if got := mustReadBody(t, resp); got != "" {
				t.Errorf("body %q, want none", got)
			}
		})
	}
}

func TestFunctionURLStreamingHeadDiscardsTheBody(t *testing.T) {
	t.Parallel()
	ev := loadEvent(t, getFixture)
	ev.RequestContext.HTTP.Method = http.MethodHead
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if n, err := io.WriteString(w, "hello"); n != 5 || err != nil {
			t.Errorf("Write = %d, %v", n, err)
		}
	})
	resp := mustInvoke(t, h, ev)
	if got := mustReadBody(t, resp); resp.StatusCode != http.StatusOK || got != "" {
		t.Errorf("HEAD: status %d body %q", resp.StatusCode, got)
	}
}

func TestFunctionURLStreamingPanic(t *testing.T) {
	t.Parallel()

	t.Run("before the headers", func(t *testing.T) {
		t.Parallel()
		ctx, logs := logCtx(t)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("X-Conversation", "c1")
			http.SetCookie(w, &http.Cookie{Name: "half", Value: "done"})
			panic("boom")
		})
		resp := mustInvokeCtx(t, ctx, h, loadEvent(t, getFixture))
		if resp.StatusCode != http.StatusInternalServerError {
			t.Errorf("status %d, want 500", resp.StatusCode)
		}
		// The handler's headers and cookies are dropped.
		want := map[string]string{"Content-Type": "application/json; charset=utf-8"}
		if !reflect.DeepEqual(resp.Headers, want) || len(resp.Cookies) != 0 {
			t.Errorf("headers %v cookies %q, want %v and no cookies", resp.Headers, resp.Cookies, want)
		}
		if got := mustReadBody(t, resp); got != errorBody {
			t.Errorf("body %q, want %q", got, errorBody)
		}
		if l := logs.String(); !strings.Contains(l, "msg=panic") || !strings.Contains(l, "panic=boom") {
			t.Errorf("the panic was not logged: %s", l)
		}
	})

	t.Run("after the headers", func(t *testing.T) {
		t.Parallel()
		ctx, logs := logCtx(t)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: token\ndata: {}\n\n")
			panic("boom")
		})
		resp := mustInvokeCtx(t, ctx, h, loadEvent(t, getFixture))
		if resp.StatusCode != http.StatusOK || resp.Headers["Content-Type"] != "text/event-stream" {
			t.Errorf("status %d headers %v", resp.StatusCode, resp.Headers)
		}
		got, err := readBody(t, resp)
		if got != "event: token\ndata: {}\n\n" {
			t.Errorf("body before the error %q", got)
		}
		var pe *lambdahttp.PanicError
		if !errors.As(err, &pe) || pe.Value != "boom" {
			t.Fatalf("body error %v, want a *lambdahttp.PanicError for boom", err)
		}
		if l := logs.String(); !strings.Contains(l, "panic=boom") {
			t.Errorf("the panic was not logged: %s", l)
		}
	})

	t.Run("http.ErrAbortHandler after the headers", func(t *testing.T) {
		t.Parallel()
		ctx, logs := logCtx(t)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			panic(http.ErrAbortHandler)
		})
		resp := mustInvokeCtx(t, ctx, h, loadEvent(t, getFixture))
		_, err := readBody(t, resp)
		var pe *lambdahttp.PanicError
		if !errors.As(err, &pe) || pe.Value != http.ErrAbortHandler {
			t.Fatalf("body error %v, want a *lambdahttp.PanicError for http.ErrAbortHandler", err)
		}
		if l := logs.String(); l != "" {
			t.Errorf("an abort was logged: %s", l)
		}
	})
}

func TestFunctionURLStreamingInvocationContext(t *testing.T) {
	t.Parallel()
	// awaitCancel reports whether r's context ends within wait.
	awaitCancel := func(r *http.Request) error {
		select {
		case <-r.Context().Done():
			return r.Context().Err()
		case <-time.After(wait):
			return errors.New("the request context was not cancelled with the invocation context")
		}
	}

	t.Run("before the headers", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		started := make(chan struct{})
		adapterReturned := make(chan struct{})
		observed := make(chan error, 1)
		lateWrite := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(started)
			observed <- awaitCancel(r)
			select {
			case <-adapterReturned:
				_, err := io.WriteString(w, "too late")
				lateWrite <- err
			case <-time.After(wait):
				lateWrite <- errors.New("the adapter did not return")
			}
		})
		type result struct {
			resp *events.LambdaFunctionURLStreamingResponse
			err  error
		}
		ev := loadEvent(t, getFixture)
		done := make(chan result, 1)
		go func() {
			resp, err := lambdahttp.NewFunctionURLStreaming(h)(ctx, ev)
			done <- result{resp, err}
		}()
		if _, err := within(t, "starting the handler", func() (struct{}, error) { <-started; return struct{}{}, nil }); err != nil {
			t.Fatal(err)
		}
		cancel()
		res, _ := within(t, "the adapter", func() (result, error) { return <-done, nil })
		if res.resp != nil || !errors.Is(res.err, context.Canceled) {
			t.Errorf("adapter returned %+v, %v; want context.Canceled", res.resp, res.err)
		}
		if err := <-observed; !errors.Is(err, context.Canceled) {
			t.Errorf("handler: %v", err)
		}
		close(adapterReturned)
		// Nobody reads the body any more: the write fails, not blocks.
		if _, err := within(t, "the late write", func() (struct{}, error) { return struct{}{}, <-lateWrite }); !errors.Is(err, context.Canceled) {
			t.Errorf("write after the adapter gave up: %v, want context.Canceled", err)
		}
	})

	t.Run("while streaming", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		observed := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "data: 1\n\n")
			observed <- awaitCancel(r)
		})
		resp, err := invoke(t, ctx, h, loadEvent(t, getFixture))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len("data: 1\n\n"))
		if _, err := within(t, "reading the first event", func() (int, error) { return io.ReadFull(resp.Body, buf) }); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-observed; !errors.Is(err, context.Canceled) {
			t.Errorf("handler: %v", err)
		}
		mustReadBody(t, resp)
	})
}

// TestLambdaNewHandlerStreamsTheAdapter checks that aws-lambda-go's
// reflection wrapper takes the adapter's signature and treats its result as
// a stream: the output is the integration response prelude, eight NUL
// bytes, then the body, not a JSON document.
func TestLambdaNewHandlerStreamsTheAdapter(t *testing.T) {
	t.Parallel()
	payload := readFixture(t, getFixture)

	t.Run("pointer response is streamed", func(t *testing.T) {
		t.Parallel()
		var path atomic.Value
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			path.Store(r.URL.Path)
			w.Header().Set("Content-Type", "text/event-stream")
			http.SetCookie(w, &http.Cookie{Name: "seen", Value: "1"})
			_, _ = io.WriteString(w, "data: hi\n\n")
		})
		out, err := within(t, "Invoke", func() ([]byte, error) {
			return lambda.NewHandler(lambdahttp.NewFunctionURLStreaming(h)).Invoke(t.Context(), payload)
		})
		if err != nil {
			t.Fatal(err)
		}
		prelude, body, ok := bytes.Cut(out, make([]byte, 8))
		if !ok {
			t.Fatalf("output %q has no prelude separator: not streamed", out)
		}
		var p struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
			Cookies    []string          `json:"cookies"`
		}
		if err := json.Unmarshal(prelude, &p); err != nil {
			t.Fatalf("prelude %q: %v", prelude, err)
		}
		if p.StatusCode != 200 || p.Headers["Content-Type"] != "text/event-stream" || !reflect.DeepEqual(p.Cookies, []string{"seen=1"}) {
			t.Errorf("prelude %+v", p)
		}
		if string(body) != "data: hi\n\n" {
			t.Errorf("body %q", body)
		}
		if got, _ := path.Load().(string); got != convPath+"/stream" {
			t.Errorf("handler saw path %q: the event was not decoded", got)
		}
	})

	t.Run("value response would be JSON", func(t *testing.T) {
		t.Parallel()
		// Why the adapter returns the pointer (aws-lambda-go#565).
		byValue := func(ctx context.Context, ev *events.LambdaFunctionURLRequest) (events.LambdaFunctionURLStreamingResponse, error) {
			return events.LambdaFunctionURLStreamingResponse{StatusCode: 200, Body: strings.NewReader("data: hi\n\n")}, nil
		}
		out, err := lambda.NewHandler(byValue).Invoke(t.Context(), payload)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(out, []byte(`{"StatusCode":200`)) {
			t.Errorf("output %q, want the JSON-serialized struct", out)
		}
	})
}

// runtimeInvocation is what the fake Runtime API received for one invoke.
type runtimeInvocation struct {
	id, path, contentType string
	beforeProceed, body   []byte
	trailer               http.Header
}

const runtimeHelperEnv = "LAMBDAHTTP_TEST_RUNTIME_HELPER"

// runtimeHelperHandler is the function the helper process serves.
func runtimeHelperHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+convPath+"/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		http.SetCookie(w, &http.Cookie{Name: "seen", Value: "1"})
		_, _ = io.WriteString(w, "event: a\ndata: 1\n\n")
		_ = http.NewResponseController(w).Flush()
		// Go on only once the Runtime API has received event a.
		resp, err := http.Get("http://" + os.Getenv("AWS_LAMBDA_RUNTIME_API") + "/test/proceed")
		if err != nil {
			panic(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			panic("proceed: " + resp.Status)
		}
		_, _ = io.WriteString(w, "event: b\ndata: 2\n\n")
	})
	mux.HandleFunc("POST "+convPath+"/messages", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "partial")
		panic("boom")
	})
	return mux
}

// TestStartStreamingThroughTheRuntimeAPI runs StartStreaming in a child
// process against a fake Lambda Runtime API: the response is posted as it
// is produced, and a panic after the headers ends it with the runtime's
// error trailers.
func TestStartStreamingThroughTheRuntimeAPI(t *testing.T) {
	if os.Getenv(runtimeHelperEnv) == "1" {
		lambdahttp.StartStreaming(runtimeHelperHandler())
		return // not reached
	}
	t.Parallel()

	invokes := [][]byte{readFixture(t, getFixture), readFixture(t, postFixture)}
	var next atomic.Int32
	proceed := make(chan struct{})
	results := make(chan runtimeInvocation, len(invokes))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		i := int(next.Add(1)) - 1
		if i >= len(invokes) {
			<-r.Context().Done() // until the child is killed
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", fmt.Sprintf("req-%d", i))
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
		_, _ = w.Write(invokes[i])
	})
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/{kind}", func(w http.ResponseWriter, r *http.Request) {
		inv := runtimeInvocation{id: r.PathValue("id"), path: r.PathValue("kind"), contentType: r.Header.Get("Content-Type")}
		var buf bytes.Buffer
		if inv.id == "req-0" {
			chunk := make([]byte, 256)
			for !bytes.Contains(buf.Bytes(), []byte("data: 1\n\n")) {
				n, err := r.Body.Read(chunk)
				buf.Write(chunk[:n])
				if err != nil {
					break
				}
			}
			inv.beforeProceed = bytes.Clone(buf.Bytes())
			close(proceed)
		}
		_, _ = io.Copy(&buf, r.Body)
		inv.body, inv.trailer = buf.Bytes(), r.Trailer.Clone()
		results <- inv
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("GET /test/proceed", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-proceed:
		case <-time.After(wait):
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	var out lockedBuffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestStartStreamingThroughTheRuntimeAPI$")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "_LAMBDA_SERVER_PORT=") && !strings.HasPrefix(kv, "AWS_LAMBDA_RUNTIME_API=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, runtimeHelperEnv+"=1", "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(srv.URL, "http://"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // runs before srv.Close
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("helper process output:\n%s", out.String())
		}
	})

	got := map[string]runtimeInvocation{}
	for range invokes {
		select {
		case inv := <-results:
			got[inv.id] = inv
		case <-time.After(2 * wait):
			t.Fatalf("the helper process posted %d of %d responses", len(got), len(invokes))
		}
	}
	prelude := func(t *testing.T, status int, headers map[string]string, cookies []string) string {
		t.Helper()
		b, err := json.Marshal(struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers,omitempty"`
			Cookies    []string          `json:"cookies,omitempty"`
		}{status, headers, cookies})
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\x00\x00\x00\x00\x00\x00\x00\x00"
	}

	stream := got["req-0"]
	if stream.path != "response" || stream.contentType != "application/vnd.awslambda.http-integration-response" {
		t.Errorf("stream posted to %q as %q", stream.path, stream.contentType)
	}
	head := prelude(t, 200, map[string]string{"Content-Type": "text/event-stream"}, []string{"seen=1"})
	if want := head + "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n"; string(stream.body) != want {
		t.Errorf("stream body %q, want %q", stream.body, want)
	}
	if bytes.Contains(stream.beforeProceed, []byte("event: b")) {
		t.Errorf("event b arrived before the handler was let go on: %q", stream.beforeProceed)
	}
	if et := stream.trailer.Get("Lambda-Runtime-Function-Error-Type"); et != "" {
		t.Errorf("stream ended with error trailer %q", et)
	}

	broken := got["req-1"]
	if want := prelude(t, 200, map[string]string{"Content-Type": "text/plain; charset=utf-8"}, nil) + "partial"; string(broken.body) != want {
		t.Errorf("broken stream body %q, want %q", broken.body, want)
	}
	if et := broken.trailer.Get("Lambda-Runtime-Function-Error-Type"); et != "PanicError" {
		t.Errorf("error type trailer %q, want PanicError", et)
	}
	eb, _ := base64.StdEncoding.DecodeString(broken.trailer.Get("Lambda-Runtime-Function-Error-Body"))
	if !bytes.Contains(eb, []byte("boom")) {
		t.Errorf("error body trailer %q does not name the panic", eb)
	}
}
