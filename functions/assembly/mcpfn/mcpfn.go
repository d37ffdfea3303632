// Package mcpfn builds McpFunction: the key-protected tool server (POST
// /mcp), served by its own Lambda function URL, not the HTTP API. Its
// builder takes the sandbox that runs the isolated tools instead of
// assembly.Deps: the tool server needs no DynamoDB, and it does not import
// package assembly, so it links no DynamoDB client.
package mcpfn

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/blob/s3blob"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/sandbox"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/tracing/otlp"
)

// Required are the variables the bootstrap refuses to start without.
var Required = []string{"MCP_SERVICE_KEY"}

// Builder is the shape of Mcp, the tool server's builder, which Lambda
// serves.
type Builder func(ctx context.Context, cfg config.Config, sb tools.Sandbox, blobs blob.Backend) (*httpapi.Router, error)

// Lambda is McpFunction's bootstrap: the configuration from getenv
// (requiring Required), the logger and the tracing exporter, the sandbox
// of the isolated tools (NewLazySandbox: its workers start with the first
// isolated call, not at the cold start) over the program worker, the
// blob store (Blobs) and build's router (Mcp), under the standard
// middleware. An empty worker runs the isolated tools in process, for
// tests that cannot start their own binary as a worker (a test binary is
// not one). It fails with the first of those that cannot be built, its
// error naming the variable at fault.
func Lambda(ctx context.Context, getenv func(string) string, worker string, build Builder) (http.Handler, error) {
	cfg, err := config.Load(getenv)
	if err == nil {
		err = cfg.Require(Required...)
	}
	if err != nil {
		return nil, err
	}
	logger := logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
	if _, err := otlp.FromEnv(getenv, "", logger); err != nil {
		return nil, err
	}
	var sb tools.Sandbox
	if worker != "" {
		lazy, err := NewLazySandbox(cfg, worker, logger)
		if err != nil {
			return nil, err
		}
		sb = lazy
	}
	blobs, err := Blobs(ctx, cfg)
	if err != nil {
		return nil, err
	}
	routes, err := build(ctx, cfg, sb, blobs)
	if err != nil {
		return nil, err
	}
	return httpapi.Stack(routes, httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins}), nil
}

// Mcp builds the tool server's router: the built-in tools, llm_generate on
// the configured models (plus tools.TestTools with TOOLS_TEST_HOOKS),
// under MCP_SERVICE_KEY. The isolated tools (jq,
// expressions, templates, regular expressions, CSV, HTML) run in sb's
// worker processes (NewSandbox), admitted per caller: the user that
// tools.WithCaller put in the request's context, or the anonymous
// allowance; nil sb runs them in process, where nothing bounds their
// memory (tests only). It fails when a model provider or the tool
// registry cannot be built.
//
// blobs, when not nil, carries runTool's large inputs and results by
// reference (toolserver.WithBlobs): the function's blob store (Blobs).
func Mcp(ctx context.Context, cfg config.Config, sb tools.Sandbox, blobs blob.Backend) (*httpapi.Router, error) {
	models, err := providers.Registry(ctx, cfg)
	if err != nil {
		return nil, err
	}
	all := tools.Builtin(tools.Config{
		Generator:            toolserver.Models(models),
		DefaultModelID:       cfg.DefaultModelID,
		AllowPrivateNetworks: cfg.ToolsAllowPrivateNetworks,
	})
	if cfg.ToolsTestHooks {
		all = append(all, tools.TestTools()...)
	}
	reg, err := tools.NewRegistry(all...)
	if err != nil {
		return nil, err
	}
	if sb != nil {
		reg = reg.WithSandbox(sb)
	}
	var opts []toolserver.Option
	if blobs != nil {
		opts = append(opts, toolserver.WithBlobs(blobs))
	}
	return toolserver.Routes(reg, cfg.MCPServiceKey, opts...), nil
}

