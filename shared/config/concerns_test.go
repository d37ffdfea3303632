package config_test

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/usage"
)

// loadCase is one environment and what Load makes of one concern: its
// struct, or the whole error.
type loadCase[T any] struct {
	name    string
	env     map[string]string
	want    T
	wantErr string
}

// testConcern runs Load on each case and compares the concern pick
// returns, or the error, in full: the messages are part of the contract.
func testConcern[T any](t *testing.T, pick func(config.Config) T, cases []loadCase[T]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(env(tt.env))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v\nwant %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := pick(c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// lambda is the variable that makes a process a Lambda function.
var lambda = map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "stack-Fn-1"}

func TestRuntime(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.Runtime { return c.Runtime }, []loadCase[config.Runtime]{
		{name: "local", want: config.Runtime{Region: "us-east-1"}},
		{name: "lambda", env: map[string]string{"AWS_LAMBDA_FUNCTION_NAME": " stack-Fn-1 ", "AWS_REGION": "eu-west-1", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "768"},
			want: config.Runtime{InLambda: true, FunctionName: "stack-Fn-1", Region: "eu-west-1", FunctionMemoryMB: 768}},
		{name: "memory too small", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "64"},
			wantErr: `config: AWS_LAMBDA_FUNCTION_MEMORY_SIZE: must be the function's memory in MB, at least 128, got "64"`},
		{name: "memory not a number", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1GB"},
			wantErr: `config: AWS_LAMBDA_FUNCTION_MEMORY_SIZE: must be an integer, got "1GB"`},
	})
}

func TestLogging(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.Logging { return c.Logging }, []loadCase[config.Logging]{
		{name: "local", want: config.Logging{LogLevel: slog.LevelInfo, LogFormat: logging.Text}},
		{name: "lambda", env: lambda, want: config.Logging{LogLevel: slog.LevelInfo, LogFormat: logging.JSON}},
		{name: "set", env: map[string]string{"LOG_LEVEL": "DEBUG", "LOG_FORMAT": "JSON"}, want: config.Logging{LogLevel: slog.LevelDebug, LogFormat: logging.JSON}},
		{name: "warning", env: map[string]string{"LOG_LEVEL": "Warning"}, want: config.Logging{LogLevel: slog.LevelWarn, LogFormat: logging.Text}},
		{name: "error", env: map[string]string{"LOG_LEVEL": "error"}, want: config.Logging{LogLevel: slog.LevelError, LogFormat: logging.Text}},
		{name: "unknown level", env: map[string]string{"LOG_LEVEL": "Loud"}, wantErr: `config: LOG_LEVEL: must be debug, info, warn or error, got "loud"`},
		{name: "level with offset", env: map[string]string{"LOG_LEVEL": "info+2"}, wantErr: `config: LOG_LEVEL: must be debug, info, warn or error, got "info+2"`},
		{name: "unknown format", env: map[string]string{"LOG_FORMAT": "XML"}, wantErr: `config: LOG_FORMAT: must be json or text, got "xml"`},
	})
}

func TestTables(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.Tables { return c.Tables }, []loadCase[config.Tables]{
		{name: "local", want: config.Tables{UsersTable: "users", SessionsTable: "sessions", DataTable: "data", RateLimitsTable: "rate_limits", OAuthTable: "oauth"}},
		{name: "lambda: no defaults", env: lambda, want: config.Tables{}},
		{name: "set", env: map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "f", "USERS_TABLE": "u", "SESSIONS_TABLE": "s", "DATA_TABLE": "d", "RATE_LIMITS_TABLE": "r", "OAUTH_TABLE": "o",
			"DYNAMODB_ENDPOINT": "http://127.0.0.1:8000"},
			want: config.Tables{DynamoDBEndpoint: "http://127.0.0.1:8000", UsersTable: "u", SessionsTable: "s", DataTable: "d", RateLimitsTable: "r", OAuthTable: "o"}},
		{name: "blank is unset", env: map[string]string{"USERS_TABLE": "  "}, want: config.Tables{UsersTable: "users", SessionsTable: "sessions", DataTable: "data", RateLimitsTable: "rate_limits", OAuthTable: "oauth"}},
		{name: "endpoint without scheme", env: map[string]string{"DYNAMODB_ENDPOINT": "localhost:8000"},
			wantErr: `config: DYNAMODB_ENDPOINT: must be an http(s) URL, got "localhost:8000"`},
	})
}

