package config_test

import (
	"testing"

	"github.com/workflowchat/service/shared/config"
)

// lambdaEnv is what a deployed function's Load reads: Lambda's own
// variables and the stack's.
var lambdaEnv = map[string]string{
	"AWS_LAMBDA_FUNCTION_NAME": "stack-ChatsFunction-1A2B3C", "AWS_REGION": "eu-west-1", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
	"USERS_TABLE": "stack-UsersTable-1", "SESSIONS_TABLE": "stack-SessionsTable-1", "DATA_TABLE": "stack-DataTable-1",
	"RATE_LIMITS_TABLE": "stack-RateLimitsTable-1", "BLOB_BUCKET": "stack-blobbucket-1a2b3c",
	"MCP_URL": "https://abc.lambda-url.eu-west-1.on.aws/", "MCP_SERVICE_KEY": "0123456789abcdef0123", "RUNNER_FUNCTION": "stack-RunnerFunction-1",
	"ALLOWED_ORIGINS": "https://app.example.com", "RATE_LIMIT_MESSAGES": "30/m,300/h", "MODEL_PRICES": `{"gpt-4o": {"input": 2.5, "output": 10}}`,
}

// BenchmarkLoad measures Load, which every function's cold start runs
// once (compare builds of this package, not absolute figures).
func BenchmarkLoad(b *testing.B) {
	getenv := env(lambdaEnv)
	for b.Loop() {
		if _, err := config.Load(getenv); err != nil {
			b.Fatal(err)
		}
	}
}
