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

// TestOneLine: a control character inside a name (NUL, line break, tab,
// escape, DEL, C1) is refused with one field error; white space at the
// edges, which callers trim, and printable text are not.
func TestOneLine(t *testing.T) {
	t.Parallel()
	for s, bad := range map[string]bool{
		"\x00ctl": true, "a\nb": true, "a\tb": true, "a\x1bb": true, "a\x7fb": true, "a\u0085b": true, "\x00": true,
		"a\u2028b": true, "a\u2029b": true, "evil\u202egnp.exe": true, "a\u202ab": true, "a\u2066b\u2069": true,
		"Ada": false, " Ada\n": false, "\tAda ": false, "Ada Lovelace — née Byron": false, "": false,
		"family 👨\u200d👩\u200d👧": false, "zero\u200bwidth": false, "\u2028Ada\u2029": false,
	} {
		var f errs.FieldErrors
		if got := f.OneLine("name", s); got != bad || errs.HasControl(s) != bad || (len(f) == 1) != bad {
			t.Errorf("%q: OneLine %v, HasControl %v, %d errors; want %v", s, got, errs.HasControl(s), len(f), bad)
		}
		if bad && (f[0].Field != "name" || f[0].Message != errs.OneLineMessage) {
			t.Errorf("%q: %+v", s, f)
		}
	}
}
