// Package httpapi is the HTTP layer every REST handler and the tool server
// share: the {"data": ...} envelope, the one error-to-response mapping, JSON
// decoding and validation, path and query parsing, and middleware (request
// id, logging, panic recovery, body limit, CORS, security headers).
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
)

// Envelope is the body of every successful REST response but the health check.
type Envelope[T any] struct {
	Data T `json:"data"`
}

// ErrorBody is the body of every error response, REST and tool server alike.
type ErrorBody struct {
	Error   string            `json:"error"`
	Message string            `json:"message"`
	Code    string            `json:"code"`
	Details []errs.FieldError `json:"details,omitempty"`
}

// Respond writes v wrapped in {"data": v} with the given status.
func Respond(w http.ResponseWriter, status int, v any) {
	WriteJSON(w, status, Envelope[any]{Data: v})
}

// WriteJSON writes v as the JSON body with the given status, unwrapped.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"Internal Server Error","message":"failed to encode the response","code":"INTERNAL_ERROR"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// StatusOf returns the HTTP status for err's kind.
func StatusOf(err error) int {
	switch errs.KindOf(err) {
	case errs.Invalid:
		return http.StatusBadRequest
	case errs.Unauthenticated:
		return http.StatusUnauthorized
	case errs.Forbidden:
		return http.StatusForbidden
	case errs.NotFound:
		return http.StatusNotFound
	case errs.Conflict:
		return http.StatusConflict
	case errs.TooLarge:
		return http.StatusRequestEntityTooLarge
	case errs.RateLimited:
		return http.StatusTooManyRequests
	case errs.Unavailable:
		return http.StatusServiceUnavailable
	case errs.Timeout:
		return http.StatusGatewayTimeout
	case errs.MethodNotAllowed:
		return http.StatusMethodNotAllowed
	case errs.UnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case errs.PreconditionFailed:
		return http.StatusPreconditionFailed
	case errs.LengthRequired:
		return http.StatusLengthRequired
	default:
		return http.StatusInternalServerError
	}
}

// StatusClientClosedRequest is the status logged for a request whose
// client went away before its answer (nginx's 499): not a failure of
// the service, so neither a 5xx nor an error in the logs.
const StatusClientClosedRequest = 499

// WriteError is the one place an error becomes an HTTP response. An error
// whose chain holds an *http.MaxBytesError is 413 PAYLOAD_TOO_LARGE naming
// the reader's limit, whatever its kind. A cancellation that comes from
// the request's own context (its client went away: a runner stopping a
// cancelled run's tool call, a closed browser tab) is
// StatusClientClosedRequest with no body, logged at debug level. The client
// gets the status, code and client-safe message of err's *errs.Error; the
// operation chain and cause are logged, never sent. An error without a
// *errs.Error is an internal error with a generic message.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) && errs.KindOf(err) != errs.TooLarge {
		// A body read past its http.MaxBytesReader, however the handler
		// classified the failed read: the client's size, 413 naming the
		// limit, never a 500 or a 400.
		err = BodyTooLarge("httpapi.WriteError", mbe.Limit).WithCause(err)
	}
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		logging.FromContext(r.Context()).DebugContext(r.Context(), "request cancelled by its client", "err", err.Error())
		w.WriteHeader(StatusClientClosedRequest)
		return
	}
	status := StatusOf(err)
	body := ErrorBody{Error: http.StatusText(status), Code: errs.CodeOf(err)}
	var e *errs.Error
	if errors.As(err, &e) {
		body.Message, body.Details = e.Message, e.Details
		if e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		}
	}
	if body.Message == "" {
		body.Message = "internal error"
		if status != http.StatusInternalServerError {
			body.Message = http.StatusText(status)
		}
	}
	log := logging.FromContext(r.Context())
	if status >= 500 {
		log.ErrorContext(r.Context(), "request failed", "status", status, "code", body.Code, "err", err.Error())
	} else {
		log.DebugContext(r.Context(), "request rejected", "status", status, "code", body.Code, "err", err.Error())
	}
	WriteJSON(w, status, body)
}

// BodyTooLarge is the 413 PAYLOAD_TOO_LARGE answer to a request body over
// limit bytes; its message names the limit.
func BodyTooLarge(op string, limit int64) *errs.Error {
	return errs.E(op, errs.TooLarge, "", "request body exceeds "+SizeText(limit))
}

// SizeText writes n bytes as "1 MiB (1048576 bytes)", "64 KiB (65536
// bytes)" or, for a size of no whole unit, "1000 bytes".
func SizeText(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB (%d bytes)", n>>20, n)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB (%d bytes)", n>>10, n)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
