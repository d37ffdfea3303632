// Package webhook signs and verifies the requests that start workflow runs
// through a webhook trigger, and derives the triggers' secrets.
//
// A request carries the header
//
//	X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
//
// where secret is the trigger's secret string exactly as it was shown
// (its bytes are the HMAC key) and the raw body is the bytes sent. Several
// v1 values may be given (a client rotating its secret signs with both);
// one matching value is enough. The header is parsed strictly: exactly one
// t (unix seconds, digits only), v1 values of exactly 64 lower-case hex
// digits, no spaces, no empty parts and no other keys. A header has one
// spelling per signature, so that the verified (t, v1) pair a webhook call
// is deduplicated by cannot be dressed up as a new call. Verification
// compares in constant time, and refuses a t more than Tolerance away from
// the server's clock, either side, so that a captured request cannot be
// replayed later.
//
// Secrets are not stored. A trigger's secret is derived from a server key
// that the database does not hold (WEBHOOK_SIGNING_KEY) and from a random
// nonce that it does: HMAC-SHA256(key, trigger id, nonce). Reading the
// database alone therefore cannot forge a request, and verifying costs no
// decryption call. Rotating a secret is drawing a new nonce.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// Header is the request header that carries the signature.
const Header = "X-Signature"

// Tolerance is how far the signed time may be from the server's clock,
// either side.
const Tolerance = 300 * time.Second

// Bounds of a signature header.
const (
	// MaxHeaderLen bounds the header: enough for a dozen v1 values.
	MaxHeaderLen = 1024
	// MaxSignatures bounds the v1 values that are tried.
	MaxSignatures = 8
)

// Error codes of a refused signature (401).
const (
	CodeInvalidSignature = "INVALID_SIGNATURE"
	CodeSignatureExpired = "SIGNATURE_EXPIRED"
)

// SecretPrefix starts every secret, so that a leaked one is recognisable
// (secret scanners) and cannot be mistaken for another credential.
const SecretPrefix = "whsec_"

// Sign returns the X-Signature value of body signed with secret at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Signature is a parsed X-Signature header.
type Signature struct {
	// Time is the signed time (t).
	Time time.Time
	// V1 are the v1 values, decoded (32 bytes each).
	V1 [][]byte
}

// Parse parses an X-Signature header value. It fails with Unauthenticated
// INVALID_SIGNATURE when the header is missing or too long, when a part is
// not key=value, when a key is not t or v1, when there is no t or more
// than one, when t is not unix seconds written as plain digits (no sign,
// no leading zero), when there is no v1 or more than MaxSignatures, or
// when a v1 is not exactly 64 lower-case hex digits.
func Parse(header string) (Signature, error) {
	const op = "webhook.Parse"
	if header == "" {
		return Signature{}, invalid(op, "the "+Header+" header is missing: sign the request (t=<unix seconds>,v1=<hex HMAC-SHA256>)")
	}
	if len(header) > MaxHeaderLen {
		return Signature{}, invalid(op, "the "+Header+" header is too long")
	}
	var sig Signature
	haveT := false
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return Signature{}, invalid(op, "the "+Header+" header is malformed: want t=<unix seconds>,v1=<hex>, with no spaces")
		}
		switch k {
		case "t":
			if haveT {
				return Signature{}, invalid(op, "the "+Header+" header has more than one t")
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || v != strconv.FormatInt(n, 10) {
				return Signature{}, invalid(op, "the "+Header+" header's t must be unix seconds")
			}
			sig.Time, haveT = time.Unix(n, 0), true
		case "v1":
			if len(sig.V1) == MaxSignatures {
				return Signature{}, invalid(op, "the "+Header+" header has more than "+strconv.Itoa(MaxSignatures)+" v1 values")
			}
			if !lowerHex(v, 2*sha256.Size) {
				return Signature{}, invalid(op, "the "+Header+" header's v1 must be 64 lower-case hex digits")
			}
			b, _ := hex.DecodeString(v) // lowerHex checked it
			sig.V1 = append(sig.V1, b)
		default:
			return Signature{}, invalid(op, "the "+Header+" header has a key other than t and v1")
		}
	}
	if !haveT || len(sig.V1) == 0 {
		return Signature{}, invalid(op, "the "+Header+" header needs t=<unix seconds> and v1=<hex HMAC-SHA256>")
	}
	return sig, nil
}

