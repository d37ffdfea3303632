// Package config loads the service's configuration once, at start-up, from
// an injected getenv function (os.Getenv in mains, a map in tests). Every
// error names the environment variable at fault.
//
// Config is a composition of one struct per concern (Runtime, Logging,
// Tables, DevServer, Auth, OAuth, Blobs, Models, Tools, Runs, Triggers,
// RateLimits, Budgets), embedded so that every field reads cfg.Field.
// Each field declares its variable in struct tags:
//
//	env:"NAME"              the variable (github.com/caarlos0/env)
//	envDefault:"v"          its default (only in Lambda when envLocalDefault is given too)
//	envLocalDefault:"v"     its default outside Lambda (AWS_LAMBDA_FUNCTION_NAME unset)
//	envTrimRight:"/"        characters dropped from the end of the value (of each element of a list)
//	rule:"name"             a ratelimit.Rule's Name, its counters' key
//
// Load reads every tagged variable from getenv (spaces trimmed; empty is
// unset), lets env.ParseWithOptions fill the structs with this package's
// parsers, one per type (booleans, integers, Go durations, comma-separated
// lists, log formats, rate-limit rules, model prices; a slog.Level parses
// itself, and "warning" is taken for warn), and then calls each concern's
// Validate, which holds the checks of ranges and formats. It fails with
// one error that names every bad variable: a value that does not parse
// gets its parser's message, one out of range Validate's.
//
// A new variable is a field with its tags in the struct of its concern,
// and its checks in that struct's Validate; docs/configuration.md's
// table lists it (a test keeps the two in step).
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/usage"
)

// Config is the whole service's configuration. Each function reads the
// fields it needs and calls Require for the ones it cannot run without.
type Config struct {
	Runtime
	Logging
	Tables
	DevServer
	Auth
	OAuth
	Blobs
	Models
	Tools
	Runs
	Triggers
	RateLimits
	Budgets
	MCPServers
	Knowledge

	raw map[string]string
}

