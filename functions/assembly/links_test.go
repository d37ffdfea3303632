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
	// jsonschema is the one JSON Schema library (package shared/schema
	// wraps it); santhoshJSONSchema, dropped for it, compiled every
	// draft's meta-schema in its package init, milliseconds of each cold
	// start: no function may link it again.
	jsonschema         = "github.com/google/jsonschema-go"
	santhoshJSONSchema = "github.com/santhosh-tekuri/jsonschema"
	goquery            = "github.com/PuerkitoBio/goquery"
	gojq               = "github.com/itchyny/gojq"
	expr               = "github.com/expr-lang/expr"
	mcpSDK             = "github.com/modelcontextprotocol/go-sdk"
	dynamodbSDK        = "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	// lambdaSDK and secretsManagerSDK are the SDK's clients of the two
	// operations made through shared/awsapi (one signed request each)
	// instead, the runner's invoke and the signing keys' read: their
	// package inits build serialization schemas and endpoint tables, so
	// no function links them.
	lambdaSDK         = "github.com/aws/aws-sdk-go-v2/service/lambda"
	secretsManagerSDK = "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	// s3SDK keeps blobs (shared/blob/s3blob): only the functions whose
	// builders open the blob store (assembly/blobstore) link it.
	s3SDK     = "github.com/aws/aws-sdk-go-v2/service/s3"
	toolImpls = "github.com/workflowchat/service/shared/tools"
	// The OpenTelemetry SDK exports the spans (shared/tracing/otlp):
	// every function but health links it, and none links gRPC or the
	// generated OTLP types (whose collector package links gRPC and the
	// gRPC gateway), whose package inits would weigh on every cold start;
	// the exporter writes the protobuf wire format itself.
	otelSDK   = "go.opentelemetry.io/otel/sdk"
	grpc      = "google.golang.org/grpc"
	otlpProto = "go.opentelemetry.io/proto/otlp"
)

var (
	providerSDKs = []string{openaiSDK, anthropicSDK, bedrockSDK, openaiClient, anthropicClient}
	toolDeps     = []string{goquery, gojq, expr, mcpSDK, toolImpls}
	// stepDeps are the tools' dependencies but expr, which the functions
	// that check or evaluate a step's `if` (package condition) link.
	stepDeps   = []string{goquery, gojq, mcpSDK, toolImpls}
	everywhere = []string{santhoshJSONSchema, lambdaSDK, secretsManagerSDK, grpc, otlpProto}
)

// TestFunctionsLinkOnlyWhatTheyUse lists each function's dependencies
// (go list -deps) and requires that it links none of the heavy packages
// its builder has no use for: only the functions that call a model link a
// provider SDK (models still lists the models through the providers), only
// the tool server links the tools' implementations, only the workflow
// function (proposals), the functions that start runs (a run's input is
// checked against the workflow's inputSchema) and the tool server link
// JSON Schema, none links the JSON Schema library whose init compiled
// meta-schemas, only the workflow
// function and the runner link expr (the language of a step's `if`),
// health links no DynamoDB and no OpenTelemetry SDK, and none links gRPC.
func TestFunctionsLinkOnlyWhatTheyUse(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("go list over every function")
	}
	cases := []struct {
		dir       string
		forbidden [][]string
	}{
		{"health", [][]string{providerSDKs, toolDeps, {jsonschema, dynamodbSDK, s3SDK, otelSDK}}},
		// Auth presigns the downloads of data exports (the blob store).
		{"auth", [][]string{providerSDKs, toolDeps, {jsonschema}}},
		{"tools", [][]string{providerSDKs, toolDeps, {jsonschema, s3SDK}}},
		{"models", [][]string{toolDeps, {jsonschema, s3SDK}}},
		// The chat service links the run service (package runs), which
		// checks a run's input against the workflow's inputSchema (JSON
		// Schema), and the blob store of attachments (S3); the stream also
		// hands the runs it renders to the runner.
		{"chats", [][]string{toolDeps}},
		{"stream", [][]string{toolDeps}},
		{"workflows", [][]string{stepDeps}},
		{"mcp", [][]string{{dynamodbSDK}}},
		// The runner calls tools through the tool server, and models for
		// agent steps; it evaluates steps' `if` (expr).
		// Both may start a schedule's buffered fire (input checked).
		{"runner", [][]string{stepDeps}},
		// The sweeper resumes runs without reading their values (the
		// runner does), but the end of an interrupted schedule run may
		// start its trigger's buffered fire through the one run service,
		// which keeps large inputs in the blob store and checks the
		// attachments they name (S3).
		{"sweeper", [][]string{providerSDKs, toolDeps}},
		// The triggers' functions call no model and no tool; the run
		// engine's starter (JSON Schema for run inputs, the runner's
		// invoke) is theirs to link.
		{"triggers", [][]string{providerSDKs, toolDeps}},
		{"triggerfire", [][]string{providerSDKs, toolDeps}},
		// The authorization server uses go-sdk's OAuth metadata types
		// (oauthex), not its MCP server.
		{"oauth", [][]string{providerSDKs, {goquery, gojq, expr, toolImpls, jsonschema, mcpSDK + "/mcp"}}},
		{"mcpgateway", [][]string{providerSDKs, {goquery, gojq, expr, toolImpls}}},
		// The users' MCP servers: the MCP client and the vault's KMS
		// client, no model, no tool, no blob.
		{"mcpservers", [][]string{providerSDKs, {goquery, gojq, expr, toolImpls, s3SDK}}},
		// The indexing of knowledge base documents: the embedders
		// (Bedrock's runtime client for Titan Text Embeddings V2, the
		// OpenAI-compatible one over plain HTTP), S3 Vectors, the blob
		// store; no model provider, no tool, no JSON Schema.
		{"knowledgeindex", [][]string{{openaiSDK, anthropicSDK, openaiClient, anthropicClient, jsonschema}, toolDeps}},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			t.Parallel()
			deps := depsOf(t, tc.dir)
			for _, prefix := range slices.Concat(append(tc.forbidden, everywhere)...) {
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
		"chats":     {bedrockSDK, dynamodbSDK, s3SDK},
		"workflows": {expr, jsonschema, otelSDK},
		"runner":    {otelSDK},
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
