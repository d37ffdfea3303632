// Package assembly is the one place where the service is put together: one
// builder per Lambda function turns the configuration and the
// process-level dependencies (Deps) into that function's router. Every host
// uses the same builders: each functions/<name>/main.go calls its builder
// through Lambda (AWS), and infra/local mounts all of them side by side in
// one process (the dev server and the end-to-end tests). A route added to a
// builder is therefore served by both, and infra/template checks the routes
// against template.yaml and that each main calls the builder infra/local
// mounts for its function.
//
// The builders live in one small package per function (authfn, chatsfn,
// healthfn, mcpfn, modelsfn, toolsfn, triggersfn, workflowsfn) so that a function links
// only what its own builder imports: importing healthfn does not link
// DynamoDB, importing authfn does not link a model provider. This package
// imports nothing heavier than the DynamoDB client.
//
// Adding an HTTP function is three steps:
//
//  1. a package functions/assembly/<name>fn exporting
//     var <Name> = assembly.Function{LogicalID: "<Name>Function",
//     Required: [...], Build: build}, where build(ctx, cfg, deps) returns
//     the function's router;
//  2. functions/<name>/main.go: newHandler returns
//     assembly.Lambda(ctx, getenv, <name>fn.<Name>), and main is
//     assembly.Main(newHandler, lambdahttp.Start);
//  3. infra/local lists <name>fn.<Name> in its functions, and template.yaml
//     declares <Name>Function with its routes.
//
// A function that serves no HTTP route (e.g. a scheduled sweeper) follows
// the same pattern with its own result type: <name>fn exports Required and
// a builder func <Name>(ctx, cfg config.Config, d assembly.Deps)
// (*<Name>, error); its main loads the configuration with Config(getenv,
// Required...), opens Deps with Open and starts the AWS Lambda handler on
// the result; infra/local builds it with its own Deps (and may run it on a
// ticker), so both hosts still share the one builder.
package assembly

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/audit"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/awsapi"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/search"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/toolgate"
	"github.com/workflowchat/service/shared/toolpolicy"
	"github.com/workflowchat/service/shared/tracing"
	"github.com/workflowchat/service/shared/tracing/otlp"
	"github.com/workflowchat/service/shared/usage"
	"github.com/workflowchat/service/shared/usertools"
	"github.com/workflowchat/service/shared/vault"
	"github.com/workflowchat/service/shared/workflow"
)

// Deps are the process-level dependencies a builder is given. The Lambda
// host builds them from the configuration (Open); infra/local builds them
// once for the whole process, on the embedded engine and its own clock.
type Deps struct {
	// DB is the DynamoDB client.
	DB *dynamo.DB
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger is the process's logger; nil means slog.Default().
	Logger *slog.Logger
	// Hasher replaces the production password hasher when set (tests use
	// cheaper parameters).
	Hasher *auth.Hasher
	// ToolHTTP is the HTTP client of the tool server (MCP_URL) calls; nil
	// means each builder's default (infra/local serves the tool server in
	// process through it).
	ToolHTTP *http.Client
	// PingInterval is the chat stream's keep-alive interval; zero means the
	// production interval.
	PingInterval time.Duration
	// StepTimeout bounds one workflow step; zero means the production
	// limit (tests of a hung tool server shorten it).
	StepTimeout time.Duration
	// Runs hands durable workflow runs to their runner; nil means the
	// runner Lambda function named by RUNNER_FUNCTION (runstart.Invoker).
	// The dev server runs the runner in process through it.
	Runs workflow.Invoker
	// Blobs is the blob store; nil means the S3 bucket BLOB_BUCKET
	// (blobstore.Open). The dev server gives its folder or memory store,
	// whose signed URLs it serves itself.
	Blobs blob.Store
	// SigningKeys loads the OAuth signing key set document; nil means the
	// Secrets Manager secret OAUTH_SIGNING_SECRET (signingkeys.Source).
	// The dev server passes its key file.
	SigningKeys func(ctx context.Context) ([]byte, error)
	// MCPCallWait bounds how long an MCP tools/call waits for its run;
	// zero means mcpgateway.MaxCallWait (tests shorten it).
	MCPCallWait time.Duration
	// VaultKeys wrap the data keys of the users' MCP server secrets; nil
	// means the KMS key VAULT_KMS_KEY (mcpserversfn.Vault). The dev
	// server passes its key file's (or memory's).
	VaultKeys vault.Keys
}

// Function is one Lambda function of template.yaml: its logical id, the
// variables its Lambda bootstrap requires, and its builder.
type Function struct {
	// LogicalID is the function's resource name in template.yaml; its
	// folder under functions/ is the id minus "Function", lower-cased.
	LogicalID string
	// Required are the variables the bootstrap refuses to start without.
	Required []string
	// FunctionURL is true for a function served through its own Lambda
	// function URL (behind CloudFront) instead of the HTTP API: the chat
	// stream, which needs response streaming.
	FunctionURL bool
	// Build builds the function's router. It fails when a dependency
	// named by the configuration cannot be built (e.g. a model provider).
	Build func(ctx context.Context, cfg config.Config, d Deps) (*httpapi.Router, error)
}