// Load reads the configuration from getenv. It fails on any malformed value,
// naming the variable.
func Load(getenv func(string) string) (Config, error) {
	raw, vals := environ(getenv)
	c := Config{raw: raw}
	if errs := load(&c, vals); len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// Validate checks every concern; the error names each bad variable.
func (c Config) Validate() error {
	return errors.Join(
		c.Runtime.Validate(),
		c.Logging.Validate(),
		c.Tables.Validate(),
		c.DevServer.Validate(),
		c.Auth.Validate(),
		c.OAuth.Validate(),
		c.Blobs.Validate(),
		c.Models.Validate(),
		c.Tools.Validate(),
		c.Runs.Validate(),
		c.Triggers.Validate(),
		c.RateLimits.Validate(),
		c.Budgets.Validate(),
		c.MCPServers.Validate(),
		c.Knowledge.Validate(),
	)
}

// Require fails, naming every missing variable, unless each of the named
// variables resolved to a value (set, or defaulted locally).
func (c Config) Require(names ...string) error {
	var missing []string
	for _, n := range names {
		if c.value(n) == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("config: required but not set: %s", strings.Join(missing, ", "))
	}
	return nil
}

func (c Config) value(name string) string {
	switch name {
	case "USERS_TABLE":
		return c.UsersTable
	case "SESSIONS_TABLE":
		return c.SessionsTable
	case "DATA_TABLE":
		return c.DataTable
	case "RATE_LIMITS_TABLE":
		return c.RateLimitsTable
	case "OAUTH_TABLE":
		return c.OAuthTable
	case "MCP_SERVICE_KEY":
		return c.MCPServiceKey
	case "MCP_URL":
		return c.MCPURL
	case "RUNNER_FUNCTION":
		return c.RunnerFunction
	case "BLOB_BUCKET":
		return c.BlobBucket
	}
	return c.raw[name]
}

// DefaultSandboxPerUser is SANDBOX_PER_USER's default.
const DefaultSandboxPerUser = 2

// DefaultUserStorageQuota is USER_STORAGE_QUOTA's default: 1 GiB.
const DefaultUserStorageQuota = 1 << 30

// The default per-user rate limits.
const (
	DefaultRateLimitMessages = "30/m"
	DefaultRateLimitStreams  = "30/m"
	DefaultRateLimitRuns     = "20/m"
	DefaultRateLimitResumes  = "120/m"
	DefaultRateLimitMCP      = "120/m"

	DefaultRateLimitAttachments = "20/m,200/h"
	// DefaultRateLimitSearch is RATE_LIMIT_SEARCH's default.
	DefaultRateLimitSearch = "60/m,600/h"
	// DefaultRateLimitKnowledgeDocuments is RATE_LIMIT_KNOWLEDGE_DOCUMENTS's
	// default.
	DefaultRateLimitKnowledgeDocuments = "30/m,300/h"

	DefaultRateLimitSignInEmail   = "5/m,30/h"
	DefaultRateLimitSignInAddress = "30/m,300/h"
	DefaultRateLimitSignUpAddress = "10/m,100/h"
	DefaultRateLimitOAuthToken    = "60/m,600/h"
	DefaultRateLimitOAuthRegister = "10/m,50/h"
	DefaultRateLimitOAuthDocument = "10/m,100/h"
)

// Runtime is what Lambda tells the function about itself.
type Runtime struct {
	// InLambda is true when running in AWS Lambda (AWS_LAMBDA_FUNCTION_NAME set).
	InLambda bool `env:"-"`
	// FunctionName (AWS_LAMBDA_FUNCTION_NAME, set by Lambda) is the
	// running function's name: the runner hands the runs it starts (a
	// trigger's buffered fire) to itself.
	FunctionName string `env:"AWS_LAMBDA_FUNCTION_NAME"`
	// Region (AWS_REGION, set by Lambda; default us-east-1).
	Region string `env:"AWS_REGION" envDefault:"us-east-1"`
	// FunctionMemoryMB (AWS_LAMBDA_FUNCTION_MEMORY_SIZE, set by Lambda: the
	// function's memory in MB, at least 128; 0 outside Lambda) sizes the
	// tool server's sandbox (functions/assembly/mcpfn.SandboxSize).
	FunctionMemoryMB int `env:"AWS_LAMBDA_FUNCTION_MEMORY_SIZE"`
}

// functionNameVar tells Lambda from a local process.
const functionNameVar = "AWS_LAMBDA_FUNCTION_NAME"

// Validate fails on a memory size Lambda cannot have.
func (r Runtime) Validate() error {
	var p problems
	if r.FunctionMemoryMB != 0 && r.FunctionMemoryMB < 128 {
		p.add("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "must be the function's memory in MB, at least 128, got %q", strconv.Itoa(r.FunctionMemoryMB))
	}
	return p.err()
}

// Logging is the log's level and encoding (shared/logging).
type Logging struct {
	LogLevel  slog.Level     `env:"LOG_LEVEL" envDefault:"info"`                         // LOG_LEVEL: debug, info, warn, error; default info
	LogFormat logging.Format `env:"LOG_FORMAT" envDefault:"json" envLocalDefault:"text"` // LOG_FORMAT: json or text; default json in Lambda, text locally
}

const (
	logLevelVar     = "LOG_LEVEL"
	logLevelMustBe  = "must be debug, info, warn or error, got %q"
	logFormatMustBe = "must be json or text, got %q"
)

// Validate fails on a level other than the four named ones (slog would
// take "info+2") and on an unknown format.
func (l Logging) Validate() error {
	var p problems
	switch l.LogLevel {
	case slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError:
	default:
		p.add(logLevelVar, logLevelMustBe, strings.ToLower(l.LogLevel.String()))
	}
	if l.LogFormat != logging.JSON && l.LogFormat != logging.Text {
		p.add("LOG_FORMAT", logFormatMustBe, l.LogFormat)
	}
	return p.err()
}

// Tables are the DynamoDB tables (shared/store) and where they are. In
// Lambda the stack sets the tables' names; locally they have defaults.
type Tables struct {
	DynamoDBEndpoint string `env:"DYNAMODB_ENDPOINT"`                               // DYNAMODB_ENDPOINT; empty: AWS in Lambda, the embedded engine locally
	UsersTable       string `env:"USERS_TABLE" envLocalDefault:"users"`             // USERS_TABLE; default "users" locally
	SessionsTable    string `env:"SESSIONS_TABLE" envLocalDefault:"sessions"`       // SESSIONS_TABLE; default "sessions" locally
	DataTable        string `env:"DATA_TABLE" envLocalDefault:"data"`               // DATA_TABLE; default "data" locally
	RateLimitsTable  string `env:"RATE_LIMITS_TABLE" envLocalDefault:"rate_limits"` // RATE_LIMITS_TABLE; default "rate_limits" locally
	OAuthTable       string `env:"OAUTH_TABLE" envLocalDefault:"oauth"`             // OAUTH_TABLE; default "oauth" locally
}

// Validate fails on an endpoint that is not an http(s) URL.
func (t Tables) Validate() error {
	var p problems
	p.httpURL("DYNAMODB_ENDPOINT", t.DynamoDBEndpoint)
	return p.err()
}

// DevServer is the dev server's own (infra/devserver, infra/local).
type DevServer struct {
	// DataFile (DATA_FILE) is where the local embedded engine keeps its
	// data across restarts and crashes: a snapshot, plus a journal
	// (DataFile + ".journal") of every write since, synced before the
	// write is answered, both checksummed (damage stops the start); empty:
	// in memory only. Ignored with DYNAMODB_ENDPOINT.
	DataFile string `env:"DATA_FILE"`
	// DevClockFile (DEV_CLOCK_FILE), dev server only: a file holding a Go
	// duration (e.g. "2m") by which the dev server's clock runs ahead of
	// the wall clock, read again whenever it changes, so that end-to-end
	// tests can bring schedules and deadlines due without waiting. Empty:
	// the wall clock.
	DevClockFile string `env:"DEV_CLOCK_FILE"`
	// LocalIAMTemplate (LOCAL_IAM_TEMPLATE), dev server only: a SAM
	// template (template.yaml) whose functions' IAM policies the embedded
	// engine enforces on each function's DynamoDB calls, answering a call
	// its role may not make with AccessDeniedException as AWS does. Empty:
	// not enforced. Ignored with DYNAMODB_ENDPOINT.
	LocalIAMTemplate string `env:"LOCAL_IAM_TEMPLATE"`
	// SnapshotInterval (SNAPSHOT_INTERVAL, a Go duration; default 30s) is
	// how often the embedded engine folds its journal into the DataFile
	// snapshot, besides at shutdown and when the journal passes 64 MiB; 0:
	// only then.
	SnapshotInterval time.Duration `env:"SNAPSHOT_INTERVAL" envDefault:"30s"`

	Port    int `env:"PORT" envDefault:"3000"`     // PORT; default 3000 (dev server)
	MCPPort int `env:"MCP_PORT" envDefault:"3001"` // MCP_PORT; default 3001 (dev server)
}

// Validate fails on a negative interval and on ports out of range.
func (d DevServer) Validate() error {
	var p problems
	if d.SnapshotInterval < 0 {
		p.add("SNAPSHOT_INTERVAL", "must be a non-negative Go duration like 30s (0 snapshots only at shutdown), got %q", d.SnapshotInterval)
	}
	for _, v := range []struct {
		name string
		port int
	}{{"PORT", d.Port}, {"MCP_PORT", d.MCPPort}} {
		if v.port < 0 || v.port > 65535 {
			p.add(v.name, "must be a port number 0-65535, got %q", strconv.Itoa(v.port))
		}
	}
	return p.err()
}

// Auth is what browsers signed in with the session cookie may do
// (shared/httpapi: CORS and cross-site writes).
type Auth struct {
	AllowedOrigins []string `env:"ALLOWED_ORIGINS" envTrimRight:"/"` // ALLOWED_ORIGINS, comma separated; "*" is refused (credentials are allowed)
}

// Validate fails on anything but origins (scheme and host, no path).
func (a Auth) Validate() error {
	var p problems
	for _, o := range a.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
			p.add("ALLOWED_ORIGINS", "%q is not an origin like https://app.example.com", o)
		}
	}
	return p.err()
}

