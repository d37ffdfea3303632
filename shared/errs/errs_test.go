package errs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/errs"
)

func TestWrapKeepsKindAndCode(t *testing.T) {
	t.Parallel()
	base := errs.E("store.Get", errs.NotFound, "CHAT_NOT_FOUND", "chat not found")
	err := errs.Wrap("chat.Get", fmt.Errorf("context: %w", base))
	if errs.KindOf(err) != errs.NotFound || errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Fatalf("wrapped = %v", err)
	}
	if !strings.Contains(err.Error(), "chat.Get: store.Get") {
		t.Errorf("op chain missing: %v", err)
	}
	plain := errors.New("socket closed")
	w := errs.Wrap("store.Put", plain)
	if errs.KindOf(w) != errs.Internal || errs.CodeOf(w) != "INTERNAL_ERROR" || !errors.Is(w, plain) {
		t.Errorf("plain wrap = %v", w)
	}
	if errs.Wrap("x", nil) != nil {
		t.Error("Wrap(nil) != nil")
	}
	if errs.KindOf(nil) != errs.Internal || errs.Is(nil, errs.Internal) {
		t.Error("nil classification")
	}
}

func TestDefaultCodes(t *testing.T) {
	t.Parallel()
	tests := map[errs.Kind]string{
		errs.Invalid: "VALIDATION_FAILED", errs.Unauthenticated: "UNAUTHORIZED", errs.Forbidden: "FORBIDDEN",
		errs.NotFound: "NOT_FOUND", errs.Conflict: "CONFLICT", errs.TooLarge: "PAYLOAD_TOO_LARGE",
		errs.RateLimited: "RATE_LIMITED", errs.Unavailable: "SERVICE_UNAVAILABLE", errs.Timeout: "TIMEOUT",
		errs.MethodNotAllowed: "METHOD_NOT_ALLOWED", errs.UnsupportedMediaType: "UNSUPPORTED_MEDIA_TYPE", errs.PreconditionFailed: "PRECONDITION_FAILED",
		errs.LengthRequired: "LENGTH_REQUIRED",
		errs.Internal:       "INTERNAL_ERROR",
	}
	for k, code := range tests {
		if got := errs.CodeOf(errs.E("op", k, "", "m")); got != code {
			t.Errorf("%v: code %s, want %s", k, got, code)
		}
	}
}

func TestFieldErrors(t *testing.T) {
	t.Parallel()
	var f errs.FieldErrors
	if f.Err("op") != nil {
		t.Fatal("empty FieldErrors is an error")
	}
	f.Add("name", "must be at most %d characters", 255)
	var e *errs.Error
	if !errors.As(f.Err("op"), &e) || e.Kind != errs.Invalid || e.Message != "name: must be at most 255 characters" || len(e.Details) != 1 {
		t.Errorf("err = %+v", e)
	}
}
