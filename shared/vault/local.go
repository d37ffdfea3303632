package vault

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// LocalKeys wraps data keys with AES-256-GCM under one local 32-byte key:
// the dev server's key-encryption key, from a file beside its data file
// (LoadKeyFile) or made in memory (NewMemoryKeys) for a memory-only store.
type LocalKeys struct {
	kek []byte
}

// NewLocalKeys returns the LocalKeys of the 32-byte key kek. It fails for
// a key of another length.
func NewLocalKeys(kek []byte) (*LocalKeys, error) {
	if len(kek) != 32 {
		return nil, fmt.Errorf("vault: local key must be 32 bytes, got %d", len(kek))
	}
	return &LocalKeys{kek: append([]byte(nil), kek...)}, nil
}

// NewMemoryKeys returns LocalKeys under a random key that lives as long as
// the process: for a store that is not kept either.
func NewMemoryKeys() *LocalKeys {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return &LocalKeys{kek: k}
}

// LoadKeyFile returns the LocalKeys of the key in path, creating the file
// (mode 0600, with a fresh random key) when it does not exist. It fails
// when the file is readable or writable by others than its owner, is not
// 32 bytes, or cannot be read or created.
func LoadKeyFile(path string) (*LocalKeys, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			f.Close()
			return nil, fmt.Errorf("vault: key file %s: %w", path, err)
		}
		if _, err := f.Write(k); err != nil {
			f.Close()
			os.Remove(path)
			return nil, fmt.Errorf("vault: key file %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("vault: key file %s: %w", path, err)
		}
		return NewLocalKeys(k)
	case !errors.Is(err, fs.ErrExist):
		return nil, fmt.Errorf("vault: key file %s: %w", path, err)
	}
	r, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vault: key file %s: %w", path, err)
	}
	defer r.Close()
	st, err := r.Stat()
	if err != nil {
		return nil, fmt.Errorf("vault: key file %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("vault: key file %s: mode %o lets others than its owner read or write it; want 0600", path, st.Mode().Perm())
	}
	k, err := io.ReadAll(io.LimitReader(r, 64))
	if err != nil {
		return nil, fmt.Errorf("vault: key file %s: %w", path, err)
	}
	if len(k) != 32 {
		return nil, fmt.Errorf("vault: key file %s: must hold 32 bytes, holds %d", path, len(k))
	}
	return NewLocalKeys(k)
}

// NewDataKey implements Keys.
func (l *LocalKeys) NewDataKey(_ context.Context, context string) (plain, wrapped []byte, err error) {
	plain = make([]byte, 32)
	if _, err := rand.Read(plain); err != nil {
		return nil, nil, err
	}
	aead, err := newAEAD(l.kek)
	if err != nil {
		return nil, nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, err
	}
	return plain, aead.Seal(nonce, nonce, plain, []byte(context)), nil
}

// Unwrap implements Keys.
func (l *LocalKeys) Unwrap(_ context.Context, wrapped []byte, context string) ([]byte, error) {
	aead, err := newAEAD(l.kek)
	if err != nil {
		return nil, err
	}
	if len(wrapped) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: malformed data key", ErrOpen)
	}
	plain, err := aead.Open(nil, wrapped[:aead.NonceSize()], wrapped[aead.NonceSize():], []byte(context))
	if err != nil {
		return nil, fmt.Errorf("%w: data key not ours", ErrOpen)
	}
	return plain, nil
}
