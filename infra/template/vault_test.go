package template_test

// The vault's key: one KMS key of the template, used only to make and
// unwrap data keys, and only by the functions that call the users' remote
// MCP servers.

import (
	"fmt"
	"slices"
	"strings"
)

const (
	vaultKeyID  = "VaultKey"
	vaultKeyEnv = "VAULT_KMS_KEY"
)

// wantVaultUsers is the reviewed set of functions that seal or open the
// users' MCP server secrets.
var wantVaultUsers = []string{"McpServersFunction",
	// They call the users' remote MCP tools with the sealed secrets.
	"ChatsFunction", "StreamFunction", "RunnerFunction"}

// isVaultStatement reports whether a policy statement names a kms:
// action.
func isVaultStatement(stmt map[string]any) bool {
	for _, a := range strs(stmt["Action"]) {
		if strings.HasPrefix(a, "kms:") {
			return true
		}
	}
	return false
}

// (t) VaultKey is an AWS::KMS::Key, symmetric, rotated and retained;
// exactly wantVaultUsers receive VAULT_KMS_KEY = !GetAtt VaultKey.Arn and
// one statement allowing kms:GenerateDataKey and kms:Decrypt alone on it;
// no other function names a kms: action.
func checkVaultKey(s *stack, _ *codeFacts) []string {
	var probs []string
	res := s.resources()
	key := res[vaultKeyID]
	if key["Type"] != "AWS::KMS::Key" {
		return append(probs, fmt.Sprintf("%s: type %v, want AWS::KMS::Key", vaultKeyID, key["Type"]))
	}
	props := asMap(key["Properties"])
	if props["EnableKeyRotation"] != true {
		probs = append(probs, fmt.Sprintf("%s: EnableKeyRotation %v, want true", vaultKeyID, props["EnableKeyRotation"]))
	}
	if key["DeletionPolicy"] != "Retain" {
		probs = append(probs, fmt.Sprintf("%s: DeletionPolicy %v, want Retain (deleting it loses every sealed secret)", vaultKeyID, key["DeletionPolicy"]))
	}
	want := []string{"kms:Decrypt", "kms:GenerateDataKey"}
	for _, id := range sortedKeys(s.functions) {
		user := slices.Contains(wantVaultUsers, id)
		env, has := s.env(s.functions[id])[vaultKeyEnv]
		switch {
		case user && env != getAttMark+vaultKeyID+".Arn":
			probs = append(probs, fmt.Sprintf("%s: %s = %q, want !GetAtt %s.Arn", id, vaultKeyEnv, env, vaultKeyID))
		case !user && has:
			probs = append(probs, fmt.Sprintf("%s: receives %s but is not a reviewed user of the vault", id, vaultKeyEnv))
		}
		docs, _ := asMap(res[id]["Properties"])["Policies"].([]any)
		uses := 0
		for _, d := range docs {
			stmts, _ := asMap(d)["Statement"].([]any)
			for _, st := range stmts {
				stmt := asMap(st)
				if !isVaultStatement(stmt) {
					continue
				}
				uses++
				a := slices.Sorted(slices.Values(strs(stmt["Action"])))
				if r := strs(stmt["Resource"]); !slices.Equal(a, want) || !slices.Equal(r, []string{getAttMark + vaultKeyID + ".Arn"}) {
					probs = append(probs, fmt.Sprintf("%s: vault statement %v on %v, want %v alone on !GetAtt %s.Arn", id, a, r, want, vaultKeyID))
				}
			}
		}
		switch {
		case user && uses != 1:
			probs = append(probs, fmt.Sprintf("%s: %d vault statements, want 1", id, uses))
		case !user && uses > 0:
			probs = append(probs, fmt.Sprintf("%s: names kms: actions but is not a reviewed user of the vault", id))
		}
	}
	return probs
}
