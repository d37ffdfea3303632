package lambdahttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
)

// FunctionURLStreamingHandler is the Lambda handler signature for streamed
// function URL responses (InvokeMode RESPONSE_STREAM). It returns the
// pointer type on purpose: aws-lambda-go streams a
// *events.LambdaFunctionURLStreamingResponse but JSON-serializes a value.
type FunctionURLStreamingHandler func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error)

// PanicError is the error a streamed response body ends with when the
// handler panicked after the status and headers had been sent. The Lambda
// runtime client reports it to the Runtime API (as the error type
// "PanicError"), so the stream ends broken rather than looking complete.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
}

// Error implements error.
func (e *PanicError) Error() string {
	return fmt.Sprintf("lambdahttp: handler panicked after the response started: %v", e.Value)
}

// NewFunctionURLStreaming adapts h to Lambda function URL events with
// InvokeMode RESPONSE_STREAM.
//
// The event becomes a server-side *http.Request: method, rawPath and
// rawQueryString, headers (function URL headers arrive single-valued and
// comma-joined and are kept as they are), the event's cookies joined into
// the Cookie header, the body (base64-decoded when isBase64Encoded),
// RemoteAddr (the bare source IP, as the API Gateway adapter sets it), Host
// (requestContext.domainName), r.TLS and X-Forwarded-Proto: https. Its
// context is the invocation context, so h sees the invocation's deadline and
// lambdacontext.
//
// h runs in its own goroutine and writes into an unbuffered io.Pipe whose
// reader is the response Body, so every Write reaches the Lambda runtime as
// it happens; the ResponseWriter implements http.Flusher (and FlushError for
// http.ResponseController), flushing only freezes the status and headers.
// The status and headers are frozen at the first Write, WriteHeader (1xx
// codes are ignored) or Flush, and the response is returned right then,
// while h goes on writing the body. Header values are joined with ", ";
// Set-Cookie headers go to the response's Cookies. A handler that writes
// nothing gets its status (200 by default) and an empty body. As net/http
// does, a first Write without a Content-Type header sniffs one, a body after
// 204 or 304 is refused with http.ErrBodyNotAllowed and a HEAD response body
// is discarded.
//
// A panic in h is recovered and logged. Before the headers are frozen the
// response becomes a 500 INTERNAL_ERROR JSON error body (httpapi.WriteError;
// headers h had set are dropped). After that the body ends with a
// *PanicError, which the runtime reports as a broken stream.
//
// The returned handler fails when the event is nil, its method is invalid,
// its path does not parse or its base64 body does not decode, and with the
// context's error when the invocation context ends before h has produced
// the headers (h's later writes then fail with that error).
func NewFunctionURLStreaming(h http.Handler) FunctionURLStreamingHandler {
	return func(ctx context.Context, ev *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
		r, err := functionURLRequest(ctx, ev)
		if err != nil {
			return nil, err
		}
		pr, pw := io.Pipe()
		w := &streamWriter{
			header: http.Header{},
			pipe:   pw,
			body:   pr,
			head:   r.Method == http.MethodHead,
			ready:  make(chan struct{}),
		}
		go serveStream(h, w, r)
		select {
		case <-w.ready:
		case <-ctx.Done():
			select {
			case <-w.ready:
			default:
				// Nobody will read the body: make h's writes fail
				// instead of blocking forever.
				pr.CloseWithError(ctx.Err())
				return nil, fmt.Errorf("lambdahttp: no response headers before the invocation ended: %w", ctx.Err())
			}
		}
		return w.resp, nil
	}
}

// StartStreaming runs h as this Lambda function's handler for function URL
// events with InvokeMode RESPONSE_STREAM (see NewFunctionURLStreaming). It
// does not return; it exits the process when the Lambda Runtime API is
// unreachable or not configured (AWS_LAMBDA_RUNTIME_API unset).
func StartStreaming(h http.Handler) {
	lambda.Start(NewFunctionURLStreaming(h))
}

