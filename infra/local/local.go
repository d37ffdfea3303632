// Package local mounts every Lambda function's router, built by the same
// builders as the Lambda bootstraps (functions/assembly), side by
// side in one process for the local dev server and the end-to-end tests: the REST API on one
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
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"
	"github.com/guregu/dynamo/v2/dynamodbiface"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/authfn"
	"github.com/workflowchat/service/functions/assembly/chatsfn"
	"github.com/workflowchat/service/functions/assembly/healthfn"
	"github.com/workflowchat/service/functions/assembly/knowledgefn"
	"github.com/workflowchat/service/functions/assembly/mcpfn"
	"github.com/workflowchat/service/functions/assembly/mcpgatewayfn"
	"github.com/workflowchat/service/functions/assembly/mcpserversfn"
	"github.com/workflowchat/service/functions/assembly/modelsfn"
	"github.com/workflowchat/service/functions/assembly/oauthfn"
	"github.com/workflowchat/service/functions/assembly/runnerfn"
	"github.com/workflowchat/service/functions/assembly/streamfn"
	"github.com/workflowchat/service/functions/assembly/sweeperfn"
	"github.com/workflowchat/service/functions/assembly/toolsfn"
	"github.com/workflowchat/service/functions/assembly/triggerfirefn"
	"github.com/workflowchat/service/functions/assembly/triggersfn"
	"github.com/workflowchat/service/functions/assembly/workflowsfn"
	"github.com/workflowchat/service/infra/dynamolocal"
	"github.com/workflowchat/service/infra/iampolicy"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/oauth/accesstoken"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/vault"
	"github.com/workflowchat/service/shared/workflow/runs"
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
	// Builder is the Go name of the builder that built Router, as its
	// package path and name (".../assembly/chatsfn.Chats"): the one that
	// functions/<Dir>/main.go must call too.
	Builder string
}

// functions are the HTTP functions the dev server mounts, each through its
// Lambda builder (health, built from the clock alone, is added apart).
var functions = []struct {
	fn      assembly.Function
	builder string
}{
	{authfn.Auth, builderPkg + "authfn.Auth"},
	{modelsfn.Models, builderPkg + "modelsfn.Models"},
	{toolsfn.Tools, builderPkg + "toolsfn.Tools"},
	{chatsfn.Chats, builderPkg + "chatsfn.Chats"},
	{streamfn.Stream, builderPkg + "streamfn.Stream"},
	{workflowsfn.Workflows, builderPkg + "workflowsfn.Workflows"},
	{triggersfn.Triggers, builderPkg + "triggersfn.Triggers"},
	{oauthfn.OAuth, builderPkg + "oauthfn.OAuth"},
	{mcpgatewayfn.McpGateway, builderPkg + "mcpgatewayfn.McpGateway"},
	{mcpserversfn.McpServers, builderPkg + "mcpserversfn.McpServers"},
	{knowledgefn.Knowledge, builderPkg + "knowledgefn.Knowledge"},
}

// builderPkg is the import path under which the builders live.
const builderPkg = "github.com/workflowchat/service/functions/assembly/"

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
	// IAM checks each function's DynamoDB calls against its policy in
	// LOCAL_IAM_TEMPLATE; nil when that is unset (or with
	// DYNAMODB_ENDPOINT). Its Denied lists the calls refused.
	IAM *iampolicy.Guard
	// Sweeper ends the streamed replies whose lease ran out
	// (SweeperFunction in AWS); the dev server runs it on a ticker
	// (SWEEP_INTERVAL).
	Sweeper *job.Sweeper
	// Runner executes durable workflow runs in process (RunnerFunction in
	// AWS); Runner.Wait waits for the runs in progress.
	Runner *runs.InProcess
	// Poller fires the schedule triggers that are due (EventBridge
	// Scheduler and TriggerFireFunction in AWS) with TriggerFireFunction's
	// handler; the dev server runs it on a ticker (SCHEDULE_POLL_INTERVAL).
	Poller *trigger.Poller
	// Blobs is the blob store every function uses (S3 in AWS): a folder
	// beside DATA_FILE (DATA_FILE + ".blobs"), or memory without
	// DATA_FILE. API serves its signed URLs at blob.PathPrefix, outside
	// the API's middleware, as S3 serves presigned URLs.
	Blobs *blob.Local
}

