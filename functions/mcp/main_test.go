package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/lambdahttp/lambdatest"
	"github.com/workflowchat/service/shared/tools"
)

const testKey = "fn-url-test-service-key-7f3a9c" // the key the recorded events carry

func testEnv(extra map[string]string) func(string) string {
	env := map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME": "McpFunction",
		"AWS_REGION":               "us-east-1",
		"MCP_SERVICE_KEY":          testKey,
		"LOG_LEVEL":                "error",
	}
	for k, v := range extra {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

// loadFunctionURLEvent reads a recorded Lambda function URL event, checks
// it is one (it decodes as events.LambdaFunctionURLRequest with a
// lambda-url domain), and returns it as the payload v2 event the adapter
// takes: function URLs use the same payload format 2.0.
func loadFunctionURLEvent(t *testing.T, path string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var url events.LambdaFunctionURLRequest
	if err := json.Unmarshal(b, &url); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if url.Version != "2.0" || !strings.HasSuffix(url.RequestContext.DomainName, ".lambda-url.us-east-1.on.aws") || url.RequestContext.HTTP.Method != http.MethodPost {
		t.Fatalf("%s is not a function URL event: %+v", path, url.RequestContext)
	}
	return lambdatest.LoadV2(t, path)
}

// TestMcpFunctionEvents drives the function's real wiring with recorded
// function URL events (BUFFERED mode).
func TestMcpFunctionEvents(t *testing.T) {
	t.Parallel()
	h, err := newHandler(testEnv(nil), "")
	if err != nil {
		t.Fatal(err)
	}
	invoke := lambdahttp.NewAPIGatewayV2(h)
	ctx := context.Background()

	tests := []struct {
		event  string
		status int
		check  func(t *testing.T, body []byte)
	}{
		{"testdata/wrong-key.json", http.StatusUnauthorized, func(t *testing.T, body []byte) {
			var e struct{ Error, Message, Code string }
			mustDecode(t, body, &e)
			if e.Code != "UNAUTHORIZED" || e.Error != "Unauthorized" || e.Message == "" {
				t.Errorf("error body = %+v", e)
			}
		}},
		{"testdata/list-tools.json", http.StatusOK, func(t *testing.T, body []byte) {
			var r struct {
				Data struct {
					Tools []struct{ ID, Name, Description, Category string }
				}
			}
			mustDecode(t, body, &r)
			if want := len(tools.Builtin(tools.Config{})); len(r.Data.Tools) != want {
				t.Fatalf("listTools returned %d tools, want %d", len(r.Data.Tools), want)
			}
			for _, tool := range r.Data.Tools {
				if tool.ID == "" || tool.Name == "" || tool.Description == "" || tool.Category == "" {
					t.Errorf("incomplete tool %+v", tool)
				}
			}
		}},
		{"testdata/run-tool-json-query.json", http.StatusOK, func(t *testing.T, body []byte) {
			var r struct {
				Data struct {
					Result        map[string]any
					ExecutionTime json.Number
				}
			}
			mustDecode(t, body, &r)
			if got, _ := json.Marshal(r.Data.Result); string(got) != `{"result":["a"]}` {
				t.Errorf("result = %s", got)
			}
			if _, err := r.Data.ExecutionTime.Int64(); err != nil {
				t.Errorf("executionTime %q is not an integer", r.Data.ExecutionTime)
			}
		}},
		{"testdata/jsonrpc-tools-list.json", http.StatusOK, func(t *testing.T, body []byte) {
			var r struct {
				JSONRPC string
				ID      int
				Result  struct {
					Tools []struct {
						Name        string
						InputSchema map[string]any
					}
				}
			}
			mustDecode(t, body, &r)
			if r.JSONRPC != "2.0" || r.ID != 1 || len(r.Result.Tools) != len(tools.Builtin(tools.Config{})) || r.Result.Tools[0].InputSchema["type"] != "object" {
				t.Errorf("tools/list response = %s", body)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.event, func(t *testing.T) {
			t.Parallel()
			resp, err := invoke(ctx, loadFunctionURLEvent(t, tc.event))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tc.status, resp.Body)
			}
			if ct := resp.Headers["Content-Type"]; !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
			if resp.Headers["X-Request-Id"] == "" {
				t.Errorf("no X-Request-Id in %v", resp.Headers)
			}
			tc.check(t, []byte(resp.Body))
		})
	}
}

func TestMcpFunctionConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"missing service key", map[string]string{"MCP_SERVICE_KEY": ""}, "MCP_SERVICE_KEY"},
		{"bad private-networks flag", map[string]string{"TOOLS_ALLOW_PRIVATE_NETWORKS": "maybe"}, "TOOLS_ALLOW_PRIVATE_NETWORKS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := newHandler(testEnv(tc.env), "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %s", err, tc.want)
			}
		})
	}
	if _, err := newHandler(testEnv(map[string]string{"TOOLS_ALLOW_PRIVATE_NETWORKS": "true"}), ""); err != nil {
		t.Fatalf("TOOLS_ALLOW_PRIVATE_NETWORKS=true: %v", err)
	}
}

func mustDecode(t *testing.T, body []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
}