func TestDevServer(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.DevServer { return c.DevServer }, []loadCase[config.DevServer]{
		{name: "defaults", want: config.DevServer{SnapshotInterval: 30 * time.Second, Port: 3000, MCPPort: 3001}},
		{name: "set", env: map[string]string{"DATA_FILE": ".data/x.json", "DEV_CLOCK_FILE": "/tmp/clock", "SNAPSHOT_INTERVAL": "0", "PORT": "0", "MCP_PORT": "65535"},
			want: config.DevServer{DataFile: ".data/x.json", DevClockFile: "/tmp/clock", Port: 0, MCPPort: 65535}},
		{name: "negative interval", env: map[string]string{"SNAPSHOT_INTERVAL": "-1s"},
			wantErr: `config: SNAPSHOT_INTERVAL: must be a non-negative Go duration like 30s (0 snapshots only at shutdown), got "-1s"`},
		{name: "interval not a duration", env: map[string]string{"SNAPSHOT_INTERVAL": "30"},
			wantErr: `config: SNAPSHOT_INTERVAL: must be a Go duration like 30s or 1m30s, got "30"`},
		{name: "port not a number", env: map[string]string{"PORT": "http"}, wantErr: `config: PORT: must be an integer, got "http"`},
		{name: "port out of range", env: map[string]string{"MCP_PORT": "70000"}, wantErr: `config: MCP_PORT: must be a port number 0-65535, got "70000"`},
		{name: "both ports bad", env: map[string]string{"PORT": "-1", "MCP_PORT": "x"},
			wantErr: "config: MCP_PORT: must be an integer, got \"x\"\nconfig: PORT: must be a port number 0-65535, got \"-1\""},
	})
}

func TestAuth(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.Auth { return c.Auth }, []loadCase[config.Auth]{
		{name: "none", want: config.Auth{}},
		{name: "list", env: map[string]string{"ALLOWED_ORIGINS": " https://app.example.com/, ,http://localhost:5173// ,"},
			want: config.Auth{AllowedOrigins: []string{"https://app.example.com", "http://localhost:5173"}}},
		{name: "wildcard", env: map[string]string{"ALLOWED_ORIGINS": "*"}, wantErr: `config: ALLOWED_ORIGINS: "*" is not an origin like https://app.example.com`},
		{name: "path", env: map[string]string{"ALLOWED_ORIGINS": "https://a.example.com,https://app.example.com/path/"},
			wantErr: `config: ALLOWED_ORIGINS: "https://app.example.com/path" is not an origin like https://app.example.com`},
	})
}

func TestOAuth(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.OAuth { return c.OAuth }, []loadCase[config.OAuth]{
		{name: "none", want: config.OAuth{}},
		{name: "set", env: map[string]string{"PUBLIC_BASE_URL": "https://api.example.com/", "OAUTH_SIGNING_SECRET": "arn:aws:secretsmanager:us-east-1:1:secret:k",
			"OAUTH_KEY_FILE": "keys.json", "OAUTH_ALLOW_HTTP_CLIENTS": "1", "AWS_ENDPOINT_URL_SECRETS_MANAGER": "http://127.0.0.1:9/"},
			want: config.OAuth{PublicBaseURL: "https://api.example.com", OAuthSigningSecret: "arn:aws:secretsmanager:us-east-1:1:secret:k",
				OAuthKeyFile: "keys.json", OAuthAllowHTTPClients: true, SecretsManagerEndpoint: "http://127.0.0.1:9"}},
		{name: "base URL with a path", env: map[string]string{"PUBLIC_BASE_URL": "https://api.example.com/v1"},
			wantErr: `config: PUBLIC_BASE_URL: must be an http(s) origin like https://api.example.com, got "https://api.example.com/v1"`},
		{name: "base URL with a query", env: map[string]string{"PUBLIC_BASE_URL": "https://api.example.com?x=1"},
			wantErr: `config: PUBLIC_BASE_URL: must be an http(s) origin like https://api.example.com, got "https://api.example.com?x=1"`},
		{name: "not a boolean", env: map[string]string{"OAUTH_ALLOW_HTTP_CLIENTS": "yes"},
			wantErr: `config: OAUTH_ALLOW_HTTP_CLIENTS: must be a boolean (true or false), got "yes"`},
		{name: "endpoint", env: map[string]string{"AWS_ENDPOINT_URL_SECRETS_MANAGER": "secrets:9"},
			wantErr: `config: AWS_ENDPOINT_URL_SECRETS_MANAGER: must be an http(s) URL, got "secrets:9"`},
	})
}