// Options are the process-level dependencies of New.
type Options struct {
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Counter, when set, counts DynamoDB calls.
	Counter *store.CallCounter
	// Capacity, when set, sums the capacity units of every DynamoDB call
	// (make cost's measurement mode).
	Capacity *store.CapacityMeter
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
	// PublicURL is the origin the API handler is served at (e.g.
	// http://127.0.0.1:3000), which the signed blob URLs start with; empty
	// means http://127.0.0.1:<PORT>.
	PublicURL string
	// MCPCallWait bounds how long an MCP tools/call waits for its run;
	// zero: mcpgateway.MaxCallWait.
	MCPCallWait time.Duration
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
		eo := dynamolocal.Options{DataFile: cfg.DataFile, Interval: cfg.SnapshotInterval, Logger: o.Logger}
		if cfg.LocalIAMTemplate != "" {
			p, err := loadPolicies(cfg.LocalIAMTemplate)
			if err != nil {
				return nil, err
			}
			eo.Wrap = func(h http.Handler) http.Handler {
				s.IAM = p.NewGuard(h, guardTables(cfg), o.Logger)
				return s.IAM
			}
		}
		eng, err := dynamolocal.StartWith(eo)
		if err != nil {
			return nil, fmt.Errorf("local: start embedded DynamoDB: %w", err)
		}
		s.Engine, endpoint = eng, eng.URL
	}
	db, err := store.Open(ctx, store.Options{Region: cfg.Region, Endpoint: endpoint, Counter: o.Counter, Capacity: o.Capacity})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.DB = db
	// With the IAM check, each function signs its calls with its logical
	// id, so that the engine applies that function's policy.
	as := func(d assembly.Deps, fn string) (assembly.Deps, error) {
		if s.IAM == nil {
			return d, nil
		}
		var err error
		d.DB, err = store.Open(ctx, store.Options{Region: cfg.Region, Endpoint: endpoint, Counter: o.Counter, Capacity: o.Capacity, AccessKeyID: fn})
		return d, err
	}
	names := map[string]string{"USERS_TABLE": cfg.UsersTable, "SESSIONS_TABLE": cfg.SessionsTable, "DATA_TABLE": cfg.DataTable,
		"RATE_LIMITS_TABLE": cfg.RateLimitsTable, "OAUTH_TABLE": cfg.OAuthTable}
	if err := store.CreateTables(ctx, ttlTolerant{db.Client()}, names); err != nil {
		s.Close()
		return nil, err
	}

	if s.Blobs, err = blobs(cfg, o); err != nil {
		s.Close()
		return nil, err
	}

	mw := httpapi.Options{Logger: o.Logger, AllowedOrigins: cfg.AllowedOrigins}
	cfg.MCPServiceKey = s.ServiceKey
	// The tool server (McpFunction) is a function URL, not an HttpApi
	// route, so it is not one of s.Functions.
	if s.ToolRouter, err = mcpfn.Mcp(ctx, cfg, o.Sandbox, s.Blobs); err != nil {
		s.Close()
		return nil, err
	}
	s.Tools = httpapi.Stack(s.ToolRouter, mw)

	// Every function reaches the tool server as in AWS: at MCP_URL with
	// the service key, over HTTP or, without ToolServerURL, in process.
	keys, err := signingKeys(cfg)
	if err != nil {
		s.Close()
		return nil, err
	}
	d := assembly.Deps{DB: db, Now: o.Now, Logger: o.Logger, Hasher: o.Hasher, PingInterval: o.PingInterval, Blobs: s.Blobs,
		SigningKeys: keys, MCPCallWait: o.MCPCallWait}
	if d.VaultKeys, err = vaultKeys(cfg); err != nil {
		s.Close()
		return nil, err
	}
	cfg.MCPURL = o.ToolServerURL
	if o.ToolServerURL == "" {
		cfg.MCPURL = inProcessURL
		d.ToolHTTP = &http.Client{Transport: handlerTransport{s.Tools}, Timeout: toolclient.DefaultClientTimeout}
	}
	// Durable workflow runs execute in process, on the runner the runner
	// function's bootstrap builds, behind the same Invoker (which the
	// runner itself uses for the runs it starts: a trigger's buffered
	// fire).
	s.Runner = &runs.InProcess{}
	d.Runs = s.Runner
	rd, err := as(d, runnerfn.LogicalID)
	if err != nil {
		s.Close()
		return nil, err
	}
	if s.Runner.Runner, err = runnerfn.Runner(ctx, cfg, rd); err != nil {
		s.Close()
		return nil, err
	}
	s.Functions = []Function{{LogicalID: healthfn.LogicalID, Dir: "health", Router: healthfn.Health(o.Now), Builder: builderPkg + "healthfn.Health"}}
	for _, f := range functions {
		fd, err := as(d, f.fn.LogicalID)
		if err != nil {
			s.Close()
			return nil, err
		}
		r, err := f.fn.Build(ctx, cfg, fd)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("local: %s: %w", f.fn.LogicalID, err)
		}
		s.Functions = append(s.Functions, Function{LogicalID: f.fn.LogicalID, Dir: dirOf(f.fn.LogicalID), Router: r,
			FunctionURL: f.fn.FunctionURL, Builder: f.builder})
	}
	sd, err := as(d, sweeperfn.LogicalID)
	if err != nil {
		s.Close()
		return nil, err
	}
	if s.Sweeper, err = sweeperfn.Sweeper(ctx, cfg, sd); err != nil {
		s.Close()
		return nil, err
	}
	// Without SCHEDULE_GROUP the schedules are the Data table's due index
	// (schedules.Open), which the poller reads.
	td, err := as(d, triggerfirefn.LogicalID)
	if err != nil {
		s.Close()
		return nil, err
	}
	fire, err := triggerfirefn.Service(ctx, cfg, td)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Poller = &trigger.Poller{Due: store.NewDueSchedules(db, cfg.DataTable, o.Now), Fire: fire.Fire, Now: o.Now, Logger: o.Logger}
	api := httpapi.NewRouter()
	for _, f := range s.Functions {
		api.Mount(f.Router, f.Router.Patterns()...)
	}
	// The signed blob URLs stand outside the API's middleware: the
	// signature authorizes them (no session, any origin's page may send
	// them, their bodies are files of any type and up to 25 MiB), and
	// they answer CORS for ALLOWED_ORIGINS themselves.
	root := http.NewServeMux()
	root.Handle(blob.PathPrefix, httpapi.Chain(s.Blobs.Handler(), httpapi.RequestID(o.Logger), httpapi.AccessLog, httpapi.Recover))
	root.Handle("/", httpapi.Stack(api, mw))
	s.API = root
	return s, nil
}

