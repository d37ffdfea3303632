// Package local composes every Lambda function's handler into one process
// for the local dev server and the end-to-end tests: the REST API on one
// handler (every function's routes, as API Gateway would route them) and
// the tool server on another. With no DYNAMODB_ENDPOINT it starts the
// embedded DynamoDB engine (restoring it from DATA_FILE when set) and
// creates the tables from the same definitions as template.yaml.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"
	"github.com/guregu/dynamo/v2/dynamodbiface"

	"github.com/workflowchat/service/infra/dynamolocal"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/health"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/workflow"
)

// Function is one Lambda function of template.yaml and the routes it serves.
type Function struct {
	// LogicalID is the function's resource name in template.yaml.
	LogicalID string
	// Dir is the function's folder under functions/.
	Dir    string
	Router *httpapi.Router
	// FunctionURL is true for a function served through its own Lambda
	// function URL (behind CloudFront) instead of the HTTP API: the chat
	// stream, which needs response streaming.
	FunctionURL bool
}

// Stack is the whole service in one process.
type Stack struct {
	// Functions are the HTTP API functions, each with its routes.
	Functions []Function
	// API serves every function's routes behind the standard middleware.
	API http.Handler
	// Tools serves the tool server (POST /mcp) behind the standard
	// middleware; ToolRouter is its router.
	Tools      http.Handler
	ToolRouter *httpapi.Router
	// ServiceKey is the tool server's key (generated when not configured).
	ServiceKey string
	// DB is the DynamoDB client every function uses.
	DB *dynamo.DB
	// Engine is the embedded DynamoDB engine, nil with DYNAMODB_ENDPOINT.
	Engine *dynamolocal.Engine
}

// Options are the process-level dependencies of New.
type Options struct {
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Counter, when set, counts DynamoDB calls.
	Counter *store.CallCounter
	// Hasher, when set, replaces the production password hasher (tests use
	// cheaper parameters).
	Hasher *auth.Hasher
	// ToolServerURL is the base URL (without /mcp) at which Stack.Tools is
	// served, e.g. http://127.0.0.1:3001: the REST tool endpoints then call
	// the tool server over real HTTP with the service key, as
	// ToolsFunction does in AWS. Empty (tests that only use Stack.API):
	// they call Stack.Tools in process, through the same client, request
	// and response bytes, minus the network.
	ToolServerURL string
	// PingInterval is the stream's keep-alive interval; zero means
	// chat.PingInterval.
	PingInterval time.Duration
	// Sandbox runs the isolated tools (jq, expressions, templates, regular
	// expressions, CSV, HTML) in worker processes, as McpFunction does: the
	// dev server passes a pool of its own binary (tools.NewSandbox). Nil
	// runs them in process, where nothing bounds their memory: tests that
	// only need the tools' results.
	Sandbox tools.Sandbox
}

