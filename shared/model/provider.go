package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// Error codes every provider uses: MODEL_UNAVAILABLE (errs.Unavailable:
// throttling, overload, 5xx, network failures, streams cut short; retrying
// may help) and MODEL_PROVIDER_ERROR (errs.Internal: rejected credentials
// or requests, malformed replies).
const (
	CodeUnavailable   = "MODEL_UNAVAILABLE"
	CodeProviderError = "MODEL_PROVIDER_ERROR"
)

// UnknownModel is the error for a model id no provider serves: Invalid
// INVALID_MODEL with a detail on modelId.
func UnknownModel(op, id string) *errs.Error {
	e := errs.E(op, errs.Invalid, "INVALID_MODEL", fmt.Sprintf("unknown model id %q", id))
	e.Details = []errs.FieldError{{Field: "modelId", Message: "must be one of the ids listed by GET /api/models"}}
	return e
}

// StreamingHTTPClient returns an HTTP client for a provider's streaming
// API: its transport bounds the wait for response headers, not the body,
// so a stream lasts as long as its context.
func StreamingHTTPClient(headerTimeout time.Duration) *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = headerTimeout
		return &http.Client{Transport: t}
	}
	return &http.Client{}
}

// ObjectArgs returns a model's tool call arguments as a compact JSON
// object, "{}" when they are empty or null. It fails when they are not a
// JSON object.
func ObjectArgs(b []byte) (json.RawMessage, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage(`{}`), nil
	}
	if b[0] != '{' || !json.Valid(b) {
		return nil, errors.New("the arguments are not a JSON object")
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
