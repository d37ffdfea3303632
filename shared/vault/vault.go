// Package vault keeps the secrets users give the service (the header
// values of their MCP servers' API keys, OAuth tokens) encrypted at rest by
// envelope encryption: every secret is sealed with AES-256-GCM under a data
// key of its own, and only the data key wrapped by a key-encryption key is
// stored beside it. In AWS the key-encryption key is a KMS key (package
// kmskeys: GenerateDataKey and Decrypt); locally it is a 32-byte key from a
// file (LocalKeys) or generated in memory.
//
// A sealed value is bound to a context (its owner and purpose, e.g.
// "mcpserver:<id>:secret"): opening it under another context fails, so a
// sealed value copied into another item cannot be opened there.
//
// Plaintexts never leave this package other than as Open's result; the
// errors name no secret.
package vault

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Keys makes and unwraps data keys: the key-encryption side of envelope
// encryption (KMS in AWS, LocalKeys locally).
type Keys interface {
	// NewDataKey returns a fresh 32-byte data key and the same key
	// wrapped (encrypted under the key-encryption key) for storage,
	// bound to context.
	NewDataKey(ctx context.Context, context string) (plain, wrapped []byte, err error)
	// Unwrap returns the data key that wrapped holds. It fails when
	// wrapped was not made by these keys for context.
	Unwrap(ctx context.Context, wrapped []byte, context string) ([]byte, error)
}

// ErrOpen is returned, wrapped, when a sealed value cannot be opened: it is
// malformed, was sealed under another context or another key, or was
// altered.
var ErrOpen = errors.New("vault: sealed value cannot be opened")

// prefix marks the format of a sealed value.
const prefix = "v1."

// MaxPlaintext bounds one secret.
const MaxPlaintext = 64 << 10

// CacheTTL is how long an unwrapped data key is kept in memory, so that a
// burst of reads of one secret costs one Unwrap (one KMS Decrypt).
const CacheTTL = 5 * time.Minute

// maxCached bounds the cache of unwrapped data keys.
const maxCached = 1024

// Vault seals and opens secrets. It is safe for concurrent use.
type Vault struct {
	keys Keys
	now  func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cached
}

type cached struct {
	key     []byte
	expires time.Time
}

// New returns the Vault over keys, with now as its clock (nil: time.Now).
func New(keys Keys, now func() time.Time) *Vault {
	if now == nil {
		now = time.Now
	}
	return &Vault{keys: keys, now: now, cache: map[[32]byte]cached{}}
}

// Seal encrypts plaintext under a fresh data key bound to context and
// returns the sealed value (printable ASCII). It fails when plaintext is
// over MaxPlaintext or a data key cannot be made.
func (v *Vault) Seal(ctx context.Context, context string, plaintext []byte) (string, error) {
	if len(plaintext) > MaxPlaintext {
		return "", fmt.Errorf("vault: secret of %d bytes is over %d", len(plaintext), MaxPlaintext)
	}
	plain, wrapped, err := v.keys.NewDataKey(ctx, context)
	if err != nil {
		return "", fmt.Errorf("vault: new data key: %w", err)
	}
	if len(wrapped) > 0xffff {
		return "", errors.New("vault: wrapped data key too long")
	}
	aead, err := newAEAD(plain)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("vault: nonce: %w", err)
	}
	out := make([]byte, 2, 2+len(wrapped)+len(nonce)+len(plaintext)+aead.Overhead())
	binary.BigEndian.PutUint16(out, uint16(len(wrapped)))
	out = append(out, wrapped...)
	out = append(out, nonce...)
	out = aead.Seal(out, nonce, plaintext, []byte(context))
	v.store(cacheID(wrapped, context), plain, v.now())
	return prefix + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts sealed, which Seal made for context. It fails with
// ErrOpen (wrapped) for a malformed, altered or foreign value, and with
// the key side's error when the data key cannot be unwrapped.
func (v *Vault) Open(ctx context.Context, context, sealed string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return nil, fmt.Errorf("%w: unknown format", ErrOpen)
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(raw) < 2 {
		return nil, fmt.Errorf("%w: malformed", ErrOpen)
	}
	n := int(binary.BigEndian.Uint16(raw))
	raw = raw[2:]
	if len(raw) < n {
		return nil, fmt.Errorf("%w: malformed", ErrOpen)
	}
	wrapped, body := raw[:n], raw[n:]
	plain, err := v.unwrap(ctx, wrapped, context)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD(plain)
	if err != nil {
		return nil, err
	}
	if len(body) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: malformed", ErrOpen)
	}
	out, err := aead.Open(nil, body[:aead.NonceSize()], body[aead.NonceSize():], []byte(context))
	if err != nil {
		return nil, fmt.Errorf("%w: authentication failed", ErrOpen)
	}
	return out, nil
}

// unwrap returns the data key of wrapped from the cache or from the keys.
// The cache is keyed by the wrapped key and the context together, so a
// cached key is never handed out for another context.
func (v *Vault) unwrap(ctx context.Context, wrapped []byte, context string) ([]byte, error) {
	id := cacheID(wrapped, context)
	now := v.now()
	v.mu.Lock()
	c, ok := v.cache[id]
	v.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.key, nil
	}
	plain, err := v.keys.Unwrap(ctx, wrapped, context)
	if err != nil {
		return nil, fmt.Errorf("vault: unwrap data key: %w", err)
	}
	if len(plain) != 32 {
		return nil, fmt.Errorf("%w: data key of %d bytes", ErrOpen, len(plain))
	}
	v.store(id, plain, now)
	return plain, nil
}

func (v *Vault) store(id [32]byte, plain []byte, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.cache) >= maxCached {
		for k, c := range v.cache {
			if !now.Before(c.expires) || len(v.cache) >= maxCached {
				delete(v.cache, k)
			}
		}
	}
	v.cache[id] = cached{key: plain, expires: now.Add(CacheTTL)}
}

func cacheID(wrapped []byte, context string) [32]byte {
	h := sha256.New()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(wrapped)))
	h.Write(n[:])
	h.Write(wrapped)
	h.Write([]byte(context))
	var id [32]byte
	h.Sum(id[:0])
	return id
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("vault: cipher: %w", err)
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		return nil, fmt.Errorf("vault: gcm: %w", err)
	}
	return a, nil
}