// loadPolicies reads the IAM policies of the template at path.
func loadPolicies(path string) (*iampolicy.Policies, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("local: LOCAL_IAM_TEMPLATE: %w", err)
	}
	p, err := iampolicy.Load(b)
	if err != nil {
		return nil, fmt.Errorf("local: LOCAL_IAM_TEMPLATE %s: %w", path, err)
	}
	return p, nil
}

// guardTables describes the stack's tables, at their names in cfg, to
// the IAM check.
func guardTables(cfg config.Config) []iampolicy.Table {
	names := map[string]string{"USERS_TABLE": cfg.UsersTable, "SESSIONS_TABLE": cfg.SessionsTable, "DATA_TABLE": cfg.DataTable,
		"RATE_LIMITS_TABLE": cfg.RateLimitsTable, "OAUTH_TABLE": cfg.OAuthTable}
	var out []iampolicy.Table
	for _, t := range store.Tables() {
		it := iampolicy.Table{Name: names[t.EnvVar], LogicalID: t.LogicalID, HashKey: t.HashKey, IndexHashKeys: map[string]string{}}
		for _, x := range t.Indexes {
			it.IndexHashKeys[x.Name] = x.HashKey
		}
		out = append(out, it)
	}
	return out
}

// BlobsDir is the folder of the dev server's blobs with DATA_FILE.
func BlobsDir(dataFile string) string { return dataFile + ".blobs" }