func TestBlobs(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.Blobs { return c.Blobs }, []loadCase[config.Blobs]{
		{name: "defaults", want: config.Blobs{UserStorageQuota: config.DefaultUserStorageQuota}},
		{name: "set", env: map[string]string{"BLOB_BUCKET": "stack-blobbucket-1a2b3c", "BLOB_ENDPOINT": "http://127.0.0.1:9000/", "USER_STORAGE_QUOTA": "1048576"},
			want: config.Blobs{BlobBucket: "stack-blobbucket-1a2b3c", BlobEndpoint: "http://127.0.0.1:9000", UserStorageQuota: 1 << 20}},
		{name: "bucket name", env: map[string]string{"BLOB_BUCKET": "My_Bucket"},
			wantErr: `config: BLOB_BUCKET: must be an S3 bucket name (3-63 lower-case letters, digits, dots and hyphens), got "My_Bucket"`},
		{name: "endpoint", env: map[string]string{"BLOB_ENDPOINT": "localhost:9000"}, wantErr: `config: BLOB_ENDPOINT: must be an http(s) URL, got "localhost:9000"`},
		{name: "zero quota", env: map[string]string{"USER_STORAGE_QUOTA": "0"},
			wantErr: `config: USER_STORAGE_QUOTA: must be a positive integer number of bytes (default 1073741824, 1 GiB), got "0"`},
		{name: "quota with a unit", env: map[string]string{"USER_STORAGE_QUOTA": "1GiB"}, wantErr: `config: USER_STORAGE_QUOTA: must be an integer, got "1GiB"`},
	})
}

func TestModels(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.Models { return c.Models }, []loadCase[config.Models]{
		{name: "defaults", want: config.Models{DefaultModelID: "builtin"}},
		{name: "set", env: map[string]string{"DEFAULT_MODEL_ID": "openai/llama3", "BUILTIN_CHUNK_DELAY": "10s",
			"OPENAI_MODELS": "llama3, ,qwen", "OPENAI_BASE_URL": "http://localhost:11434/v1/",
			"ANTHROPIC_MODELS": "claude", "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "https://a.example.com/",
			"BEDROCK_MODELS": "amazon.nova-lite-v1:0", "BEDROCK_ENDPOINT": "http://127.0.0.1:9/"},
			want: config.Models{DefaultModelID: "openai/llama3", BuiltinChunkDelay: 10 * time.Second,
				OpenAIModels: []string{"llama3", "qwen"}, OpenAIBaseURL: "http://localhost:11434/v1",
				AnthropicModels: []string{"claude"}, AnthropicAPIKey: "k", AnthropicBaseURL: "https://a.example.com",
				BedrockModels: []string{"amazon.nova-lite-v1:0"}, BedrockEndpoint: "http://127.0.0.1:9"}},
		{name: "OpenAI with a key", env: map[string]string{"OPENAI_MODELS": "gpt-4o", "OPENAI_API_KEY": "sk"},
			want: config.Models{DefaultModelID: "builtin", OpenAIModels: []string{"gpt-4o"}, OpenAIAPIKey: "sk"}},
		{name: "delay too long", env: map[string]string{"BUILTIN_CHUNK_DELAY": "11s"},
			wantErr: `config: BUILTIN_CHUNK_DELAY: must be a Go duration from 0 to 10s, got "11s"`},
		{name: "base URL", env: map[string]string{"OPENAI_BASE_URL": "not a url"}, wantErr: `config: OPENAI_BASE_URL: must be an http(s) URL, got "not a url"`},
		{name: "OpenAI without key or server", env: map[string]string{"OPENAI_MODELS": "gpt-4o"},
			wantErr: "config: OPENAI_API_KEY: is required for OPENAI_MODELS unless OPENAI_BASE_URL names an OpenAI-compatible server"},
		{name: "Anthropic without key", env: map[string]string{"ANTHROPIC_MODELS": "claude"}, wantErr: "config: ANTHROPIC_API_KEY: is required for ANTHROPIC_MODELS"},
	})
}

