package config_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/logging"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.InLambda || c.UsersTable != "users" || c.SessionsTable != "sessions" || c.DataTable != "data" ||
		c.Port != 3000 || c.MCPPort != 3001 || c.LogFormat != logging.Text || c.LogLevel != slog.LevelInfo ||
		c.DefaultModelID != "builtin" || c.ToolsCacheTTL != 5*time.Minute || c.Region != "us-east-1" ||
		c.SandboxPerUser != 2 || c.FunctionMemoryMB != 0 ||
		c.BlobBucket != "" || c.UserStorageQuota != 1<<30 || c.RateLimitAttachments.String() != "20/m,200/h" {
		t.Errorf("local defaults = %+v", c)
	}
	c, err = config.Load(env(map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "f"}))
	if err != nil {
		t.Fatal(err)
	}
	if !c.InLambda || c.UsersTable != "" || c.LogFormat != logging.JSON {
		t.Errorf("lambda defaults = %+v", c)
	}
	if err := c.Require("USERS_TABLE", "SESSIONS_TABLE", "BLOB_BUCKET"); err == nil || !strings.Contains(err.Error(), "USERS_TABLE, SESSIONS_TABLE, BLOB_BUCKET") {
		t.Errorf("Require = %v", err)
	}
}

func TestLoadValues(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(map[string]string{
		"ALLOWED_ORIGINS": " https://app.example.com/, http://localhost:5173 ", "LOG_LEVEL": "DEBUG", "LOG_FORMAT": "json",
		"PORT": "0", "TOOLS_CACHE_TTL": "30s", "MCP_SERVICE_KEY": "0123456789abcdef", "OPENAI_MODELS": "llama3, ,qwen",
		"OPENAI_BASE_URL": "http://localhost:11434/v1/", "USER_MONTHLY_TOKEN_BUDGET": "1000",
		"MODEL_PRICES": `{"gpt-4o": {"input": 2.5, "output": 10}}`, "SANDBOX_PER_USER": "3", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "768",
		"BLOB_BUCKET": "stack-blobbucket-1a2b3c", "USER_STORAGE_QUOTA": "1048576",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.AllowedOrigins, " ") != "https://app.example.com http://localhost:5173" || c.LogLevel != slog.LevelDebug ||
		c.Port != 0 || c.ToolsCacheTTL != 30*time.Second || strings.Join(c.OpenAIModels, " ") != "llama3 qwen" ||
		c.OpenAIBaseURL != "http://localhost:11434/v1" || c.UserMonthlyTokenBudget != 1000 ||
		c.ModelPrices["gpt-4o"].Input != 2.5 || c.ModelPrices["gpt-4o"].Output != 10 ||
		c.SandboxPerUser != 3 || c.FunctionMemoryMB != 768 ||
		c.BlobBucket != "stack-blobbucket-1a2b3c" || c.UserStorageQuota != 1<<20 {
		t.Errorf("config = %+v", c)
	}
	if err := c.Require("MCP_SERVICE_KEY", "USERS_TABLE", "BLOB_BUCKET"); err != nil {
		t.Errorf("Require = %v", err)
	}
}

func TestLoadErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, value string }{
		{"DYNAMODB_ENDPOINT", "localhost:8000"},
		{"ALLOWED_ORIGINS", "*"},
		{"ALLOWED_ORIGINS", "https://app.example.com/path"},
		{"LOG_LEVEL", "loud"},
		{"LOG_FORMAT", "xml"},
		{"MCP_SERVICE_KEY", "short"},
		{"MCP_URL", "ftp://x"},
		{"TOOLS_CACHE_TTL", "5 minutes"},
		{"TOOLS_CACHE_TTL", "-1s"},
		{"PORT", "http"},
		{"MCP_PORT", "70000"},
		{"OPENAI_BASE_URL", "not a url"},
		{"USER_MONTHLY_TOKEN_BUDGET", "-1"},
		{"USER_MONTHLY_TOKEN_BUDGET", "lots"},
		{"MODEL_PRICES", "gpt-4o=2.5"},
		{"BLOB_BUCKET", "My_Bucket"},
		{"BLOB_BUCKET", "s3://bucket"},
		{"BLOB_ENDPOINT", "localhost:9000"},
		{"USER_STORAGE_QUOTA", "0"},
		{"USER_STORAGE_QUOTA", "1GiB"},
		{"RATE_LIMIT_ATTACHMENTS", "lots"},
		{"MODEL_PRICES", `{"gpt-4o": {"input": -1}}`},
		{"MODEL_PRICES", `{"gpt-4o": {"in": 1}}`},
		{"SANDBOX_PER_USER", "0"},
		{"SANDBOX_PER_USER", "-2"},
		{"SANDBOX_PER_USER", "two"},
		{"SANDBOX_PER_USER", "1.5"},
		{"SANDBOX_PER_USER", "65"},
		{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "64"},
		{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1GB"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			_, err := config.Load(env(map[string]string{tt.name: tt.value}))
			if err == nil || !strings.Contains(err.Error(), tt.name) {
				t.Errorf("err = %v, want it to name %s", err, tt.name)
			}
		})
	}
	_, err := config.Load(env(map[string]string{"ANTHROPIC_MODELS": "claude"}))
	if err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("anthropic models without key: %v", err)
	}
}

func TestLoadTriggerVariables(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.SchedulePollInterval != 10*time.Second || c.ScheduleGroup != "" || c.WebhookSigningKey != "" {
		t.Errorf("defaults: %+v", c)
	}
	c, err = config.Load(env(map[string]string{
		"WEBHOOK_SIGNING_KEY": strings.Repeat("k", 32), "SCHEDULE_GROUP": "stack-triggers",
		"SCHEDULE_TARGET_ARN": "arn:aws:lambda:us-east-1:123456789012:function:fire", "SCHEDULE_ROLE_ARN": "arn:aws:iam::123456789012:role/r",
		"SCHEDULE_DLQ_ARN": "arn:aws:sqs:us-east-1:123456789012:q", "SCHEDULER_ENDPOINT": "http://127.0.0.1:9/", "SCHEDULE_POLL_INTERVAL": "250ms",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ScheduleGroup != "stack-triggers" || c.SchedulerEndpoint != "http://127.0.0.1:9" || c.SchedulePollInterval != 250*time.Millisecond {
		t.Errorf("values: %+v", c)
	}
	if err := c.Require("WEBHOOK_SIGNING_KEY", "SCHEDULE_GROUP", "SCHEDULE_TARGET_ARN", "SCHEDULE_ROLE_ARN", "SCHEDULE_DLQ_ARN"); err != nil {
		t.Error(err)
	}
	for name, v := range map[string]string{
		"WEBHOOK_SIGNING_KEY": "short", "SCHEDULE_TARGET_ARN": "fire-function", "SCHEDULE_ROLE_ARN": "arn:aws:lambda:x",
		"SCHEDULE_DLQ_ARN": "https://sqs/q", "SCHEDULER_ENDPOINT": "localhost", "SCHEDULE_POLL_INTERVAL": "1m",
	} {
		if _, err := config.Load(env(map[string]string{name: v})); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v", name, v, err)
		}
	}
}