// OAuth is the OAuth 2.1 authorization server's (shared/oauth) and the
// MCP gateway's.
type OAuth struct {
	// PublicBaseURL (PUBLIC_BASE_URL, an http(s) origin without a path)
	// is the service's public origin: the issuer of its OAuth tokens and
	// the base of the MCP endpoint's resource URL. Empty: from each
	// request (X-Viewer-Host, set by the CloudFront distribution, else
	// Host).
	PublicBaseURL string `env:"PUBLIC_BASE_URL" envTrimRight:"/"`
	// OAuthSigningSecret (OAUTH_SIGNING_SECRET) names the AWS Secrets
	// Manager secret holding the access tokens' signing keys (in
	// Lambda). Locally the keys are in OAuthKeyFile.
	OAuthSigningSecret string `env:"OAUTH_SIGNING_SECRET"`
	// OAuthKeyFile (OAUTH_KEY_FILE) is where the dev server keeps its
	// signing keys, created when missing; default oauth-keys.json beside
	// DATA_FILE, and in memory (new at each start) when DATA_FILE is
	// empty.
	OAuthKeyFile string `env:"OAUTH_KEY_FILE"`
	// OAuthAllowHTTPClients (OAUTH_ALLOW_HTTP_CLIENTS, a boolean; default
	// false) accepts http:// client id URLs and fetches client metadata
	// documents from private addresses. Local tests only.
	OAuthAllowHTTPClients bool `env:"OAUTH_ALLOW_HTTP_CLIENTS"`
	// SecretsManagerEndpoint (AWS_ENDPOINT_URL_SECRETS_MANAGER), the AWS
	// SDKs' own name for it, overrides the endpoint of the signing keys'
	// secret (tests).
	SecretsManagerEndpoint string `env:"AWS_ENDPOINT_URL_SECRETS_MANAGER" envTrimRight:"/"`
}