func TestTools(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.Tools { return c.Tools }, []loadCase[config.Tools]{
		{name: "defaults", want: config.Tools{ToolsCacheTTL: 5 * time.Minute, SandboxPerUser: config.DefaultSandboxPerUser}},
		{name: "set", env: map[string]string{"MCP_SERVICE_KEY": "0123456789abcdef", "MCP_URL": "https://abc.lambda-url.us-east-1.on.aws/",
			"TOOLS_CACHE_TTL": "0", "TOOLS_ALLOW_PRIVATE_NETWORKS": "true", "SANDBOX_PER_USER": "64", "TOOLS_TEST_HOOKS": "TRUE"},
			want: config.Tools{MCPServiceKey: "0123456789abcdef", MCPURL: "https://abc.lambda-url.us-east-1.on.aws",
				ToolsAllowPrivateNetworks: true, SandboxPerUser: 64, ToolsTestHooks: true}},
		{name: "short key", env: map[string]string{"MCP_SERVICE_KEY": "short"}, wantErr: "config: MCP_SERVICE_KEY: must be at least 16 characters"},
		{name: "URL", env: map[string]string{"MCP_URL": "ftp://x"}, wantErr: `config: MCP_URL: must be an http(s) URL, got "ftp://x"`},
		{name: "negative TTL", env: map[string]string{"TOOLS_CACHE_TTL": "-1s"}, wantErr: `config: TOOLS_CACHE_TTL: must be a non-negative Go duration like 5m, got "-1s"`},
		{name: "TTL in words", env: map[string]string{"TOOLS_CACHE_TTL": "5 minutes"}, wantErr: `config: TOOLS_CACHE_TTL: must be a Go duration like 30s or 1m30s, got "5 minutes"`},
		{name: "no sandbox", env: map[string]string{"SANDBOX_PER_USER": "0"},
			wantErr: `config: SANDBOX_PER_USER: must be an integer from 1 to 64 (isolated tool runs one user may have at once), got "0"`},
		{name: "sandbox too large", env: map[string]string{"SANDBOX_PER_USER": "65"},
			wantErr: `config: SANDBOX_PER_USER: must be an integer from 1 to 64 (isolated tool runs one user may have at once), got "65"`},
		{name: "sandbox fraction", env: map[string]string{"SANDBOX_PER_USER": "1.5"}, wantErr: `config: SANDBOX_PER_USER: must be an integer, got "1.5"`},
		{name: "hooks", env: map[string]string{"TOOLS_TEST_HOOKS": "on"}, wantErr: `config: TOOLS_TEST_HOOKS: must be a boolean (true or false), got "on"`},
		{name: "private networks", env: map[string]string{"TOOLS_ALLOW_PRIVATE_NETWORKS": "y"},
			wantErr: `config: TOOLS_ALLOW_PRIVATE_NETWORKS: must be a boolean (true or false), got "y"`},
	})
}

func TestRuns(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.Runs { return c.Runs }, []loadCase[config.Runs]{
		{name: "defaults", want: config.Runs{GenerationLease: 30 * time.Second, SweepInterval: time.Minute}},
		{name: "set", env: map[string]string{"RUNNER_FUNCTION": " stack-RunnerFunction-1 ", "AWS_ENDPOINT_URL_LAMBDA": "http://127.0.0.1:9001/",
			"GENERATION_LEASE": "1s", "SWEEP_INTERVAL": "100ms"},
			want: config.Runs{RunnerFunction: "stack-RunnerFunction-1", LambdaEndpoint: "http://127.0.0.1:9001", GenerationLease: time.Second, SweepInterval: 100 * time.Millisecond}},
		{name: "endpoint", env: map[string]string{"AWS_ENDPOINT_URL_LAMBDA": "lambda"}, wantErr: `config: AWS_ENDPOINT_URL_LAMBDA: must be an http(s) URL, got "lambda"`},
		{name: "lease too short", env: map[string]string{"GENERATION_LEASE": "999ms"}, wantErr: `config: GENERATION_LEASE: must be a Go duration from 1s to 10m0s, got "999ms"`},
		{name: "sweep too rare", env: map[string]string{"SWEEP_INTERVAL": "1h"}, wantErr: `config: SWEEP_INTERVAL: must be a Go duration from 100ms to 10m0s, got "1h0m0s"`},
	})
}

