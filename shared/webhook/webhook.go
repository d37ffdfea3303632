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
// one matching value is enough. Unknown keys are ignored, so that a later
// scheme (v2) can be added beside v1. Verification compares in constant
// time, and refuses a t more than Tolerance away from the server's clock,
// either side, so that a captured request cannot be replayed later.
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
	// V1 are the v1 values, decoded; values that are not 64 hex digits are
	// kept as nil and match nothing.
	V1 [][]byte
}

// Parse parses an X-Signature header value. It fails with Unauthenticated
// INVALID_SIGNATURE when the header is missing, too long, has no t or more
// than one, a t that is not a whole number of seconds, or no v1 (or more
// than MaxSignatures).
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
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Signature{}, invalid(op, "the "+Header+" header is malformed: want t=<unix seconds>,v1=<hex>")
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
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				b = nil
			}
			sig.V1 = append(sig.V1, b)
		}
	}
	if !haveT || len(sig.V1) == 0 {
		return Signature{}, invalid(op, "the "+Header+" header needs t=<unix seconds> and v1=<hex HMAC-SHA256>")
	}
	return sig, nil
}

// Verify checks the header against body, now and the secrets (the
// trigger's current secret, and during a rotation its previous one). A
// missing, malformed or wrong signature is Unauthenticated
// INVALID_SIGNATURE; a signature that is right but whose t is more than
// Tolerance away from now is Unauthenticated SIGNATURE_EXPIRED. Every
// candidate is compared in constant time.
func Verify(header string, body []byte, now time.Time, secrets ...string) error {
	const op = "webhook.Verify"
	sig, err := Parse(header)
	if err != nil {
		return err
	}
	ts := strconv.FormatInt(sig.Time.Unix(), 10)
	match := 0
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		want := mac(secret, ts, body)
		for _, got := range sig.V1 {
			// Compare every pair: the time taken does not depend on
			// which one matches.
			if got != nil {
				match |= boolInt(hmac.Equal(got, want))
			}
		}
	}
	if match == 0 {
		return invalid(op, "the signature does not match the body and the trigger's secret")
	}
	if d := now.Sub(sig.Time); d > Tolerance || d < -Tolerance {
		return errs.E(op, errs.Unauthenticated, CodeSignatureExpired,
			"the signature's t is more than "+strconv.Itoa(int(Tolerance/time.Second))+" seconds from the server's time: sign the request when sending it")
	}
	return nil
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