// Validate fails on a base URL that is not an origin and on an endpoint
// that is not an http(s) URL.
func (o OAuth) Validate() error {
	var p problems
	if o.PublicBaseURL != "" {
		if u, err := url.Parse(o.PublicBaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
			p.add("PUBLIC_BASE_URL", "must be an http(s) origin like https://api.example.com, got %q", o.PublicBaseURL)
		}
	}
	p.httpURL("AWS_ENDPOINT_URL_SECRETS_MANAGER", o.SecretsManagerEndpoint)
	return p.err()
}

// Blobs are the blob store's (shared/blob) and the attachments'.
type Blobs struct {
	// BlobBucket (BLOB_BUCKET) is the S3 bucket of the blob store (values
	// too large for an item, attachments) in AWS. Unset locally: the dev
	// server keeps blobs in the folder DATA_FILE + ".blobs", or in memory
	// without DATA_FILE.
	BlobBucket string `env:"BLOB_BUCKET"`
	// BlobEndpoint (BLOB_ENDPOINT) overrides the S3 endpoint of
	// BLOB_BUCKET with an S3-compatible server reached path-style with
	// static dummy credentials: tests (a fake S3) only.
	BlobEndpoint string `env:"BLOB_ENDPOINT" envTrimRight:"/"`
	// UserStorageQuota (USER_STORAGE_QUOTA, a positive integer of bytes;
	// default 1 GiB, DefaultUserStorageQuota) bounds the bytes of each
	// user's attachments.
	UserStorageQuota int64 `env:"USER_STORAGE_QUOTA" envDefault:"1073741824"`
}

// Validate fails on a bucket name S3 refuses, an endpoint that is not an
// http(s) URL and a quota that is not positive.
func (b Blobs) Validate() error {
	var p problems
	if b.BlobBucket != "" && !bucketName.MatchString(b.BlobBucket) {
		p.add("BLOB_BUCKET", "must be an S3 bucket name (3-63 lower-case letters, digits, dots and hyphens), got %q", b.BlobBucket)
	}
	p.httpURL("BLOB_ENDPOINT", b.BlobEndpoint)
	if b.UserStorageQuota <= 0 {
		p.add("USER_STORAGE_QUOTA", "must be a positive integer number of bytes (default %d, 1 GiB), got %q", DefaultUserStorageQuota, strconv.FormatInt(b.UserStorageQuota, 10))
	}
	return p.err()
}

// Models are the model providers (shared/model/providers): each is
// enabled by its configuration.
type Models struct {
	DefaultModelID    string        `env:"DEFAULT_MODEL_ID" envDefault:"builtin"` // DEFAULT_MODEL_ID; default "builtin"
	BuiltinChunkDelay time.Duration `env:"BUILTIN_CHUNK_DELAY"`                   // BUILTIN_CHUNK_DELAY: pause between the built-in model's chunks; default 0

	OpenAIAPIKey     string   `env:"OPENAI_API_KEY"`                      // OPENAI_API_KEY
	OpenAIBaseURL    string   `env:"OPENAI_BASE_URL" envTrimRight:"/"`    // OPENAI_BASE_URL: an OpenAI-compatible server (Ollama, vLLM); default the OpenAI API
	OpenAIModels     []string `env:"OPENAI_MODELS"`                       // OPENAI_MODELS, comma separated model names
	AnthropicAPIKey  string   `env:"ANTHROPIC_API_KEY"`                   // ANTHROPIC_API_KEY
	AnthropicBaseURL string   `env:"ANTHROPIC_BASE_URL" envTrimRight:"/"` // ANTHROPIC_BASE_URL; default the Anthropic API
	AnthropicModels  []string `env:"ANTHROPIC_MODELS"`                    // ANTHROPIC_MODELS, comma separated model names
	BedrockModels    []string `env:"BEDROCK_MODELS"`                      // BEDROCK_MODELS, comma separated Bedrock model or inference profile ids
	BedrockEndpoint  string   `env:"BEDROCK_ENDPOINT" envTrimRight:"/"`   // BEDROCK_ENDPOINT: override of the Bedrock runtime endpoint (tests)
}