func TestTriggers(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.Triggers { return c.Triggers }, []loadCase[config.Triggers]{
		{name: "defaults", want: config.Triggers{SchedulePollInterval: 10 * time.Second}},
		{name: "set", env: map[string]string{"WEBHOOK_SIGNING_KEY": strings.Repeat("k", 32), "SCHEDULE_GROUP": "stack-triggers",
			"SCHEDULE_TARGET_ARN": "arn:aws:lambda:us-east-1:123456789012:function:fire", "SCHEDULE_ROLE_ARN": "arn:aws:iam::123456789012:role/r",
			"SCHEDULE_DLQ_ARN": "arn:aws:sqs:us-east-1:123456789012:q", "SCHEDULER_ENDPOINT": "http://127.0.0.1:9/", "SCHEDULE_POLL_INTERVAL": "100ms"},
			want: config.Triggers{WebhookSigningKey: strings.Repeat("k", 32), ScheduleGroup: "stack-triggers",
				ScheduleTargetARN: "arn:aws:lambda:us-east-1:123456789012:function:fire", ScheduleRoleARN: "arn:aws:iam::123456789012:role/r",
				ScheduleDLQARN: "arn:aws:sqs:us-east-1:123456789012:q", SchedulerEndpoint: "http://127.0.0.1:9", SchedulePollInterval: 100 * time.Millisecond}},
		{name: "short key", env: map[string]string{"WEBHOOK_SIGNING_KEY": "short"},
			wantErr: "config: WEBHOOK_SIGNING_KEY: must be at least 32 characters (e.g. openssl rand -hex 32)"},
		{name: "target not an ARN", env: map[string]string{"SCHEDULE_TARGET_ARN": "fire-function"},
			wantErr: `config: SCHEDULE_TARGET_ARN: must be an ARN (arn:aws:lambda:...), got "fire-function"`},
		{name: "role of another service", env: map[string]string{"SCHEDULE_ROLE_ARN": "arn:aws:lambda:x"},
			wantErr: `config: SCHEDULE_ROLE_ARN: must be an ARN (arn:aws:iam:...), got "arn:aws:lambda:x"`},
		{name: "queue URL", env: map[string]string{"SCHEDULE_DLQ_ARN": "https://sqs/q"},
			wantErr: `config: SCHEDULE_DLQ_ARN: must be an ARN (arn:aws:sqs:...), got "https://sqs/q"`},
		{name: "endpoint", env: map[string]string{"SCHEDULER_ENDPOINT": "localhost"}, wantErr: `config: SCHEDULER_ENDPOINT: must be an http(s) URL, got "localhost"`},
		{name: "poll too rare", env: map[string]string{"SCHEDULE_POLL_INTERVAL": "11s"},
			wantErr: `config: SCHEDULE_POLL_INTERVAL: must be a Go duration from 100ms to 10s, got "11s"`},
	})
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	rule := func(name, spec string) ratelimit.Rule { return ratelimit.MustParse(name, spec) }
	defaults := config.RateLimits{
		RateLimitMessages: rule("messages", "30/m"), RateLimitStreams: rule("streams", "30/m"), RateLimitRuns: rule("runs", "20/m"),
		RateLimitResumes: rule("resumes", "120/m"), RateLimitMCP: rule("mcp requests", "120/m"), RateLimitAttachments: rule("attachments", "20/m,200/h"),
		RateLimitSearch:             rule("searches", "60/m,600/h"),
		RateLimitKnowledgeDocuments: rule("knowledge documents", "30/m,300/h"),
		RateLimitExports:            rule("exports", "3/h"),
		RateLimitSignInEmail:        rule("sign-ins", "5/m,30/h"), RateLimitSignInAddress: rule("sign-ins", "30/m,300/h"), RateLimitSignUpAddress: rule("sign-ups", "10/m,100/h"),
		RateLimitOAuthToken: rule("token requests", "60/m,600/h"), RateLimitOAuthRegister: rule("client registrations", "10/m,50/h"),
		RateLimitOAuthDocument: rule("client metadata document fetches", "10/m,100/h"),
	}
	set := defaults
	set.RateLimitMessages, set.RateLimitStreams, set.RateLimitOAuthRegister = rule("messages", "2/m,100/h"), rule("streams", "0"), rule("client registrations", "1/s")
	testConcern(t, func(c config.Config) config.RateLimits { return c.RateLimits }, []loadCase[config.RateLimits]{
		{name: "defaults", want: defaults},
		{name: "set", env: map[string]string{"RATE_LIMIT_MESSAGES": "2/m, 100/h", "RATE_LIMIT_STREAMS": "off", "RATE_LIMIT_OAUTH_REGISTER": "1/s"}, want: set},
		{name: "words", env: map[string]string{"RATE_LIMIT_SIGN_UP_ADDRESS": "30 per minute"},
			wantErr: `config: RATE_LIMIT_SIGN_UP_ADDRESS: must be 0 (off) or up to 3 comma-separated limits like 30/m (N per s, m or h; e.g. 30/m,500/h), got "30 per minute"`},
	})
}

