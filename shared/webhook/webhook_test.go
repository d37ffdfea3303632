package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/webhook"
)

const (
	secret   = "whsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"
	previous = "whsec_fedcba9876543210fedcba9876543210fedcba9876543210fedcba987654"
)

var (
	now  = time.Unix(1_800_000_000, 0)
	body = []byte(`{"order":42,"items":["a","b"]}`)
)

// hexMAC is the signature computed independently of the package, as a
// client would: HMAC-SHA256(secret, "<t>.<body>").
func hexMAC(key string, t int64, b []byte) string {
	h := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(h, "%d.", t)
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func TestVerify(t *testing.T) {
	t.Parallel()
	ts := now.Unix()
	good := hexMAC(secret, ts, body)
	for _, tc := range []struct {
		name    string
		header  string
		body    []byte
		secrets []string
		code    string // "" means valid
	}{
		{"valid", fmt.Sprintf("t=%d,v1=%s", ts, good), body, []string{secret}, ""},
		{"Sign's header", webhook.Sign(secret, now, body), body, []string{secret}, ""},
		{"v1 before t", fmt.Sprintf("v1=%s,t=%d", good, ts), body, []string{secret}, ""},
		{"the same v1 twice", fmt.Sprintf("t=%d,v1=%s,v1=%s", ts, good, good), body, []string{secret}, ""},
		{"one of several v1 matches", fmt.Sprintf("t=%d,v1=%s,v1=%s", ts, hexMAC(previous, ts, body), good), body, []string{secret}, ""},
		{"signed with the previous secret during rotation", fmt.Sprintf("t=%d,v1=%s", ts, hexMAC(previous, ts, body)), body, []string{secret, previous}, ""},
		{"empty body", webhook.Sign(secret, now, nil), nil, []string{secret}, ""},
		{"at +300 s", webhook.Sign(secret, now.Add(300*time.Second), body), body, []string{secret}, ""},
		{"at -300 s", webhook.Sign(secret, now.Add(-300*time.Second), body), body, []string{secret}, ""},

		{"missing", "", body, []string{secret}, webhook.CodeInvalidSignature},
		// One spelling per signature: anything but t=<digits>,v1=<64
		// lower-case hex> is refused, so that a replay cannot be
		// reformatted into a new call.
		{"spaces after commas", fmt.Sprintf("t=%d, v1=%s", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"space before a value", fmt.Sprintf("t= %d,v1=%s", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"trailing space", fmt.Sprintf("t=%d,v1=%s ", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"tab", fmt.Sprintf("t=%d,\tv1=%s", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"upper-case hex", fmt.Sprintf("t=%d,v1=%s", ts, strings.ToUpper(good)), body, []string{secret}, webhook.CodeInvalidSignature},
		{"mixed-case hex", fmt.Sprintf("t=%d,v1=%s", ts, mixedCase(good)), body, []string{secret}, webhook.CodeInvalidSignature},
		{"upper-case key", fmt.Sprintf("T=%d,V1=%s", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"unknown key appended", fmt.Sprintf("t=%d,v1=%s,x=1", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"unknown keys around", fmt.Sprintf("t=%d,v0=abc,v1=%s,v2=def", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"short v1 appended", fmt.Sprintf("t=%d,v1=%s,v1=00", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"empty v1 appended", fmt.Sprintf("t=%d,v1=%s,v1=", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"trailing comma", fmt.Sprintf("t=%d,v1=%s,", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"empty part", fmt.Sprintf("t=%d,,v1=%s", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"t with a leading zero", fmt.Sprintf("t=0%d,v1=%s", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"t with a fraction", fmt.Sprintf("t=%d.0,v1=%s", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"a value with =", fmt.Sprintf("t=%d,v1=%s=", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"garbage", "garbage", body, []string{secret}, webhook.CodeInvalidSignature},
		{"no t", "v1=" + good, body, []string{secret}, webhook.CodeInvalidSignature},
		{"no v1", fmt.Sprintf("t=%d", ts), body, []string{secret}, webhook.CodeInvalidSignature},
		{"t not a number", "t=yesterday,v1=" + good, body, []string{secret}, webhook.CodeInvalidSignature},
		{"t in milliseconds is far away", fmt.Sprintf("t=%d,v1=%s", ts*1000, hexMAC(secret, ts*1000, body)), body, []string{secret}, webhook.CodeSignatureExpired},
		{"t with a sign", fmt.Sprintf("t=+%d,v1=%s", ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"t negative", fmt.Sprintf("t=-1,v1=%s", good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"two t", fmt.Sprintf("t=%d,t=%d,v1=%s", ts, ts, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"too many v1", fmt.Sprintf("t=%d", ts) + strings.Repeat(",v1="+good, 9), body, []string{secret}, webhook.CodeInvalidSignature},
		{"too long", fmt.Sprintf("t=%d,v1=%s,x=%s", ts, good, strings.Repeat("a", 1024)), body, []string{secret}, webhook.CodeInvalidSignature},
		{"wrong secret", fmt.Sprintf("t=%d,v1=%s", ts, hexMAC("whsec_other", ts, body)), body, []string{secret}, webhook.CodeInvalidSignature},
		{"previous secret after its grace", fmt.Sprintf("t=%d,v1=%s", ts, hexMAC(previous, ts, body)), body, []string{secret}, webhook.CodeInvalidSignature},
		{"tampered body", fmt.Sprintf("t=%d,v1=%s", ts, good), []byte(`{"order":43,"items":["a","b"]}`), []string{secret}, webhook.CodeInvalidSignature},
		{"body with a trailing newline", fmt.Sprintf("t=%d,v1=%s", ts, good), append(append([]byte(nil), body...), '\n'), []string{secret}, webhook.CodeInvalidSignature},
		{"tampered t", fmt.Sprintf("t=%d,v1=%s", ts+1, good), body, []string{secret}, webhook.CodeInvalidSignature},
		{"truncated v1", fmt.Sprintf("t=%d,v1=%s", ts, good[:62]), body, []string{secret}, webhook.CodeInvalidSignature},
		{"v1 not hex", fmt.Sprintf("t=%d,v1=%s", ts, strings.Repeat("z", 64)), body, []string{secret}, webhook.CodeInvalidSignature},
		{"SHA-1 length", fmt.Sprintf("t=%d,v1=%s", ts, good[:40]), body, []string{secret}, webhook.CodeInvalidSignature},
		{"no secret to check against", fmt.Sprintf("t=%d,v1=%s", ts, good), body, []string{""}, webhook.CodeInvalidSignature},
		{"expired at +301 s", webhook.Sign(secret, now.Add(301*time.Second), body), body, []string{secret}, webhook.CodeSignatureExpired},
		{"expired at -301 s", webhook.Sign(secret, now.Add(-301*time.Second), body), body, []string{secret}, webhook.CodeSignatureExpired},
		{"old and wrong is invalid, not expired", fmt.Sprintf("t=%d,v1=%s", ts-3600, good), body, []string{secret}, webhook.CodeInvalidSignature},
	} {
		v, err := webhook.Verify(tc.header, tc.body, now, tc.secrets...)
		if tc.code == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if len(v.Matched) == 0 || v.Time.Unix() != signedTime(t, tc.header) {
				t.Errorf("%s: verified %+v", tc.name, v)
			}
			continue
		}
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.Unauthenticated || e.Code != tc.code || e.Message == "" {
			t.Errorf("%s: err = %v, want 401 %s", tc.name, err, tc.code)
		}
		if err != nil && strings.Contains(err.Error(), secret[6:]) {
			t.Errorf("%s: the error reveals the secret: %v", tc.name, err)
		}
	}
}

// mixedCase upper-cases the first letter of a hex string.
func mixedCase(h string) string {
	i := strings.IndexAny(h, "abcdef")
	return h[:i] + strings.ToUpper(h[i:i+1]) + h[i+1:]
}

// signedTime is the t of a header, read independently of the package.
func signedTime(t *testing.T, header string) int64 {
	t.Helper()
	for _, part := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(part, "t="); ok {
			var n int64
			if _, err := fmt.Sscan(v, &n); err != nil {
				t.Fatalf("t in %q: %v", header, err)
			}
			return n
		}
	}
	t.Fatalf("no t in %q", header)
	return 0
}

// TestVerifiedMatched: Verify names the v1 values that matched, once
// each, whatever else the header carries, and only those.
func TestVerifiedMatched(t *testing.T) {
	t.Parallel()
	ts := now.Unix()
	cur, prev, other := hexMAC(secret, ts, body), hexMAC(previous, ts, body), hexMAC("whsec_other", ts, body)
	for _, tc := range []struct {
		name    string
		header  string
		secrets []string
		want    []string
	}{
		{"one", fmt.Sprintf("t=%d,v1=%s", ts, cur), []string{secret}, []string{cur}},
		{"a wrong one beside", fmt.Sprintf("t=%d,v1=%s,v1=%s", ts, other, cur), []string{secret}, []string{cur}},
		{"twice", fmt.Sprintf("t=%d,v1=%s,v1=%s", ts, cur, cur), []string{secret}, []string{cur}},
		{"both secrets of a rotation", fmt.Sprintf("t=%d,v1=%s,v1=%s", ts, prev, cur), []string{secret, previous}, []string{prev, cur}},
		{"the previous one only", fmt.Sprintf("t=%d,v1=%s,v1=%s", ts, prev, other), []string{secret, previous}, []string{prev}},
	} {
		v, err := webhook.Verify(tc.header, body, now, tc.secrets...)
		if err != nil || v.Time.Unix() != ts || fmt.Sprint(v.Matched) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %+v, %v; want matched %v", tc.name, v, err, tc.want)
		}
	}
}

func TestSignFormat(t *testing.T) {
	t.Parallel()
	got := webhook.Sign(secret, now, body)
	want := fmt.Sprintf("t=%d,v1=%s", now.Unix(), hexMAC(secret, now.Unix(), body))
	if got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
	sig, err := webhook.Parse(got)
	if err != nil || !sig.Time.Equal(now) || len(sig.V1) != 1 {
		t.Errorf("Parse(Sign) = %+v, %v", sig, err)
	}
}

func TestSecrets(t *testing.T) {
	t.Parallel()
	if _, err := webhook.NewSecrets([]byte("short")); err == nil {
		t.Error("a short key is accepted")
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	s, err := webhook.NewSecrets(key)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := webhook.NewSecrets([]byte("fedcba9876543210fedcba9876543210"))
	n1, err := webhook.NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	n2, _ := webhook.NewNonce()
	if len(n1) != 64 || n1 == n2 {
		t.Fatalf("nonces %q %q: want 64 hex digits, different", n1, n2)
	}
	a := s.Secret("trigger-1", n1)
	if !strings.HasPrefix(a, webhook.SecretPrefix) || len(a) != len(webhook.SecretPrefix)+64 {
		t.Errorf("secret %q: want whsec_ and 64 hex digits", a)
	}
	for name, b := range map[string]string{
		"another nonce":   s.Secret("trigger-1", n2),
		"another trigger": s.Secret("trigger-2", n1),
		"another key":     other.Secret("trigger-1", n1),
		// The parts are length-prefixed: moving a character from the id to
		// the nonce changes the secret.
		"shifted parts": s.Secret("trigger-1"+n1[:1], n1[1:]),
	} {
		if a == b {
			t.Errorf("%s: same secret", name)
		}
	}
	if s.Secret("trigger-1", n1) != a {
		t.Error("the secret is not deterministic")
	}
	key[0] = 'X' // NewSecrets keeps a copy
	if s.Secret("trigger-1", n1) != a {
		t.Error("the secret changed with the caller's key slice")
	}
	if d := webhook.DeriveKey("dev-service-key"); len(d) != 32 || string(d) == "dev-service-key" {
		t.Errorf("DeriveKey = %x", d)
	}
}
