package vault_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/vault"
)

func TestSealOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := vault.New(vault.NewMemoryKeys(), nil)
	for _, size := range []int{0, 1, 100, vault.MaxPlaintext} {
		secret := bytes.Repeat([]byte("k"), size)
		sealed, err := v.Seal(ctx, "mcpserver:a", secret)
		if err != nil {
			t.Fatalf("Seal %d bytes: %v", size, err)
		}
		if size > 8 && strings.Contains(sealed, string(secret[:8])) {
			t.Fatalf("sealed value shows the secret")
		}
		got, err := v.Open(ctx, "mcpserver:a", sealed)
		if err != nil || !bytes.Equal(got, secret) {
			t.Fatalf("Open %d bytes = %d bytes, %v", size, len(got), err)
		}
	}
	for _, size := range []int{vault.MaxPlaintext + 1, 10 * vault.MaxPlaintext} {
		if _, err := v.Seal(ctx, "mcpserver:a", make([]byte, size)); err == nil {
			t.Fatalf("Seal of %d bytes succeeded", size)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := vault.New(vault.NewMemoryKeys(), nil)
	sealed, err := v.Seal(ctx, "mcpserver:a", []byte("the secret"))
	if err != nil {
		t.Fatal(err)
	}
	// A fresh vault over other keys, so that nothing comes from the cache.
	other := vault.New(vault.NewMemoryKeys(), nil)
	flip := []byte(sealed)
	flip[len(flip)-3] ^= 1
	tests := []struct {
		name    string
		v       *vault.Vault
		context string
		sealed  string
	}{
		{"other context", v, "mcpserver:b", sealed},
		{"other keys", other, "mcpserver:a", sealed},
		{"altered", v, "mcpserver:a", string(flip)},
		{"no prefix", v, "mcpserver:a", strings.TrimPrefix(sealed, "v1.")},
		{"empty", v, "mcpserver:a", ""},
		{"short", v, "mcpserver:a", "v1.AA"},
		{"not base64", v, "mcpserver:a", "v1.!!!"},
		{"truncated", v, "mcpserver:a", sealed[:len(sealed)/2]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.v.Open(ctx, tt.context, tt.sealed)
			if !errors.Is(err, vault.ErrOpen) {
				t.Fatalf("Open = %q, %v; want ErrOpen", got, err)
			}
			if strings.Contains(err.Error(), "the secret") {
				t.Fatalf("error shows the secret: %v", err)
			}
		})
	}
}

func TestKeyFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "data.json.key")
	k1, err := vault.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != 32 {
		t.Fatalf("key file mode %o size %d; want 0600, 32", st.Mode().Perm(), st.Size())
	}
	sealed, err := vault.New(k1, nil).Seal(ctx, "c", []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	// A restart reads the same key and opens what the last process sealed.
	k2, err := vault.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := vault.New(k2, nil).Open(ctx, "c", sealed); err != nil || string(got) != "kept" {
		t.Fatalf("Open after reload = %q, %v", got, err)
	}

	bad := []struct {
		name    string
		content []byte
		mode    os.FileMode
		want    string
	}{
		{"readable by others", make([]byte, 32), 0o644, "mode 644"},
		{"group writable", make([]byte, 32), 0o620, "mode 620"},
		{"short", make([]byte, 31), 0o600, "holds 31"},
		{"long", make([]byte, 33), 0o600, "holds 33"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			if err := os.WriteFile(p, tt.content, tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tt.mode); err != nil {
				t.Fatal(err)
			}
			if _, err := vault.LoadKeyFile(p); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadKeyFile = %v; want an error with %q", err, tt.want)
			}
		})
	}
}

// countingKeys counts the unwraps that reach the key side.
type countingKeys struct {
	vault.Keys
	unwraps int
}

func (c *countingKeys) Unwrap(ctx context.Context, wrapped []byte, context string) ([]byte, error) {
	c.unwraps++
	return c.Keys.Unwrap(ctx, wrapped, context)
}

func TestDataKeyCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys := &countingKeys{Keys: vault.NewMemoryKeys()}
	now := timeAt(0)
	v := vault.New(keys, now.get)
	sealed, err := v.Seal(ctx, "c", []byte("s"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := v.Open(ctx, "c", sealed); err != nil {
			t.Fatal(err)
		}
	}
	if keys.unwraps != 0 {
		t.Fatalf("%d unwraps within the cache's life; want 0", keys.unwraps)
	}
	now.add(vault.CacheTTL)
	if _, err := v.Open(ctx, "c", sealed); err != nil {
		t.Fatal(err)
	}
	if keys.unwraps != 1 {
		t.Fatalf("%d unwraps after the cache's life; want 1", keys.unwraps)
	}
	if _, err := v.Open(ctx, "other", sealed); !errors.Is(err, vault.ErrOpen) {
		t.Fatalf("cached key opened under another context: %v", err)
	}
}
