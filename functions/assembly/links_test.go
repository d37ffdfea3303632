package assembly_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Heavy dependencies, by import path prefix.
const (
	openaiSDK    = "github.com/openai/openai-go"
	anthropicSDK = "github.com/anthropics/anthropic-sdk-go"
	bedrockSDK   = "github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	// The light clients that may stand in for the two SDKs above.
	openaiClient    = "github.com/sashabaranov/go-openai"
	anthropicClient = "github.com/liushuangls/go-anthropic"
	jsonschema      = "github.com/santhosh-tekuri/jsonschema"
	goquery         = "github.com/PuerkitoBio/goquery"
	gojq            = "github.com/itchyny/gojq"
	expr            = "github.com/expr-lang/expr"
	mcpSDK          = "github.com/modelcontextprotocol/go-sdk"
	dynamodbSDK     = "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	// lambdaSDK invokes the runner: only the functions that hand it runs
	// (and the runner, whose builder package holds the invoker) link it.
	lambdaSDK = "github.com/aws/aws-sdk-go-v2/service/lambda"
	toolImpls = "github.com/workflowchat/service/shared/tools"
)

var (
	providerSDKs = []string{openaiSDK, anthropicSDK, bedrockSDK, openaiClient, anthropicClient}
	toolDeps     = []string{goquery, gojq, expr, mcpSDK, toolImpls}
)

// TestFunctionsLinkOnlyWhatTheyUse lists each function's dependencies
// (go list -deps) and requires that it links none of the heavy packages
// its builder has no use for: only the functions that call a model link a
// provider SDK (models still lists the models through the providers), only
// the tool server links the tools' implementations, only the workflow
// function (proposals) links JSON Schema, and health links no DynamoDB.
func TestFunctionsLinkOnlyWhatTheyUse(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("go list over every function")
	}
	cases := []struct {
		dir       string
		forbidden [][]string
	}{
		{"health", [][]string{providerSDKs, toolDeps, {jsonschema, dynamodbSDK, lambdaSDK}}},
		{"auth", [][]string{providerSDKs, toolDeps, {jsonschema, lambdaSDK}}},
		{"tools", [][]string{providerSDKs, toolDeps, {jsonschema, lambdaSDK}}},
		{"models", [][]string{toolDeps, {jsonschema, lambdaSDK}}},
		{"chats", [][]string{toolDeps, {jsonschema, lambdaSDK}}},
		{"stream", [][]string{toolDeps, {jsonschema, lambdaSDK}}},
		{"workflows", [][]string{toolDeps}},
		{"mcp", [][]string{{dynamodbSDK, lambdaSDK}}},
		// The runner calls tools through the tool server and no model.
		{"runner", [][]string{providerSDKs, toolDeps, {jsonschema}}},
		{"sweeper", [][]string{providerSDKs, toolDeps, {jsonschema}}},
		// The authorization server uses go-sdk's OAuth metadata types
		// (oauthex), not its MCP server.
		{"oauth", [][]string{providerSDKs, {goquery, gojq, expr, toolImpls, jsonschema, lambdaSDK, mcpSDK + "/mcp"}}},
		{"mcpgateway", [][]string{providerSDKs, {goquery, gojq, expr, toolImpls}}},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			t.Parallel()
			deps := depsOf(t, tc.dir)
			for _, prefix := range slices.Concat(tc.forbidden...) {
				if d := linked(deps, prefix); d != "" {
					t.Errorf("functions/%s links %s", tc.dir, d)
				}
			}
		})
	}
}

// TestLinkCheckSeesDependencies keeps the test above honest: the import
// paths it forbids are linked where they belong.
func TestLinkCheckSeesDependencies(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("go list over two functions")
	}
	for dir, want := range map[string][]string{
		"mcp":       {gojq, expr, goquery, jsonschema, mcpSDK, toolImpls},
		"chats":     {bedrockSDK, dynamodbSDK},
		"workflows": {lambdaSDK},
	} {
		deps := depsOf(t, dir)
		for _, w := range want {
			if !links(deps, w) {
				t.Errorf("functions/%s does not link %s: the check's import paths are stale", dir, w)
			}
		}
	}
}

// depsOf returns the packages functions/dir links (go list -deps).
func depsOf(t *testing.T, dir string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "../"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// linked returns the first of deps that is prefix or under it, "" if
// none.
func linked(deps []string, prefix string) string {
	for _, d := range deps {
		if d == prefix || strings.HasPrefix(d, prefix+"/") {
			return d
		}
	}
	return ""
}

func links(deps []string, prefix string) bool { return linked(deps, prefix) != "" }
