package otlp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Exporter posts spans to an OTLP/HTTP traces endpoint, protobuf-encoded
// (Marshal). It is an sdktrace.SpanExporter, safe for concurrent use.
type Exporter struct {
	url     string
	headers http.Header
	client  *http.Client
	stopped atomic.Bool
}

// NewExporter returns an exporter posting to url (the full traces URL,
// e.g. http://localhost:4318/v1/traces) with headers, each export bounded
// by timeout.
func NewExporter(url string, headers http.Header, timeout time.Duration) *Exporter {
	return &Exporter{url: url, headers: headers.Clone(), client: &http.Client{Timeout: timeout}}
}

// maxAttempts bounds the posts of one export: a collector that is
// starting or throttles gets two more tries.
const maxAttempts = 3

// ExportSpans posts spans in one request. A network error and the answers
// OTLP calls retryable (429, 502, 503, 504) are tried again, up to
// maxAttempts posts, after 100 ms then 200 ms (or the Retry-After the
// collector sent, up to 1 s), within ctx. It fails after Shutdown, and
// with the last failure: an answer other than 2xx is an error naming its
// status, never the headers sent.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Load() {
		return errors.New("otlp: the exporter is shut down")
	}
	if len(spans) == 0 {
		return nil
	}
	body := Marshal(spans)
	var err error
	for attempt := range maxAttempts {
		var retry bool
		var wait time.Duration
		retry, wait, err = e.post(ctx, body)
		if !retry || attempt == maxAttempts-1 {
			break
		}
		if wait <= 0 {
			wait = 100 * time.Millisecond << attempt
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
	}
	return err
}

// post sends body once; retry says whether a failure may be tried again,
// wait how long the collector asked to wait.
func (e *Exporter) post(ctx context.Context, body []byte) (retry bool, wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("otlp: %w", err)
	}
	for k, vs := range e.headers {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := e.client.Do(req)
	if err != nil {
		return ctx.Err() == nil, 0, fmt.Errorf("otlp: post spans: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return false, 0, nil
	}
	err = fmt.Errorf("otlp: the collector answered %d", resp.StatusCode)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			wait = min(time.Duration(s)*time.Second, time.Second)
		}
		return true, wait, err
	}
	return false, 0, err
}

// Shutdown stops the exporter: later exports fail. It never fails.
func (e *Exporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	e.client.CloseIdleConnections()
	return nil
}