// New builds the stack from cfg. Close releases it. It fails when the
// embedded engine cannot start or the tables cannot be created.
func New(ctx context.Context, cfg config.Config, o Options) (*Stack, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Stack{ServiceKey: cfg.MCPServiceKey}
	if s.ServiceKey == "" {
		s.ServiceKey = "dev-" + randomHex(16)
	}
	endpoint := cfg.DynamoDBEndpoint
	if endpoint == "" {
		eng, err := dynamolocal.StartWith(dynamolocal.Options{DataFile: cfg.DataFile, Interval: cfg.SnapshotInterval, Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("local: start embedded DynamoDB: %w", err)
		}
		s.Engine, endpoint = eng, eng.URL
	}
	db, err := store.Open(ctx, store.Options{Region: cfg.Region, Endpoint: endpoint, Counter: o.Counter})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.DB = db
	names := map[string]string{"USERS_TABLE": cfg.UsersTable, "SESSIONS_TABLE": cfg.SessionsTable, "DATA_TABLE": cfg.DataTable,
		"RATE_LIMITS_TABLE": cfg.RateLimitsTable}
	if err := store.CreateTables(ctx, ttlTolerant{db.Client()}, names); err != nil {
		s.Close()
		return nil, err
	}

	users := store.NewUsers(db, cfg.UsersTable, cfg.SessionsTable)
	authn := auth.NewService(users, o.Hasher, o.Now)
	models, err := providers.Registry(ctx, cfg)
	if err != nil {
		s.Close()
		return nil, err
	}
	registry, err := tools.NewRegistry(tools.Builtin(tools.Config{
		Generator:            models,
		DefaultModelID:       cfg.DefaultModelID,
		AllowPrivateNetworks: cfg.ToolsAllowPrivateNetworks,
	})...)
	if err != nil {
		s.Close()
		return nil, err
	}
	if o.Sandbox != nil {
		registry = registry.WithSandbox(o.Sandbox)
	}
	mw := httpapi.Options{Logger: o.Logger, AllowedOrigins: cfg.AllowedOrigins}
	// The tool server (McpFunction) is a function URL, not an HttpApi
	// route, so it is not one of s.Functions.
	s.ToolRouter = toolserver.Routes(registry, s.ServiceKey)
	s.Tools = httpapi.Stack(s.ToolRouter, mw)
	toolClient := toolserver.NewClient(o.ToolServerURL, s.ServiceKey, nil)
	if o.ToolServerURL == "" {
		toolClient = toolserver.NewClient(inProcessURL, s.ServiceKey,
			&http.Client{Transport: handlerTransport{s.Tools}, Timeout: toolserver.DefaultClientTimeout})
	}

	// One tool catalog for the REST tool endpoints, chats and proposals.
	catalog := tools.NewCatalog(toolClient.Catalog(), cfg.ToolsCacheTTL, o.Now)
	modelTools := toolserver.NewModelTools(toolClient, catalog)
	workflows, runs := store.NewWorkflows(db, cfg.DataTable), store.NewRuns(db, cfg.DataTable)
	// As in AWS, runs through the API and runs in the stream have the time
	// limits of their functions.
	runService := workflow.NewRunService(workflow.RunServiceOptions{Runs: runs, Workflows: workflows, Tools: modelTools, Now: o.Now, RunTimeout: workflow.APIRunTimeout})
	streamRuns := workflow.NewRunService(workflow.RunServiceOptions{Runs: runs, Workflows: workflows, Tools: modelTools, Now: o.Now, RunTimeout: workflow.StreamRunTimeout})
	workflowService := workflow.NewService(workflow.Options{
		Store: workflows, Runs: runs, Models: models, Now: o.Now,
		Catalog: workflow.NewToolCatalog(catalog),
	})
	chats := chat.NewService(chat.Options{
		Store: store.NewChats(db, cfg.DataTable), Models: models, Preferences: users, DefaultModelID: cfg.DefaultModelID,
		Tools: modelTools, Workflows: streamRuns.ChatRunner(), Now: o.Now,
	})
	limiter := ratelimit.New(store.NewRateLimits(db, cfg.RateLimitsTable), o.Now)
	chatLimits := chat.Limits{Limiter: limiter, Messages: cfg.RateLimitMessages, Streams: cfg.RateLimitStreams}
	workflowLimits := workflow.Limits{Limiter: limiter, Messages: cfg.RateLimitMessages, Runs: cfg.RateLimitRuns}
	workflowRoutes := workflow.Routes(workflowService, authn, workflowLimits)
	runRoutes := workflow.RunRoutes(runService, authn, workflowLimits)
	workflowRoutes.Mount(runRoutes, runRoutes.Patterns()...)
	s.Functions = []Function{
		{LogicalID: "HealthFunction", Dir: "health", Router: health.Routes(o.Now)},
		{LogicalID: "AuthFunction", Dir: "auth", Router: auth.Routes(authn, ratelimit.Attempts{Limiter: limiter, SignInPerEmail: cfg.RateLimitSignInEmail, SignInPerAddress: cfg.RateLimitSignInAddress, SignUpPerAddress: cfg.RateLimitSignUpAddress})},
		{LogicalID: "ModelsFunction", Dir: "models", Router: model.Routes(models, users, authn)},
		{LogicalID: "ToolsFunction", Dir: "tools", Router: tools.Routes(catalog, authn)},
		{LogicalID: "ChatsFunction", Dir: "chats", Router: chat.Routes(chats, authn, chatLimits)},
		{LogicalID: "StreamFunction", Dir: "stream", Router: chat.StreamRoutes(chats, authn, o.PingInterval, chatLimits), FunctionURL: true},
		{LogicalID: "WorkflowsFunction", Dir: "workflows", Router: workflowRoutes},
	}
	api := httpapi.NewRouter()
	for _, f := range s.Functions {
		api.Mount(f.Router, f.Router.Patterns()...)
	}
	s.API = httpapi.Stack(api, mw)
	return s, nil
}

// inProcessURL is the base URL of the tool server when it is called in
// process; handlerTransport ignores the host.
const inProcessURL = "http://tool-server.in-process"

// handlerTransport is an http.RoundTripper that serves every request with
// h in process, as a server would receive it.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	req := r.Clone(r.Context())
	req.RequestURI = r.URL.RequestURI()
	req.RemoteAddr = "127.0.0.1:0"
	if req.Body == nil {
		req.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// ttlTolerant lets store.CreateTables run on tables that already exist with
// TTL enabled (restored from DATA_FILE, or kept by the DYNAMODB_ENDPOINT
// engine across restarts): enabling TTL again, which DynamoDB refuses, is
// accepted when it is already enabled on the same attribute.
type ttlTolerant struct{ dynamodbiface.DynamoDBAPI }

func (c ttlTolerant) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	out, err := c.DynamoDBAPI.UpdateTimeToLive(ctx, in, opts...)
	spec := in.TimeToLiveSpecification
	if err == nil || spec == nil || !aws.ToBool(spec.Enabled) {
		return out, err
	}
	d, derr := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: in.TableName}, opts...)
	if derr == nil && d.TimeToLiveDescription != nil && d.TimeToLiveDescription.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled &&
		aws.ToString(d.TimeToLiveDescription.AttributeName) == aws.ToString(spec.AttributeName) {
		return &dynamodb.UpdateTimeToLiveOutput{TimeToLiveSpecification: spec}, nil
	}
	return out, err
}

// Close stops the embedded engine, if any, saving its data to DATA_FILE
// when set.
func (s *Stack) Close() error {
	if s.Engine != nil {
		return s.Engine.Close()
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
