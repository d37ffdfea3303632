package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// Hasher hashes passwords with argon2id and verifies them. Hashes are
// encoded in the PHC string format ($argon2id$v=19$m=...,t=...,p=...$salt$key),
// so parameters can change without invalidating stored hashes.
type Hasher struct {
	Memory  uint32 // KiB
	Time    uint32
	Threads uint8

	once      sync.Once
	dummyHash string
}

// DefaultHasher returns the production parameters: the OWASP
// recommendation for argon2id (19 MiB, 2 iterations, 1 thread).
func DefaultHasher() *Hasher { return &Hasher{Memory: 19 * 1024, Time: 2, Threads: 1} }

const (
	saltLen = 16
	keyLen  = 32
)

// Hash returns the PHC-encoded argon2id hash of password.
func (h *Hasher) Hash(password string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("auth: password salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, h.Time, h.Memory, h.Threads, keyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, h.Memory, h.Time, h.Threads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// Verify reports whether password matches the PHC-encoded hash, comparing
// in constant time. A malformed hash never matches.
func (h *Hasher) Verify(encoded, password string) bool {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var version int
	var memory, iterations uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &iterations, &threads); err != nil || memory == 0 || iterations == 0 || threads == 0 || memory > 1<<20 || iterations > 16 {
		return false
	}
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, iterations, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// dummy returns a hash with h's parameters, verified against when an email
// is unknown so that sign-in takes the same time either way.
func (h *Hasher) dummy() string {
	h.once.Do(func() {
		h.dummyHash, _ = h.Hash("not a real password; equalizes sign-in timing")
	})
	return h.dummyHash
}