// Main is a Lambda bootstrap's main: it builds the handler with build
// (a main's newHandler, which calls its builder) from the environment and
// serves it with start (lambdahttp.Start, or StartStreaming for a
// response-streaming function URL; lambda.Start for the functions that
// take Lambda's own event types, the sweeper and the runner). An init
// failure is printed to stderr and exits 1, so that Lambda reports it at
// once.
func Main[H any](build func(ctx context.Context, getenv func(string) string) (H, error), start func(H)) {
	h, err := build(context.Background(), os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	start(h)
}

// Lambda builds f's handler for its Lambda bootstrap: the configuration
// from getenv (its errors name the missing or invalid variables), Deps
// from it (Open), f's router, the standard middleware.
func Lambda(ctx context.Context, getenv func(string) string, f Function) (http.Handler, error) {
	cfg, d, err := Load(ctx, getenv, f.Required...)
	if err != nil {
		return nil, err
	}
	r, err := f.Build(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	return Stack(cfg, d.Logger, r), nil
}

// Load is the start of every Lambda bootstrap: the configuration from
// getenv with the required variables (Config), then Deps (Open). Its
// errors name the variables at fault, or say why AWS could not be
// configured.
func Load(ctx context.Context, getenv func(string) string, required ...string) (config.Config, Deps, error) {
	cfg, err := Config(getenv, required...)
	if err != nil {
		return config.Config{}, Deps{}, err
	}
	d, err := Open(ctx, cfg)
	if err != nil {
		return config.Config{}, Deps{}, err
	}
	// Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT is set (the collector
	// layer's); off, nothing of the SDK is built at the cold start.
	if _, err := otlp.FromEnv(getenv, "", d.Logger); err != nil {
		return config.Config{}, Deps{}, err
	}
	return cfg, d, nil
}

// Flushing returns h that exports the invocation's spans before it
// returns (tracing.Flush): the Lambda handlers that serve no HTTP (the
// runner, the sweeper, the schedule fires) wrap theirs with it, as the
// HTTP adapters of package lambdahttp do. A failed flush is logged, never
// the invocation's error.
func Flushing[E any](h func(context.Context, E) error) func(context.Context, E) error {
	return func(ctx context.Context, ev E) error {
		err := h(ctx, ev)
		if ferr := tracing.Flush(ctx); ferr != nil {
			logging.FromContext(ctx).WarnContext(ctx, "tracing: flush", "err", ferr.Error())
		}
		return err
	}
}

// Config loads the configuration from getenv and requires the named
// variables. Its errors name the variables at fault.
func Config(getenv func(string) string, required ...string) (config.Config, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return config.Config{}, err
	}
	return cfg, cfg.Require(required...)
}

// Logger returns the Lambda logger: stdout in the configured format (JSON
// in Lambda) and level.
func Logger(cfg config.Config) *slog.Logger {
	return logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
}

// Open builds the Deps of a Lambda function: DynamoDB (AWS, or
// DYNAMODB_ENDPOINT), the wall clock and the Lambda logger. It fails when
// the AWS configuration cannot be loaded.
func Open(ctx context.Context, cfg config.Config) (Deps, error) {
	db, err := store.Open(ctx, store.Options{Region: cfg.Region, Endpoint: cfg.DynamoDBEndpoint})
	if err != nil {
		return Deps{}, err
	}
	return Deps{DB: db, Now: time.Now, Logger: Logger(cfg)}, nil
}

// AWSAPI returns the client of the AWS operations made without the SDK's
// service clients (a Lambda invoke, a secret's read), in cfg's region and
// at its endpoint overrides. The credentials (the AWS SDK's default chain)
// are loaded at the first request, not here: a cold start that makes none
// does not pay for them, and an error then fails that request.
func AWSAPI(cfg config.Config) *awsapi.Client {
	load := sync.OnceValues(func() (aws.Config, error) {
		return awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion(cfg.Region))
	})
	creds := aws.CredentialsProviderFunc(func(ctx context.Context) (aws.Credentials, error) {
		awsCfg, err := load()
		if err != nil {
			return aws.Credentials{}, fmt.Errorf("load AWS configuration: %w", err)
		}
		return awsCfg.Credentials.Retrieve(ctx)
	})
	return &awsapi.Client{Region: cfg.Region, Credentials: creds,
		Endpoints: map[string]string{awsapi.Lambda: cfg.LambdaEndpoint, awsapi.SecretsManager: cfg.SecretsManagerEndpoint}}
}

// Stack wraps routes in the standard middleware (request ids, logging,
// CORS for ALLOWED_ORIGINS, panics, body limits).
func Stack(cfg config.Config, logger *slog.Logger, routes http.Handler) http.Handler {
	return httpapi.Stack(routes, httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins})
}