// Validate fails on a chunk delay out of range, on URLs that are not
// http(s) and on models without the key their provider needs.
func (m Models) Validate() error {
	var p problems
	if m.BuiltinChunkDelay < 0 || m.BuiltinChunkDelay > 10*time.Second {
		p.add("BUILTIN_CHUNK_DELAY", "must be a Go duration from 0 to 10s, got %q", m.BuiltinChunkDelay)
	}
	p.httpURL("OPENAI_BASE_URL", m.OpenAIBaseURL)
	p.httpURL("ANTHROPIC_BASE_URL", m.AnthropicBaseURL)
	p.httpURL("BEDROCK_ENDPOINT", m.BedrockEndpoint)
	if len(m.OpenAIModels) > 0 && m.OpenAIAPIKey == "" && m.OpenAIBaseURL == "" {
		p.add("OPENAI_API_KEY", "is required for OPENAI_MODELS unless OPENAI_BASE_URL names an OpenAI-compatible server")
	}
	if len(m.AnthropicModels) > 0 && m.AnthropicAPIKey == "" {
		p.add("ANTHROPIC_API_KEY", "is required for ANTHROPIC_MODELS")
	}
	return p.err()
}

// Tools are the tool server's (functions/mcp, shared/toolserver) and
// its clients'.
type Tools struct {
	MCPServiceKey string        `env:"MCP_SERVICE_KEY"`                 // MCP_SERVICE_KEY; a development key is generated locally when unset
	MCPURL        string        `env:"MCP_URL" envTrimRight:"/"`        // MCP_URL: the tool server's base URL
	ToolsCacheTTL time.Duration `env:"TOOLS_CACHE_TTL" envDefault:"5m"` // TOOLS_CACHE_TTL (Go duration); default 5m

	// ToolsAllowPrivateNetworks (TOOLS_ALLOW_PRIVATE_NETWORKS, a boolean:
	// true/false, 1/0; default false) lets http_request, the users' remote
	// MCP servers (their registration, listing and calls) and the
	// service's OAuth client of those servers reach loopback, private and
	// link-local addresses, and remote servers use plain http. Local
	// development and tests only: with it any user can make the service
	// send requests into its own network.
	ToolsAllowPrivateNetworks bool `env:"TOOLS_ALLOW_PRIVATE_NETWORKS"`
	// SandboxPerUser (SANDBOX_PER_USER, an integer from 1 to 64; default
	// 2, DefaultSandboxPerUser) is how many isolated tool runs (jq,
	// expressions, templates, regular expressions, CSV, HTML) one user
	// may have at once in the tool server's sandbox; all anonymous
	// callers (clients with only the service key) share one such
	// allowance. The sandbox keeps more workers than that, so one user
	// never holds them all.
	SandboxPerUser int `env:"SANDBOX_PER_USER" envDefault:"2"`

	// ToolsTestHooks (TOOLS_TEST_HOOKS, a boolean; default false) adds the
	// tools of tests of durable runs (tools.TestTools: a counting, slow,
	// failing step) to the tool server. End-to-end tests only; the
	// template never sets it.
	ToolsTestHooks bool `env:"TOOLS_TEST_HOOKS"`
}

// Validate fails on a short service key, a URL that is not http(s), a
// negative cache lifetime and a sandbox allowance out of range.
func (t Tools) Validate() error {
	var p problems
	if t.MCPServiceKey != "" && len(t.MCPServiceKey) < 16 {
		p.add("MCP_SERVICE_KEY", "must be at least 16 characters")
	}
	p.httpURL("MCP_URL", t.MCPURL)
	if t.ToolsCacheTTL < 0 {
		p.add("TOOLS_CACHE_TTL", "must be a non-negative Go duration like 5m, got %q", t.ToolsCacheTTL)
	}
	if t.SandboxPerUser < 1 || t.SandboxPerUser > 64 {
		p.add("SANDBOX_PER_USER", "must be an integer from 1 to 64 (isolated tool runs one user may have at once), got %q", strconv.Itoa(t.SandboxPerUser))
	}
	return p.err()
}

