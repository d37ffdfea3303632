package kmskeys_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/workflowchat/service/shared/vault"
	"github.com/workflowchat/service/shared/vault/kmskeys"
)

const keyID = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// kmsEndpoint answers KMS's JSON protocol for GenerateDataKey and
// Decrypt with LocalKeys behind it, checking what the SDK sends: the key
// id, AES_256 and the encryption context, which must match at Decrypt as
// KMS requires.
type kmsEndpoint struct {
	keys *vault.LocalKeys
	mu   sync.Mutex
	seen []string
}

func (k *kmsEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct {
		KeyID             string `json:"KeyId"`
		KeySpec           string
		CiphertextBlob    []byte
		EncryptionContext map[string]string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.KeyID != keyID {
		http.Error(w, `{"__type":"ValidationException","message":"bad request"}`, http.StatusBadRequest)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	k.mu.Lock()
	k.seen = append(k.seen, target)
	k.mu.Unlock()
	ec, _ := json.Marshal(in.EncryptionContext)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	switch target {
	case "TrentService.GenerateDataKey":
		if in.KeySpec != "AES_256" {
			http.Error(w, `{"__type":"ValidationException","message":"key spec"}`, http.StatusBadRequest)
			return
		}
		plain, wrapped, _ := k.keys.NewDataKey(r.Context(), string(ec))
		json.NewEncoder(w).Encode(map[string]any{"KeyId": keyID, "Plaintext": plain, "CiphertextBlob": wrapped})
	case "TrentService.Decrypt":
		plain, err := k.keys.Unwrap(r.Context(), in.CiphertextBlob, string(ec))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"__type":"InvalidCiphertextException","message":"invalid ciphertext"}`))
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"KeyId": keyID, "Plaintext": plain})
	default:
		http.Error(w, `{"__type":"UnknownOperationException"}`, http.StatusBadRequest)
	}
}

func TestKMSKeys(t *testing.T) {
	t.Parallel()
	ep := &kmsEndpoint{keys: vault.NewMemoryKeys()}
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	client := kms.New(kms.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	ctx := context.Background()

	v := vault.New(kmskeys.New(client, keyID), nil)
	sealed, err := v.Seal(ctx, "mcpserver:a", []byte("token"))
	if err != nil {
		t.Fatal(err)
	}
	// A second vault (another instance) has nothing cached: it asks KMS.
	v2 := vault.New(kmskeys.New(client, keyID), nil)
	got, err := v2.Open(ctx, "mcpserver:a", sealed)
	if err != nil || string(got) != "token" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := vault.New(kmskeys.New(client, keyID), nil).Open(ctx, "mcpserver:b", sealed); err == nil {
		t.Fatal("opened under another encryption context")
	} else if errors.Is(err, vault.ErrOpen) {
		t.Fatalf("KMS refusal reported as a local failure: %v", err)
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	want := []string{"TrentService.GenerateDataKey", "TrentService.Decrypt", "TrentService.Decrypt"}
	if len(ep.seen) != len(want) {
		t.Fatalf("KMS calls %v; want %v", ep.seen, want)
	}
	for i := range want {
		if ep.seen[i] != want[i] {
			t.Fatalf("KMS calls %v; want %v", ep.seen, want)
		}
	}
}