// Users returns the users and sessions store of the configured tables.
func (d Deps) Users(cfg config.Config) *store.Users {
	return store.NewUsers(d.DB, cfg.UsersTable, cfg.SessionsTable)
}

// Auth returns the auth service over the configured users and sessions.
func (d Deps) Auth(cfg config.Config) *auth.Service {
	svc := auth.NewService(d.Users(cfg), d.Hasher, d.Now).WithAudit(d.Audit(cfg))
	if cfg.DataTable != "" && cfg.OAuthTable != "" {
		svc.WithDeletions(d.Accounts(cfg))
	}
	return svc
}

// Search returns the search over the users' chats, its index in the
// Data table: the search routes and every delete of a chat use it.
func (d Deps) Search(cfg config.Config) *search.Service {
	return search.NewService(store.NewSearchIndex(d.DB, cfg.DataTable), d.Now)
}

// Audit returns the users' audit log in the Data table; nil (records
// nothing) for a function without DATA_TABLE.
func (d Deps) Audit(cfg config.Config) *audit.Log {
	if cfg.DataTable == "" {
		return nil
	}
	return audit.NewLog(store.NewAudit(d.DB, cfg.DataTable), d.Now, d.Logger)
}

// Accounts returns the account deletions' store (the request, the queue
// of erasures, the erasure of a user's own items).
func (d Deps) Accounts(cfg config.Config) *store.Accounts {
	return store.NewAccounts(d.DB, cfg.UsersTable, cfg.SessionsTable, cfg.DataTable, cfg.OAuthTable)
}

// OAuthStore returns the OAuth table's store.
func (d Deps) OAuthStore(cfg config.Config) *store.OAuth {
	return store.NewOAuth(d.DB, cfg.OAuthTable)
}

// Meter returns the usage meter over the Users table, with
// USER_MONTHLY_TOKEN_BUDGET and MODEL_PRICES.
func (d Deps) Meter(cfg config.Config) *usage.Meter {
	return usage.NewMeter(store.NewUsage(d.DB, cfg.UsersTable), cfg.UserMonthlyTokenBudget, cfg.ModelPrices, d.Now)
}

// GateTools is the catalog the gate runs tools from and reads their
// annotations in (toolclient.Catalog, or usertools.Catalog with the
// users' remote tools).
type GateTools interface {
	toolgate.Tools
	toolpolicy.Catalog
}

// UserTools returns the users' whole catalog: builtin and each user's
// remote MCP tools, their servers read from the Data table's stored tool
// lists; caller calls them (mcpserversfn.Service), nil where a function
// lists them and never calls one. keep is how long a user's servers are
// kept in memory (usertools.Options.TTL; negative keeps none, for the
// functions that check workflow edits against what is stored). Without
// DATA_TABLE it is builtin alone.
func (d Deps) UserTools(cfg config.Config, builtin *toolclient.Catalog, caller usertools.Caller, keep time.Duration) *usertools.Catalog {
	o := usertools.Options{Builtin: builtin, Caller: caller, Now: d.Now, TTL: keep}
	if cfg.DataTable != "" {
		o.Servers = usertools.StoreServers{Store: store.NewMCPServers(d.DB, cfg.DataTable)}
	}
	return usertools.New(o)
}

// ToolPolicies returns the users' tool policies over the Users table, with
// the defaults of catalog's annotations.
func (d Deps) ToolPolicies(cfg config.Config, catalog toolpolicy.Catalog) *toolpolicy.Service {
	return toolpolicy.NewService(store.NewToolPolicies(d.DB, cfg.UsersTable), catalog).WithAudit(d.Audit(cfg))
}

// Gate returns the tool gate in front of catalog: the users' tool
// policies and the usage meter over the Users table (ToolPolicies,
// Meter). Chats run their models' tool calls through it, workflow runs
// their steps (Gate.Steps).
func (d Deps) Gate(cfg config.Config, catalog GateTools) *toolgate.Gate {
	return toolgate.New(toolgate.Options{Tools: catalog, Policies: d.ToolPolicies(cfg, catalog), Meter: d.Meter(cfg)})
}

// Limiter returns the per-user rate limiter over RATE_LIMITS_TABLE.
func (d Deps) Limiter(cfg config.Config) *ratelimit.Limiter {
	return ratelimit.New(store.NewRateLimits(d.DB, cfg.RateLimitsTable), d.Now)
}

// ToolClient returns the client of the tool server at MCP_URL with
// MCP_SERVICE_KEY, over d.ToolHTTP or, when that is nil, a client whose
// calls time out after timeout (zero: the tool server client's default).
func (d Deps) ToolClient(cfg config.Config, timeout time.Duration) *toolclient.Client {
	hc := d.ToolHTTP
	if hc == nil && timeout > 0 {
		hc = &http.Client{Timeout: timeout}
	}
	return toolclient.NewClient(cfg.MCPURL, cfg.MCPServiceKey, hc)
}
