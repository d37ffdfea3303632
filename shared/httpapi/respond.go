// Package httpapi is the HTTP layer every REST handler and the tool server
// share: the {"data": ...} envelope, the one error-to-response mapping, JSON
// decoding and validation, path and query parsing, and middleware (request
// id, logging, panic recovery, body limit, CORS, security headers).
package httpapi

import (
	"encoding/json"
	"errors"
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
	default:
		return http.StatusInternalServerError
	}
}

// WriteError is the one place an error becomes an HTTP response. The client
// gets the status, code and client-safe message of err's *errs.Error; the
// operation chain and cause are logged, never sent. An error without a
// *errs.Error is an internal error with a generic message.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
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