// Blobs returns the tool server's blob store: the S3 bucket BLOB_BUCKET
// (at BLOB_ENDPOINT when set), or nil without BLOB_BUCKET (values then
// travel inline only, up to the request and response limits). It fails
// when the AWS configuration cannot be loaded.
func Blobs(ctx context.Context, cfg config.Config) (blob.Backend, error) {
	if cfg.BlobBucket == "" {
		return nil, nil
	}
	return s3blob.Open(ctx, s3blob.Options{Bucket: cfg.BlobBucket, Region: cfg.Region, Endpoint: cfg.BlobEndpoint})
}

// ServerMemory is the memory the tool server keeps for its own process when
// it sizes its sandbox from the function's: the binary and the Go runtime,
// the model clients of llm_generate and the other in-process tools, one
// request (at most 1 MiB, or an 8 MiB input by reference, decoded) and
// one response (an isolated tool's output, at most 8 MiB, held a few times
// while it is checked and encoded). A Lambda function serves one request
// at a time.
const ServerMemory = 200 << 20

// MaxSandboxWorkers bounds the pool however much memory the function has:
// an evaluation is CPU-bound on one thread, and a Lambda function has at
// most 6 vCPUs.
const MaxSandboxWorkers = 16

// SandboxSize sizes the sandbox of the isolated tools from cfg, read once
// at start:
//   - in Lambda (FunctionMemoryMB, from AWS_LAMBDA_FUNCTION_MEMORY_SIZE):
//     as many workers as fit the function's memory once ServerMemory is
//     kept for the server, each counted at its worst,
//     tools.SandboxWorkerMemory (168 MiB), at most MaxSandboxWorkers;
//   - elsewhere (the dev server, where the machine's memory is not the
//     process's to count): tools.SandboxWorkers (4), or SandboxPerUser+1
//     when that is more.
//
// PerUser is cfg.SandboxPerUser (SANDBOX_PER_USER). It fails, naming both
// variables and the memory needed, when the function's memory holds no
// more workers than SANDBOX_PER_USER: the pool must keep a worker that one
// user cannot take.
func SandboxSize(cfg config.Config) (tools.SandboxSize, error) {
	perUser := cfg.SandboxPerUser
	if perUser < 1 {
		perUser = config.DefaultSandboxPerUser
	}
	if cfg.FunctionMemoryMB == 0 {
		return tools.SandboxSize{Workers: max(tools.SandboxWorkers, perUser+1), PerUser: perUser}, nil
	}
	workers := (int64(cfg.FunctionMemoryMB)<<20 - ServerMemory) / tools.SandboxWorkerMemory
	if workers < int64(perUser)+1 {
		need := (ServerMemory + int64(perUser+1)*tools.SandboxWorkerMemory) >> 20
		return tools.SandboxSize{}, fmt.Errorf("tool server: AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%d MB holds %d sandbox workers (%d MiB each, %d MiB kept for the server), and SANDBOX_PER_USER=%d needs %d: give the function at least %d MB or lower SANDBOX_PER_USER",
			cfg.FunctionMemoryMB, max(workers, 0), tools.SandboxWorkerMemory>>20, ServerMemory>>20, perUser, perUser+1, need)
	}
	return tools.SandboxSize{Workers: int(min(workers, MaxSandboxWorkers)), PerUser: perUser}, nil
}

// NewLazySandbox returns the tool server's sandbox of the worker program
// at path, sized by SandboxSize(cfg), whose workers start with the first
// isolated tool call rather than at a cold start. It fails as SandboxSize
// does, at once, so that a function too small for its pool fails its init.
func NewLazySandbox(cfg config.Config, path string, logger *slog.Logger) (*tools.LazySandbox, error) {
	size, err := SandboxSize(cfg)
	if err != nil {
		return nil, err
	}
	return tools.NewLazySandbox(path, size, logger), nil
}

// NewSandbox starts the tool server's sandbox (tools.NewSandbox) of the
// worker program at path, sized by SandboxSize(cfg). It fails as
// SandboxSize does, or when the pool cannot be made.
func NewSandbox(cfg config.Config, path string, logger *slog.Logger) (*sandbox.Pool, error) {
	size, err := SandboxSize(cfg)
	if err != nil {
		return nil, err
	}
	return tools.NewSandbox(path, size, logger)
}
