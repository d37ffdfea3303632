package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/workflowchat/service/functions/assembly/signingkeys/signingkeystest"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/lambdahttp/lambdatest"
	"github.com/workflowchat/service/shared/oauth/accesstoken"
	"github.com/workflowchat/service/shared/store/storetest"
)

const secretARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:signing-keys-AbCdEf"

// TestOAuthFunctionEvents drives the function's real wiring, its signing
// keys read from (a stand-in of) Secrets Manager, with API Gateway HTTP
// API events as they arrive through CloudFront: the protected resource
// metadata names the viewer's origin (X-Viewer-Host), not API Gateway's
// host, and a browser-based client registers.
func TestOAuthFunctionEvents(t *testing.T) {
	sm := signingkeystest.Start(t, secretARN, accesstoken.GenerateKeySet("k1"))
	db := storetest.New(t)
	h, err := newHandler(context.Background(), db.Env(t, map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME": "OAuthFunction", "OAUTH_SIGNING_SECRET": secretARN, "AWS_ENDPOINT_URL_SECRETS_MANAGER": sm.URL, "LOG_LEVEL": "error",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if sm.Reads.Load() != 1 {
		t.Errorf("init read the keys %d times, want once", sm.Reads.Load())
	}
	invoke := lambdahttp.NewAPIGatewayV2(h)
	resp, err := invoke(context.Background(), lambdatest.LoadV2(t, "testdata/metadata.json"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("metadata: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	var md struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	lambdatest.DecodeBody(t, resp, &md)
	if md.Resource != "https://api.workflowchat.example/api/mcp" || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != "https://api.workflowchat.example" {
		t.Errorf("metadata = %+v", md)
	}

	resp, err = invoke(context.Background(), lambdatest.LoadV2(t, "testdata/register.json"))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("register: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	var reg map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &reg); err != nil || reg["client_id"] == "" || reg["token_endpoint_auth_method"] != "none" || reg["client_secret"] != nil {
		t.Errorf("registration = %s", resp.Body)
	}
	if resp.Headers["Access-Control-Allow-Origin"] != "*" {
		t.Errorf("registration CORS = %v", resp.Headers)
	}
}

// TestOAuthFunctionNeedsItsKeys: without OAUTH_SIGNING_SECRET, or with a
// secret that is not a key set, init fails naming the problem.
func TestOAuthFunctionNeedsItsKeys(t *testing.T) {
	sm := signingkeystest.Start(t, secretARN, []byte(`{"kid":"k1","secret":"short"}`))
	db := storetest.New(t)
	for name, c := range map[string]struct{ secret, want string }{
		"no secret":        {"", "OAUTH_SIGNING_SECRET"},
		"malformed secret": {secretARN, "at least 32 characters"},
		"unknown secret":   {secretARN + "-other", "ResourceNotFoundException"},
	} {
		_, err := newHandler(context.Background(), db.Env(t, map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "OAuthFunction", "OAUTH_SIGNING_SECRET": c.secret, "AWS_ENDPOINT_URL_SECRETS_MANAGER": sm.URL}))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, c.want)
		}
	}
}