// functionURLRequest builds the server-side request h sees.
func functionURLRequest(ctx context.Context, ev *events.LambdaFunctionURLRequest) (*http.Request, error) {
	if ev == nil {
		return nil, fmt.Errorf("lambdahttp: nil function URL event")
	}
	path := ev.RawPath
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	uri := path
	if ev.RawQueryString != "" {
		uri += "?" + ev.RawQueryString
	}
	method := ev.RequestContext.HTTP.Method
	if method == "" {
		method = http.MethodGet
	}

	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, fmt.Errorf("lambdahttp: decode the base64 request body: %w", err)
		}
		body = b
	}
	var rc io.ReadCloser = http.NoBody
	if len(body) > 0 {
		rc = io.NopCloser(bytes.NewReader(body))
	}

	// NewRequestWithContext validates the method and parses the URI; the
	// URL is then reduced to what a server sees (no scheme or host).
	r, err := http.NewRequestWithContext(ctx, method, "https://function.url"+uri, rc)
	if err != nil {
		return nil, fmt.Errorf("lambdahttp: function URL request %s %q: %w", method, uri, err)
	}
	r.URL.Scheme, r.URL.Host = "", ""
	r.RequestURI = uri
	r.ContentLength = int64(len(body))
	r.GetBody = nil
	if p := ev.RequestContext.HTTP.Protocol; p != "" {
		if major, minor, ok := http.ParseHTTPVersion(p); ok {
			r.Proto, r.ProtoMajor, r.ProtoMinor = p, major, minor
		}
	}

	for k, v := range ev.Headers {
		r.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		// The cookies field is authoritative; replacing any cookie
		// header avoids sending each cookie twice.
		r.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	r.Host = ev.RequestContext.DomainName
	if r.Host == "" {
		r.Host = r.Header.Get("Host")
	}
	r.Header.Del("Host") // net/http moves it into r.Host too
	// Function URLs are HTTPS only; TLS terminates in front of Lambda.
	r.TLS = &tls.ConnectionState{HandshakeComplete: true, ServerName: r.Host}
	if r.Header.Get("X-Forwarded-Proto") == "" {
		r.Header.Set("X-Forwarded-Proto", "https")
	}
	r.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	return r, nil
}

// serveStream runs h and settles the response however h ends.
func serveStream(h http.Handler, w *streamWriter, r *http.Request) {
	defer w.pipe.Close()
	// The spans are exported before the body ends, which ends the
	// invocation.
	defer flush(r.Context())
	defer func() {
		v := recover()
		if v == nil {
			w.freeze(http.StatusOK, nil) // no-op unless h wrote nothing
			return
		}
		ctx := r.Context()
		log := logging.FromContext(ctx)
		if v != http.ErrAbortHandler {
			log.ErrorContext(ctx, "panic", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
		if w.frozen {
			w.pipe.CloseWithError(&PanicError{Value: v})
			return
		}
		clear(w.header)
		httpapi.WriteError(w, r, errs.E("lambdahttp.FunctionURLStreaming", errs.Internal, "", "internal error"))
	}()
	h.ServeHTTP(w, r)
}

// streamWriter is the http.ResponseWriter of a streamed response. Like any
// ResponseWriter it is used from the handler's goroutine only; ready hands
// resp over to the adapter.
type streamWriter struct {
	header http.Header
	pipe   *io.PipeWriter
	body   *io.PipeReader
	head   bool // HEAD request: discard the body

	frozen bool
	status int
	resp   *events.LambdaFunctionURLStreamingResponse
	ready  chan struct{} // closed once resp is set
}

// Header returns the response headers; changes after the first Write,
// WriteHeader or Flush have no effect.
func (w *streamWriter) Header() http.Header { return w.header }

// WriteHeader freezes the status and headers. Later calls are ignored, as
// are 1xx codes, which a function URL cannot send. It panics on a code
// outside 100-999, as net/http does.
func (w *streamWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 {
		return
	}
	w.freeze(code, nil)
}

// Write freezes the status (200 unless set) and headers, then writes p to
// the response body, blocking until the runtime has read it. It fails with
// http.ErrBodyNotAllowed after a 204 or 304 and with the pipe's error once
// the runtime stopped reading.
func (w *streamWriter) Write(p []byte) (int, error) {
	w.freeze(http.StatusOK, p)
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.head {
		return len(p), nil
	}
	return w.pipe.Write(p)
}

// Flush freezes the status and headers. Written bytes need no flushing:
// the pipe is unbuffered.
func (w *streamWriter) Flush() { w.freeze(http.StatusOK, nil) }

// FlushError is Flush for http.ResponseController; it never fails.
func (w *streamWriter) FlushError() error {
	w.Flush()
	return nil
}

// freeze fixes the status and headers into the response and hands it to the
// adapter, once. first is the first body chunk, for Content-Type sniffing.
func (w *streamWriter) freeze(status int, first []byte) {
	if w.frozen {
		return
	}
	w.frozen, w.status = true, status
	if _, ok := w.header["Content-Type"]; !ok && len(first) > 0 && bodyAllowed(status) {
		w.header.Set("Content-Type", http.DetectContentType(first))
	}
	resp := &events.LambdaFunctionURLStreamingResponse{StatusCode: status, Body: w.body}
	for k, vs := range w.header {
		if len(vs) == 0 {
			continue
		}
		k = http.CanonicalHeaderKey(k)
		if k == "Set-Cookie" {
			resp.Cookies = append(resp.Cookies, vs...)
			continue
		}
		if resp.Headers == nil {
			resp.Headers = make(map[string]string, len(w.header))
		}
		v := strings.Join(vs, ", ")
		if prev, ok := resp.Headers[k]; ok {
			v = prev + ", " + v
		}
		resp.Headers[k] = v
	}
	w.resp = resp
	close(w.ready)
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