func TestBudgets(t *testing.T) {
	t.Parallel()
	testConcern(t, func(c config.Config) config.Budgets { return c.Budgets }, []loadCase[config.Budgets]{
		{name: "none", want: config.Budgets{}},
		{name: "set", env: map[string]string{"USER_MONTHLY_TOKEN_BUDGET": "1000", "MODEL_PRICES": `{"gpt-4o": {"input": 2.5, "output": 10}, "builtin": {}}`},
			want: config.Budgets{UserMonthlyTokenBudget: 1000, ModelPrices: map[string]usage.Price{"gpt-4o": {Input: 2.5, Output: 10}, "builtin": {}}}},
		{name: "negative budget", env: map[string]string{"USER_MONTHLY_TOKEN_BUDGET": "-1"},
			wantErr: `config: USER_MONTHLY_TOKEN_BUDGET: must be a non-negative integer number of tokens (0: no budget), got "-1"`},
		{name: "budget in words", env: map[string]string{"USER_MONTHLY_TOKEN_BUDGET": "lots"}, wantErr: `config: USER_MONTHLY_TOKEN_BUDGET: must be an integer, got "lots"`},
		{name: "prices not JSON", env: map[string]string{"MODEL_PRICES": "gpt-4o=2.5"},
			wantErr: `config: MODEL_PRICES: must be a JSON object like {"gpt-4o": {"input": 2.5, "output": 10}} (USD per million tokens): invalid character 'g' looking for beginning of value`},
		{name: "unknown price field", env: map[string]string{"MODEL_PRICES": `{"gpt-4o": {"in": 1}}`},
			wantErr: `config: MODEL_PRICES: must be a JSON object like {"gpt-4o": {"input": 2.5, "output": 10}} (USD per million tokens): json: unknown field "in"`},
		{name: "negative prices", env: map[string]string{"MODEL_PRICES": `{"b": {"input": -1}, "a": {"output": -1}}`},
			wantErr: "config: MODEL_PRICES: the prices of \"a\" must not be negative\nconfig: MODEL_PRICES: the prices of \"b\" must not be negative"},
	})
}

// TestValidate: each concern's Validate checks values built in code too,
// not only Load's.
func TestValidate(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate of the defaults: %v", err)
	}
	unnamed := c.RateLimits
	unnamed.RateLimitRuns.Name = ""
	tests := []struct {
		name    string
		v       interface{ Validate() error }
		wantErr string
	}{
		{"runtime", config.Runtime{FunctionMemoryMB: -1}, `config: AWS_LAMBDA_FUNCTION_MEMORY_SIZE: must be the function's memory in MB, at least 128, got "-1"`},
		{"logging level", config.Logging{LogLevel: slog.LevelWarn + 1, LogFormat: logging.JSON}, `config: LOG_LEVEL: must be debug, info, warn or error, got "warn+1"`},
		{"logging format", config.Logging{}, `config: LOG_FORMAT: must be json or text, got ""`},
		{"dev server", config.DevServer{Port: 65536}, `config: PORT: must be a port number 0-65535, got "65536"`},
		{"tools", config.Tools{SandboxPerUser: 1, ToolsCacheTTL: -time.Second},
			`config: TOOLS_CACHE_TTL: must be a non-negative Go duration like 5m, got "-1s"`},
		{"runs", config.Runs{GenerationLease: time.Minute}, `config: SWEEP_INTERVAL: must be a Go duration from 100ms to 10m0s, got "0s"`},
		{"blobs", config.Blobs{}, `config: USER_STORAGE_QUOTA: must be a positive integer number of bytes (default 1073741824, 1 GiB), got "0"`},
		{"rule without a name", unnamed, "config: RATE_LIMIT_RUNS: the rule has no name (its counters' key)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.v.Validate(); err == nil || err.Error() != tt.wantErr {
				t.Errorf("Validate = %v\nwant %s", err, tt.wantErr)
			}
		})
	}
}