// Runs are the durable workflow runs' (the runner) and the streamed
// replies' leases, which the sweeper ends or resumes.
type Runs struct {
	// RunnerFunction (RUNNER_FUNCTION) is the name or ARN of the Lambda
	// function that executes durable workflow runs, invoked
	// asynchronously; the dev server runs the runner in process instead.
	RunnerFunction string `env:"RUNNER_FUNCTION"`
	// LambdaEndpoint (AWS_ENDPOINT_URL_LAMBDA), the AWS SDKs' own name
	// for it, overrides the endpoint of the runner's invocations (tests).
	LambdaEndpoint string `env:"AWS_ENDPOINT_URL_LAMBDA" envTrimRight:"/"`

	// GenerationLease (GENERATION_LEASE, a Go duration from 1s to 10m;
	// default 30s) is how far ahead each log write of a streamed reply
	// renews its lease; SweepInterval (SWEEP_INTERVAL, a Go duration from
	// 100ms to 10m; default 1m) is how often the dev server's sweeper
	// looks for expired leases. Shorter values let tests see the sweeper
	// at work.
	GenerationLease time.Duration `env:"GENERATION_LEASE" envDefault:"30s"`
	SweepInterval   time.Duration `env:"SWEEP_INTERVAL" envDefault:"1m"`
}

// Validate fails on an endpoint that is not an http(s) URL and on
// durations out of range.
func (r Runs) Validate() error {
	var p problems
	p.httpURL("AWS_ENDPOINT_URL_LAMBDA", r.LambdaEndpoint)
	p.durationIn("GENERATION_LEASE", r.GenerationLease, time.Second, 10*time.Minute)
	p.durationIn("SWEEP_INTERVAL", r.SweepInterval, 100*time.Millisecond, 10*time.Minute)
	return p.err()
}

// Triggers are the webhook and schedule triggers' (shared/trigger).
type Triggers struct {
	// WebhookSigningKey (WEBHOOK_SIGNING_KEY, at least 32 characters, e.g.
	// `openssl rand -hex 32`) is the server key the webhook triggers'
	// secrets are derived from; the database never holds it. Locally, when
	// unset, it is derived from MCP_SERVICE_KEY.
	WebhookSigningKey string `env:"WEBHOOK_SIGNING_KEY"`
	// Schedules of schedule triggers in EventBridge Scheduler: the group
	// (SCHEDULE_GROUP), the target TriggerFireFunction
	// (SCHEDULE_TARGET_ARN), the role Scheduler invokes it with
	// (SCHEDULE_ROLE_ARN) and the dead-letter queue (SCHEDULE_DLQ_ARN);
	// SCHEDULER_ENDPOINT overrides the Scheduler endpoint (tests). Without
	// SCHEDULE_GROUP the schedules are kept in the Data table's due index,
	// which the dev server polls every SCHEDULE_POLL_INTERVAL (a Go
	// duration from 100ms to 10s; default 10s).
	ScheduleGroup        string        `env:"SCHEDULE_GROUP"`
	ScheduleTargetARN    string        `env:"SCHEDULE_TARGET_ARN"`
	ScheduleRoleARN      string        `env:"SCHEDULE_ROLE_ARN"`
	ScheduleDLQARN       string        `env:"SCHEDULE_DLQ_ARN"`
	SchedulerEndpoint    string        `env:"SCHEDULER_ENDPOINT" envTrimRight:"/"`
	SchedulePollInterval time.Duration `env:"SCHEDULE_POLL_INTERVAL" envDefault:"10s"`
}

// Validate fails on a short signing key, ARNs of the wrong service, an
// endpoint that is not an http(s) URL and a poll interval out of range.
func (t Triggers) Validate() error {
	var p problems
	if t.WebhookSigningKey != "" && len(t.WebhookSigningKey) < 32 {
		p.add("WEBHOOK_SIGNING_KEY", "must be at least 32 characters (e.g. openssl rand -hex 32)")
	}
	for _, v := range []struct{ name, value, service string }{
		{"SCHEDULE_TARGET_ARN", t.ScheduleTargetARN, ":lambda:"}, {"SCHEDULE_ROLE_ARN", t.ScheduleRoleARN, ":iam:"}, {"SCHEDULE_DLQ_ARN", t.ScheduleDLQARN, ":sqs:"},
	} {
		if v.value != "" && (!strings.HasPrefix(v.value, "arn:") || !strings.Contains(v.value, v.service)) {
			p.add(v.name, "must be an ARN (arn:aws%s...), got %q", v.service, v.value)
		}
	}
	p.httpURL("SCHEDULER_ENDPOINT", t.SchedulerEndpoint)
	p.durationIn("SCHEDULE_POLL_INTERVAL", t.SchedulePollInterval, 100*time.Millisecond, 10*time.Second)
	return p.err()
}

