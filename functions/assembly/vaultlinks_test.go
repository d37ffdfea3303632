package assembly_test

import (
	"os"
	"testing"
)

// kmsSDK is the vault's KMS client (shared/vault/kmskeys): only the
// function that seals and opens the users' secrets links it.
const kmsSDK = "github.com/aws/aws-sdk-go-v2/service/kms"

// vaultUsers are the functions that seal or open the users' secrets:
// the MCP servers' own, and those that call remote MCP tools.
var vaultUsers = map[string]bool{"mcpservers": true, "chats": true, "stream": true, "runner": true}

// TestOnlyTheVaultsUserLinksKMS: the vault's users link the KMS client
// and no other function does.
func TestOnlyTheVaultsUserLinksKMS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("go list over every function")
	}
	dirs, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "assembly" {
			continue
		}
		if _, err := os.Stat("../" + d.Name() + "/main.go"); err != nil {
			continue
		}
		t.Run(d.Name(), func(t *testing.T) {
			t.Parallel()
			got := links(depsOf(t, d.Name()), kmsSDK)
			if want := vaultUsers[d.Name()]; got != want {
				t.Errorf("functions/%s links %s: %v, want %v", d.Name(), kmsSDK, got, want)
			}
		})
	}
}
