package toolclient

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// IdentityHeader carries the signed identity of the user a runTool call
// is made for (see Identity).
const IdentityHeader = "X-Caller-Identity"

// Identity lifetimes: a Client signs an identity for IdentityTTL; the tool
// server refuses one that expires further ahead than MaxIdentityTTL (a
// clock a little ahead is tolerated, a long-lived token is not).
const (
	IdentityTTL    = time.Minute
	MaxIdentityTTL = 5 * time.Minute
)

// maxIdentityLen bounds the header the tool server decodes.
const maxIdentityLen = 2048

// identityVersion prefixes every signed identity.
const identityVersion = "v1"

// identityKeyLabel derives the identity key from the service key, so that
// the key that signs identities is not the one sent in X-Service-Key.
const identityKeyLabel = "workflowchat tool-server caller identity v1"

// Identity is the user a tool call is made for, vouched for by the service
// (never taken from a model's arguments): its id, the output-token cap of
// a metered call (0: none), and when the vouching expires.
//
// On the wire (IdentityHeader) it is
//
//	v1.<payload>.<signature>
//
// payload: base64url without padding of the JSON {"sub": userID, "cap":
// maxOutput, "exp": expiry in Unix seconds}; signature: base64url without
// padding of HMAC-SHA256 over "v1.<payload>" under the identity key,
// itself HMAC-SHA256 of the label "workflowchat tool-server caller identity
// v1" under the service key. The tool server checks the signature in
// constant time and refuses an identity that expired, or that expires more
// than MaxIdentityTTL ahead.
type Identity struct {
	UserID    string
	MaxOutput int
	Expires   time.Time
}

type identityClaims struct {
	Sub string `json:"sub"`
	Cap int    `json:"cap"`
	Exp int64  `json:"exp"`
}

// IdentityKey signs and verifies identities; derive it with
// NewIdentityKey.
type IdentityKey struct{ k []byte }

// NewIdentityKey derives the identity key of serviceKey.
func NewIdentityKey(serviceKey string) IdentityKey {
	m := hmac.New(sha256.New, []byte(serviceKey))
	m.Write([]byte(identityKeyLabel))
	return IdentityKey{k: m.Sum(nil)}
}

func (k IdentityKey) mac(signed string) []byte {
	m := hmac.New(sha256.New, k.k)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// Sign returns id as IdentityHeader's value.
func (k IdentityKey) Sign(id Identity) string {
	b, _ := json.Marshal(identityClaims{Sub: id.UserID, Cap: max(id.MaxOutput, 0), Exp: id.Expires.Unix()})
	signed := identityVersion + "." + base64.RawURLEncoding.EncodeToString(b)
	return signed + "." + base64.RawURLEncoding.EncodeToString(k.mac(signed))
}

// Errors of Verify. Neither says more than that the identity is not
// acceptable.
var (
	ErrIdentityInvalid = errors.New("the caller identity is malformed or its signature is wrong")
	ErrIdentityExpired = errors.New("the caller identity has expired")
)

// Verify returns the identity v vouches for at now. It fails with
// ErrIdentityInvalid when v is malformed, too long, of another version,
// names no user or has a wrong signature (compared in constant time), and
// with ErrIdentityExpired when it expired or expires more than
// MaxIdentityTTL after now.
func (k IdentityKey) Verify(v string, now time.Time) (Identity, error) {
	if len(v) > maxIdentityLen {
		return Identity{}, ErrIdentityInvalid
	}
	version, rest, ok := strings.Cut(v, ".")
	if !ok || version != identityVersion {
		return Identity{}, ErrIdentityInvalid
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return Identity{}, ErrIdentityInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, k.mac(version+"."+payload)) {
		return Identity{}, ErrIdentityInvalid
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Identity{}, ErrIdentityInvalid
	}
	var c identityClaims
	if err := json.Unmarshal(b, &c); err != nil || c.Sub == "" || c.Cap < 0 {
		return Identity{}, ErrIdentityInvalid
	}
	exp := time.Unix(c.Exp, 0)
	if !exp.After(now) || exp.After(now.Add(MaxIdentityTTL)) {
		return Identity{}, ErrIdentityExpired
	}
	return Identity{UserID: c.Sub, MaxOutput: c.Cap, Expires: exp}, nil
}