// RateLimits are the rate limits (shared/ratelimit), counted in
// RATE_LIMITS_TABLE: each is "0" (off) or comma-separated windows "N/s",
// "N/m" or "N/h", e.g. "30/m" or "30/m,500/h". Each field's rule tag is
// the rule's Name, its counters' key: rules of the same name share one
// count.
type RateLimits struct {
	// Per-user rate limits.
	RateLimitMessages ratelimit.Rule `env:"RATE_LIMIT_MESSAGES" envDefault:"30/m" rule:"messages"` // RATE_LIMIT_MESSAGES; default 30/m: messages answered by a model (chat and workflow chat)
	RateLimitStreams  ratelimit.Rule `env:"RATE_LIMIT_STREAMS" envDefault:"30/m" rule:"streams"`   // RATE_LIMIT_STREAMS; default 30/m: streamed chat replies
	RateLimitRuns     ratelimit.Rule `env:"RATE_LIMIT_RUNS" envDefault:"20/m" rule:"runs"`         // RATE_LIMIT_RUNS; default 20/m: workflow runs
	RateLimitResumes  ratelimit.Rule `env:"RATE_LIMIT_RESUMES" envDefault:"120/m" rule:"resumes"`  // RATE_LIMIT_RESUMES; default 120/m: resumed streams (EventSource reconnects)
	RateLimitMCP      ratelimit.Rule `env:"RATE_LIMIT_MCP" envDefault:"120/m" rule:"mcp requests"` // RATE_LIMIT_MCP; default 120/m: POST /api/mcp requests (an MCP client's initialize, lists and calls)
	// RATE_LIMIT_ATTACHMENTS; default 20/m,200/h: attachments created (each
	// one an upload URL).
	RateLimitAttachments ratelimit.Rule `env:"RATE_LIMIT_ATTACHMENTS" envDefault:"20/m,200/h" rule:"attachments"`
	// RATE_LIMIT_SEARCH; default 60/m,600/h: searches of a user's chats
	// (each reads the user's index, and may first index new messages).
	RateLimitSearch ratelimit.Rule `env:"RATE_LIMIT_SEARCH" envDefault:"60/m,600/h" rule:"searches"`
	// RATE_LIMIT_KNOWLEDGE_DOCUMENTS; default 30/m,300/h: documents added
	// to knowledge bases (each one an indexing: extraction, chunking,
	// embedding).
	RateLimitKnowledgeDocuments ratelimit.Rule `env:"RATE_LIMIT_KNOWLEDGE_DOCUMENTS" envDefault:"30/m,300/h" rule:"knowledge documents"`
	// RATE_LIMIT_EXPORTS; default 3/h: data exports requested (each one
	// a zip of the whole account written by the sweeper).
	RateLimitExports ratelimit.Rule `env:"RATE_LIMIT_EXPORTS" envDefault:"3/h" rule:"exports"`

	// Credential limits, counted before any password is hashed.
	RateLimitSignInEmail   ratelimit.Rule `env:"RATE_LIMIT_SIGN_IN_EMAIL" envDefault:"5/m,30/h" rule:"sign-ins"`     // RATE_LIMIT_SIGN_IN_EMAIL; default 5/m,30/h: sign-ins per email
	RateLimitSignInAddress ratelimit.Rule `env:"RATE_LIMIT_SIGN_IN_ADDRESS" envDefault:"30/m,300/h" rule:"sign-ins"` // RATE_LIMIT_SIGN_IN_ADDRESS; default 30/m,300/h: sign-ins per client address
	RateLimitSignUpAddress ratelimit.Rule `env:"RATE_LIMIT_SIGN_UP_ADDRESS" envDefault:"10/m,100/h" rule:"sign-ups"` // RATE_LIMIT_SIGN_UP_ADDRESS; default 10/m,100/h: sign-ups per client address
	// The OAuth endpoints' limits, per client address.
	RateLimitOAuthToken    ratelimit.Rule `env:"RATE_LIMIT_OAUTH_TOKEN" envDefault:"60/m,600/h" rule:"token requests"`         // RATE_LIMIT_OAUTH_TOKEN; default 60/m,600/h: token and revocation requests
	RateLimitOAuthRegister ratelimit.Rule `env:"RATE_LIMIT_OAUTH_REGISTER" envDefault:"10/m,50/h" rule:"client registrations"` // RATE_LIMIT_OAUTH_REGISTER; default 10/m,50/h: client registrations
	// RATE_LIMIT_OAUTH_DOCUMENT; default 10/m,100/h: fetches of Client ID
	// Metadata Documents (client ids not in the cache) caused by one client
	// address, so that no one makes the service fetch URLs in bulk.
	RateLimitOAuthDocument ratelimit.Rule `env:"RATE_LIMIT_OAUTH_DOCUMENT" envDefault:"10/m,100/h" rule:"client metadata document fetches"`
}