// lowerHex reports whether s is n lower-case hex digits.
func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Verified is what a verified header proves: the signed time and the v1
// values that matched one of the secrets (each once, lower-case hex, in
// the header's order). A call is deduplicated by these pairs: whoever
// replays the request can only present them again.
type Verified struct {
	Time    time.Time
	Matched []string
}

// Verify checks the header against body, now and the secrets (the
// trigger's current secret, and during a rotation its previous one), and
// returns the signature's time and the v1 values that matched. A missing,
// malformed or wrong signature is Unauthenticated INVALID_SIGNATURE; a
// signature that is right but whose t is more than Tolerance away from now
// is Unauthenticated SIGNATURE_EXPIRED. Every candidate is compared in
// constant time.
func Verify(header string, body []byte, now time.Time, secrets ...string) (Verified, error) {
	const op = "webhook.Verify"
	sig, err := Parse(header)
	if err != nil {
		return Verified{}, err
	}
	ts := strconv.FormatInt(sig.Time.Unix(), 10)
	matched := make([]int, len(sig.V1))
	match := 0
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		want := mac(secret, ts, body)
		for i, got := range sig.V1 {
			// Compare every pair: the time taken does not depend on
			// which one matches.
			m := boolInt(hmac.Equal(got, want))
			matched[i] |= m
			match |= m
		}
	}
	if match == 0 {
		return Verified{}, invalid(op, "the signature does not match the body and the trigger's secret")
	}
	if d := now.Sub(sig.Time); d > Tolerance || d < -Tolerance {
		return Verified{}, errs.E(op, errs.Unauthenticated, CodeSignatureExpired,
			"the signature's t is more than "+strconv.Itoa(int(Tolerance/time.Second))+" seconds from the server's time: sign the request when sending it")
	}
	v := Verified{Time: sig.Time}
	for i, got := range sig.V1 {
		if h := hex.EncodeToString(got); matched[i] == 1 && !slices.Contains(v.Matched, h) {
			v.Matched = append(v.Matched, h)
		}
	}
	return v, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func invalid(op, msg string) error {
	return errs.E(op, errs.Unauthenticated, CodeInvalidSignature, msg)
}

// MinKeyLen is the shortest server key Secrets accepts.
const MinKeyLen = 32

// Secrets derives the triggers' secrets from the server key.
type Secrets struct {
	key []byte
}

// NewSecrets returns the Secrets of key, which must have at least
// MinKeyLen bytes (a random 32-byte key, e.g. `openssl rand -hex 32`).
func NewSecrets(key []byte) (*Secrets, error) {
	if len(key) < MinKeyLen {
		return nil, errors.New("webhook: the signing key must have at least 32 bytes")
	}
	return &Secrets{key: append([]byte(nil), key...)}, nil
}

// Secret returns the secret of trigger triggerID with nonce: SecretPrefix
// and 64 hex digits of HMAC-SHA256(key, "webhook-secret/v1", triggerID,
// nonce), each part length-prefixed so that no two inputs collide.
func (s *Secrets) Secret(triggerID, nonce string) string {
	h := hmac.New(sha256.New, s.key)
	for _, part := range []string{"webhook-secret/v1", triggerID, nonce} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return SecretPrefix + hex.EncodeToString(h.Sum(nil))
}

// NewNonce returns 32 random bytes, hex-encoded: the part of a secret the
// database keeps.
func NewNonce() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// DeriveKey derives a signing key from another secret (the dev server's
// service key, when no WEBHOOK_SIGNING_KEY is set): SHA-256 of a label and
// the secret, so that the derived key reveals nothing of the other one.
func DeriveKey(secret string) []byte {
	h := sha256.New()
	h.Write([]byte("workflow-chat webhook signing key from service key\x00"))
	h.Write([]byte(secret))
	return h.Sum(nil)
}
