package template_test

// OAuth at the edge: the signing keys, a Secrets Manager secret of the
// template read by exactly the functions that sign or verify access
// tokens; and the viewer's host name, which every CloudFront behaviour
// hands the origins (the issuer and the MCP resource URL are built from
// it).

import (
	"fmt"
	"slices"
	"strings"
)

const (
	signingSecretID  = "OAuthSigningKeySecret"
	signingSecretEnv = "OAUTH_SIGNING_SECRET"
	secretAction     = "secretsmanager:GetSecretValue"
)

// wantSecretReaders is the reviewed set of functions that read the signing
// keys: the authorization server signs access tokens, the MCP gateway
// verifies them.
var wantSecretReaders = []string{"McpGatewayFunction", "OAuthFunction"}

// isSecretStatement reports whether a policy statement names a
// secretsmanager: action.
func isSecretStatement(stmt map[string]any) bool {
	for _, a := range strs(stmt["Action"]) {
		if strings.HasPrefix(a, "secretsmanager:") {
			return true
		}
	}
	return false
}

// (n) The signing keys live in the AWS::SecretsManager::Secret
// OAuthSigningKeySecret, generated at creation (GenerateSecretString, with
// the kid and secret fields accesstoken.ParseKeySet reads) and retained;
// exactly wantSecretReaders receive OAUTH_SIGNING_SECRET = !Ref of it and
// one statement allowing secretsmanager:GetSecretValue alone on !Ref of it;
// no other function names a secretsmanager: action; no output names the
// secret.
func checkSigningSecret(s *stack, _ *codeFacts) []string {
	var probs []string
	res := s.resources()
	sec := res[signingSecretID]
	if sec["Type"] != "AWS::SecretsManager::Secret" {
		return append(probs, fmt.Sprintf("%s: type %v, want AWS::SecretsManager::Secret", signingSecretID, sec["Type"]))
	}
	gen := asMap(asMap(sec["Properties"])["GenerateSecretString"])
	if gen["GenerateStringKey"] != "secret" || !strings.Contains(fmt.Sprint(gen["SecretStringTemplate"]), `"kid"`) {
		probs = append(probs, fmt.Sprintf("%s: GenerateSecretString %v, want a template with kid and GenerateStringKey secret", signingSecretID, gen))
	}
	if n, _ := gen["PasswordLength"].(float64); n < 32 {
		probs = append(probs, fmt.Sprintf("%s: PasswordLength %v, want at least 32 (accesstoken.MinSecretLen)", signingSecretID, gen["PasswordLength"]))
	}
	if sec["DeletionPolicy"] != "Retain" {
		probs = append(probs, fmt.Sprintf("%s: DeletionPolicy %v, want Retain (deleting it invalidates every token)", signingSecretID, sec["DeletionPolicy"]))
	}
	for _, id := range sortedKeys(s.functions) {
		want := slices.Contains(wantSecretReaders, id)
		env, has := s.env(s.functions[id])[signingSecretEnv]
		switch {
		case want && env != refMark+signingSecretID:
			probs = append(probs, fmt.Sprintf("%s: %s = %q, want !Ref %s", id, signingSecretEnv, env, signingSecretID))
		case !want && has:
			probs = append(probs, fmt.Sprintf("%s: receives %s but is not a reviewed reader of the signing keys", id, signingSecretEnv))
		}
		docs, _ := asMap(res[id]["Properties"])["Policies"].([]any)
		reads := 0
		for _, d := range docs {
			stmts, _ := asMap(d)["Statement"].([]any)
			for _, st := range stmts {
				stmt := asMap(st)
				if !isSecretStatement(stmt) {
					continue
				}
				reads++
				if a, r := strs(stmt["Action"]), strs(stmt["Resource"]); !slices.Equal(a, []string{secretAction}) ||
					!slices.Equal(r, []string{refMark + signingSecretID}) || stmt["Effect"] != "Allow" {
					probs = append(probs, fmt.Sprintf("%s: secret statement %v, want %s alone on !Ref %s", id, stmt, secretAction, signingSecretID))
				}
			}
		}
		if want && reads != 1 || !want && reads > 0 {
			probs = append(probs, fmt.Sprintf("%s: %d statements on secrets, want %d", id, reads, map[bool]int{true: 1}[want]))
		}
	}
	for _, name := range sortedKeys(s.tmpl.Outputs) {
		if strings.Contains(fmt.Sprint(s.tmpl.Outputs[name].Value), signingSecretID) {
			probs = append(probs, fmt.Sprintf("Outputs.%s names the signing key secret", name))
		}
	}
	return probs
}

// viewerHostFunction is the CloudFront Function that copies the viewer's
// Host into X-Viewer-Host (oauth.ViewerHostHeader).
const viewerHostFunction = "ViewerHostFunction"

// (o) Every behaviour of the distribution runs ViewerHostFunction on
// viewer-request, an AWS::CloudFront::Function (cloudfront-js-2.0,
// published) whose code sets x-viewer-host from the Host header: without
// it the origins would build the OAuth issuer and the MCP resource URL from
// their own host names, and tokens would name the wrong audience.
func checkViewerHost(s *stack, _ *codeFacts) []string {
	var probs []string
	res := s.resources()
	fn := res[viewerHostFunction]
	props := asMap(fn["Properties"])
	code, _ := props["FunctionCode"].(string)
	if fn["Type"] != "AWS::CloudFront::Function" || props["AutoPublish"] != true ||
		asMap(props["FunctionConfig"])["Runtime"] != "cloudfront-js-2.0" ||
		!strings.Contains(code, "'x-viewer-host'") || !strings.Contains(code, "request.headers.host.value") {
		probs = append(probs, fmt.Sprintf("%s: want an AWS::CloudFront::Function (cloudfront-js-2.0, AutoPublish) setting x-viewer-host from the Host header, got %v", viewerHostFunction, fn))
	}
	want := getAttMark + viewerHostFunction + ".FunctionMetadata.FunctionARN"
	for id, r := range res {
		if r["Type"] != distributionType {
			continue
		}
		cfg := asMap(asMap(r["Properties"])["DistributionConfig"])
		behaviours := []any{cfg["DefaultCacheBehavior"]}
		list, _ := cfg["CacheBehaviors"].([]any)
		behaviours = append(behaviours, list...)
		for i, b := range behaviours {
			found := false
			fas, _ := asMap(b)["FunctionAssociations"].([]any)
			for _, fa := range fas {
				m := asMap(fa)
				found = found || m["EventType"] == "viewer-request" && m["FunctionARN"] == want
			}
			if !found {
				probs = append(probs, fmt.Sprintf("%s: behaviour %d (%v) does not run %s on viewer-request", id, i, asMap(b)["PathPattern"], viewerHostFunction))
			}
		}
	}
	return probs
}