// Validate fails on a rule without a Name (its counters' key): a rule
// built in code; ratelimit.Parse has checked the windows of Load's.
func (r RateLimits) Validate() error {
	var p problems
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		if v.Field(i).Interface().(ratelimit.Rule).Name == "" {
			p.add(v.Type().Field(i).Tag.Get("env"), "the rule has no name (its counters' key)")
		}
	}
	return p.err()
}

// Budgets are what users may spend on models and what it costs
// (shared/usage).
type Budgets struct {
	// UserMonthlyTokenBudget (USER_MONTHLY_TOKEN_BUDGET, a non-negative
	// integer; 0 or unset: no budget) is the tokens, input plus output,
	// each user may spend per UTC month across all models.
	UserMonthlyTokenBudget int64 `env:"USER_MONTHLY_TOKEN_BUDGET"`
	// ModelPrices (MODEL_PRICES, a JSON object {"<modelId>": {"input":
	// USD, "output": USD}} per million tokens; unset: every model costs 0)
	// prices the usage report.
	ModelPrices map[string]usage.Price `env:"MODEL_PRICES"`
}

// Validate fails on a negative budget and on negative prices.
func (b Budgets) Validate() error {
	var p problems
	if b.UserMonthlyTokenBudget < 0 {
		p.add("USER_MONTHLY_TOKEN_BUDGET", "must be a non-negative integer number of tokens (0: no budget), got %q", strconv.FormatInt(b.UserMonthlyTokenBudget, 10))
	}
	for _, id := range slices.Sorted(maps.Keys(b.ModelPrices)) {
		if pr := b.ModelPrices[id]; pr.Input < 0 || pr.Output < 0 {
			p.add("MODEL_PRICES", "the prices of %q must not be negative", id)
		}
	}
	return p.err()
}

// bucketName matches an S3 bucket name (general purpose buckets).
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// MCPServers are the users' own remote MCP servers: the vault of their
// secrets (shared/vault) and the rate of the connections they start.
type MCPServers struct {
	// VaultKMSKey (VAULT_KMS_KEY, a KMS key id, ARN or alias) is the KMS
	// key that wraps the data keys of the secrets in AWS. Unset locally:
	// the dev server wraps them with the key file DATA_FILE + ".vault-key"
	// (mode 0600), or a key of the process without DATA_FILE.
	VaultKMSKey string `env:"VAULT_KMS_KEY"`
	// KMSEndpoint (KMS_ENDPOINT) overrides the KMS endpoint: tests only.
	KMSEndpoint string `env:"KMS_ENDPOINT" envTrimRight:"/"`
	// RATE_LIMIT_MCP_SERVERS; default 10/m,100/h: the writes of
	// /api/mcp-servers that may connect to a remote server (create,
	// PATCH, refresh), per user.
	RateLimitMCPServers ratelimit.Rule `env:"RATE_LIMIT_MCP_SERVERS" envDefault:"10/m,100/h" rule:"mcp server connections"`
}

// Validate fails on a KMS key that names no key and an endpoint that is
// not an http(s) URL.
func (v MCPServers) Validate() error {
	var p problems
	if v.VaultKMSKey != "" && (strings.ContainsAny(v.VaultKMSKey, " \t\n") || len(v.VaultKMSKey) > 2048) {
		p.add("VAULT_KMS_KEY", "must be a KMS key id, ARN or alias, got %q", v.VaultKMSKey)
	}
	p.httpURL("KMS_ENDPOINT", v.KMSEndpoint)
	return p.err()
}