// BlobSecretFile is the file of the dev server's blob URL signing secret
// with DATA_FILE.
func BlobSecretFile(dataFile string) string { return dataFile + ".blob-secret" }

// blobs builds the dev server's blob store: the folder BlobsDir(DATA_FILE),
// its URLs signed with the secret of BlobSecretFile (created when missing,
// so that URLs signed before a restart still work after it, as the data
// does), or memory, its URLs signed with a key of this process (they stop
// working when it exits, as the data does); URLs start at o.PublicURL.
func blobs(cfg config.Config, o Options) (*blob.Local, error) {
	var b blob.Backend = blob.NewMemory(o.Now)
	var secret []byte
	if cfg.DataFile != "" {
		f, err := blob.NewFolder(BlobsDir(cfg.DataFile), o.Now)
		if err != nil {
			return nil, fmt.Errorf("local: blob store: %w", err)
		}
		if secret, err = blob.SecretFile(BlobSecretFile(cfg.DataFile)); err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
		b = f
	}
	base := o.PublicURL
	if base == "" {
		base = fmt.Sprintf("http://127.0.0.1:%d", cfg.Port)
	}
	return blob.NewLocal(b, blob.LocalOptions{BaseURL: base, Secret: secret, Now: o.Now, AllowedOrigins: cfg.AllowedOrigins})
}

// signingKeys returns the loader of the OAuth signing keys: the key file
// OAUTH_KEY_FILE, else oauth-keys.json beside DATA_FILE (created with a
// new key set when missing, mode 0600), else a key set made for this
// process alone (tokens then die with it, as the in-memory data does).
func signingKeys(cfg config.Config) (func(context.Context) ([]byte, error), error) {
	path := cfg.OAuthKeyFile
	if path == "" && cfg.DataFile != "" {
		path = filepath.Join(filepath.Dir(cfg.DataFile), "oauth-keys.json")
	}
	if path == "" {
		doc := accesstoken.GenerateKeySet("memory")
		return func(context.Context) ([]byte, error) { return doc, nil }, nil
	}
	if _, err := accesstoken.KeyFile(path); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return func(context.Context) ([]byte, error) { return accesstoken.KeyFile(path) }, nil
}

// VaultKeyFile is the file of the dev server's vault key with DATA_FILE.
func VaultKeyFile(dataFile string) string { return dataFile + ".vault-key" }

// vaultKeys returns the dev server's vault keys: the key file
// VaultKeyFile(DATA_FILE) (created, mode 0600, when missing), so that the
// secrets kept across a restart open after it, or a key of this process
// without DATA_FILE (the secrets die with it, as the data does).
func vaultKeys(cfg config.Config) (vault.Keys, error) {
	if cfg.DataFile == "" {
		return vault.NewMemoryKeys(), nil
	}
	k, err := vault.LoadKeyFile(VaultKeyFile(cfg.DataFile))
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return k, nil
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

// dirOf returns the folder under functions/ of the function with logical
// id id: HealthFunction -> health.
func dirOf(id string) string {
	return strings.ToLower(strings.TrimSuffix(id, "Function"))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
