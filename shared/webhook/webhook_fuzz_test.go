package webhook_test

import (
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/webhook"
)

// FuzzVerify checks that any header is refused or accepted without a
// panic, always with a 401 code when refused, that a header signed by Sign
// verifies against the same body and secret and not against another body,
// and that nothing but a signature made with the secret verifies.
func FuzzVerify(f *testing.F) {
	f.Add("t=1800000000,v1=00", []byte(`{}`), "whsec_x", int64(0))
	f.Add("t=1800000000,v1=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef,v1=zz", []byte(`{"a":1}`), "s", int64(299))
	f.Add("", []byte(nil), "", int64(-301))
	f.Add("t=,v1=,t=", []byte("x"), "whsec_0", int64(301))
	// Replays dressed up as new calls (each must be refused).
	f.Add("t=1800000000,v1=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef,x=1", []byte(`{}`), "s", int64(0))
	f.Add("t=1800000000,v1=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef,v1=00", []byte(`{}`), "s", int64(0))
	f.Add("t=1800000000,v1=0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF", []byte(`{}`), "s", int64(0))
	f.Add("t=1800000000, v1=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", []byte(`{}`), "s", int64(0))
	f.Add("t=01800000000,v1=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef,", []byte(`{}`), "s", int64(0))
	f.Fuzz(func(t *testing.T, header string, body []byte, secret string, skew int64) {
		now := time.Unix(1_800_000_000, 0)
		if v, err := webhook.Verify(header, body, now, secret); err != nil {
			if !errs.Is(err, errs.Unauthenticated) {
				t.Fatalf("Verify(%q) = %v, want a 401", header, err)
			}
		} else {
			if secret == "" {
				t.Fatalf("Verify(%q) accepted with no secret", header)
			}
			// An accepted header is in the one strict spelling, and what
			// matched is exactly the signature of (t, body).
			if strings.ContainsAny(header, " \t") || strings.ToLower(header) != header {
				t.Fatalf("Verify accepted %q: spaces or upper case", header)
			}
			if want := webhook.Sign(secret, v.Time, body); len(v.Matched) != 1 || !strings.HasSuffix(want, ",v1="+v.Matched[0]) {
				t.Fatalf("Verify(%q) matched %v, want the v1 of %q", header, v.Matched, want)
			}
		}
		if secret == "" {
			return
		}
		skew %= 1000
		signed := webhook.Sign(secret, now.Add(time.Duration(skew)*time.Second), body)
		v, err := webhook.Verify(signed, body, now, secret)
		inWindow := skew >= -300 && skew <= 300
		switch {
		case inWindow && err != nil:
			t.Fatalf("a signature made %ds away is refused: %v", skew, err)
		case !inWindow && errs.CodeOf(err) != webhook.CodeSignatureExpired:
			t.Fatalf("a signature made %ds away: %v, want SIGNATURE_EXPIRED", skew, err)
		}
		if err == nil && (!v.Time.Equal(now.Add(time.Duration(skew)*time.Second)) || len(v.Matched) != 1 || !strings.HasSuffix(signed, ",v1="+v.Matched[0])) {
			t.Fatalf("Verify(%q) = %+v", signed, v)
		}
		if _, err := webhook.Verify(signed, append(append([]byte(nil), body...), 'x'), now, secret); errs.CodeOf(err) != webhook.CodeInvalidSignature {
			t.Fatalf("a changed body: %v, want INVALID_SIGNATURE", err)
		}
	})
}
