// Command devserver runs the whole service locally: the REST API (every
// Lambda function's routes, the chat stream included) on PORT (3000) and the
// tool server on MCP_PORT (3001), on the embedded DynamoDB engine unless
// DYNAMODB_ENDPOINT is set. It needs no AWS account and no API keys, and
// shuts down gracefully on SIGINT or SIGTERM. With DATA_FILE the embedded
// engine's data survives restarts and crashes: every write is journaled
// (DATA_FILE.journal, synced before the write is answered), the snapshot
// in DATA_FILE and the journal are restored at start, and the journal is
// folded into the snapshot every SNAPSHOT_INTERVAL and at shutdown (`make
// run` keeps it in .data/).
//
// Like McpFunction, the binary is also its own tool worker: the tools that
// evaluate untrusted input run in child processes of it under memory and
// CPU limits. So does the text extraction of PDFs being indexed, as in
// KnowledgeIndexFunction.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/workflowchat/service/functions/assembly/mcpfn"
	"github.com/workflowchat/service/infra/local"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/sandbox"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/tracing/otlp"
)

func main() {
	// The binary serves two kinds of sandbox workers, told apart by the
	// argument after sandbox.WorkerArg: a PDF's text extraction
	// (knowledge.PDFWorkerArg), or else the isolated tools.
	if knowledge.IsPDFWorker() {
		knowledge.ServePDFWorker() // never returns
	}
	if sandbox.IsWorker() {
		tools.ServeWorker() // never returns
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return err
	}
	logger := logging.New(os.Stderr, cfg.LogFormat, cfg.LogLevel)
	slog.SetDefault(logger)
	// Spans go to OTEL_EXPORTER_OTLP_ENDPOINT when it is set; the last
	// ones are exported at exit, after the servers and the stack stop.
	stopTracing, err := otlp.FromEnv(os.Getenv, devServiceName, logger)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := stopTracing(ctx); err != nil {
			logger.Warn("tracing: the last spans were not exported", "err", err.Error())
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Listen first, so the REST tool endpoints can reach the tool server
	// over real HTTP, as they do in AWS.
	apiLn, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("PORT: %w", err)
	}
	mcpLn, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.MCPPort)))
	if err != nil {
		return fmt.Errorf("MCP_PORT: %w", err)
	}
	self, err := sandbox.SelfPath()
	if err != nil {
		return fmt.Errorf("tool workers: %w", err)
	}
	workers, err := mcpfn.NewSandbox(cfg, self, logger)
	if err != nil {
		return fmt.Errorf("tool workers: %w", err)
	}
	defer workers.Close()
	var now func() time.Time
	if cfg.DevClockFile != "" {
		now = local.FileClock(cfg.DevClockFile)
		logger.Warn("the clock runs ahead of the wall clock by the duration in DEV_CLOCK_FILE", "file", cfg.DevClockFile)
	}
	stack, err := local.New(ctx, cfg, local.Options{Logger: logger, ToolServerURL: "http://" + mcpLn.Addr().String(), Sandbox: workers,
		PublicURL: "http://" + apiLn.Addr().String(), Now: now})
	if err != nil {
		return err
	}
	defer stack.Close()
	go stack.Sweeper.Run(ctx, cfg.SweepInterval)
	go stack.Poller.Run(ctx, cfg.SchedulePollInterval)

	storage := storageLine(cfg, stack)
	servers := []*http.Server{newServer(stack.API, serverTimeouts), newServer(stack.Tools, serverTimeouts)}
	errc := make(chan error, 2)
	for i, ln := range []net.Listener{apiLn, mcpLn} {
		go func() { errc <- servers[i].Serve(ln) }()
	}
	fmt.Printf("REST API     http://%s\n", apiLn.Addr())
	fmt.Printf("Tool server  http://%s/mcp\n", mcpLn.Addr())
	fmt.Printf("Your MCP     http://%s/api/mcp (your workflows as tools: OAuth or a personal access token)\n", apiLn.Addr())
	if cfg.MCPServiceKey == "" {
		fmt.Printf("Service key  %s (development key, generated; set MCP_SERVICE_KEY to choose one)\n", stack.ServiceKey)
	} else {
		fmt.Printf("Service key  from MCP_SERVICE_KEY\n")
	}
	switch {
	case cfg.WebhookSigningKey != "":
		fmt.Printf("Webhooks     secrets derived from WEBHOOK_SIGNING_KEY\n")
	case cfg.MCPServiceKey != "":
		fmt.Printf("Webhooks     secrets derived from MCP_SERVICE_KEY (set WEBHOOK_SIGNING_KEY to choose a key of their own)\n")
	default:
		fmt.Printf("Webhooks     secrets derived from the generated service key: they change at restart (set WEBHOOK_SIGNING_KEY to keep them)\n")
	}
	fmt.Printf("Schedules    due schedule triggers fire every %s\n", cfg.SchedulePollInterval)
	fmt.Printf("Storage      %s\n", storage)
	fmt.Printf("Auth limits  %s\n", authLimitsLine(cfg))
	fmt.Printf("Blobs        %s\n", blobsLine(cfg))
	fmt.Printf("Tracing      %s\n", tracingLine(os.Getenv))
	if cfg.BlobBucket != "" {
		fmt.Printf("Note         BLOB_BUCKET is ignored: the dev server keeps blobs itself and serves their signed URLs\n")
	}
	if cfg.DataFile != "" && cfg.DynamoDBEndpoint != "" {
		fmt.Printf("Note         DATA_FILE is ignored: DYNAMODB_ENDPOINT is set, and that store keeps its own data\n")
	}
	fmt.Printf("Stop with Ctrl+C (SIGINT) or SIGTERM.\n")

	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	fmt.Println("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var shutdownErr error
	for _, s := range servers {
		if err := s.Shutdown(shutdownCtx); err != nil && shutdownErr == nil {
			shutdownErr = fmt.Errorf("shutdown: %w", err)
		}
	}
	// Closing the stack folds the embedded engine's journal into its
	// snapshot (DATA_FILE), after the last request.
	if err := stack.Close(); err != nil {
		return errors.Join(shutdownErr, err)
	}
	if stack.Engine != nil && cfg.DataFile != "" {
		fmt.Printf("data kept in %s\n", absPath(cfg.DataFile))
	}
	return shutdownErr
}

// timeouts bound how long a client may take to send a request and how
// long it may hold an idle connection.
type timeouts struct {
	// ReadHeader bounds reading the request line and headers.
	ReadHeader time.Duration
	// Read bounds reading the whole request, headers and body, from its
	// first byte. net/http lifts the read deadline once the handler has
	// read the body to its end, so it does not limit the response.
	Read time.Duration
	// Idle bounds how long a kept-alive connection waits for the next
	// request.
	Idle time.Duration
}

// serverTimeouts are the dev server's bounds. There is deliberately no
// WriteTimeout: it would cut the chat stream, which may run for 600 s.
var serverTimeouts = timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Idle: 60 * time.Second}

// newServer returns the HTTP server for h with the bounds t.
func newServer(h http.Handler, t timeouts) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, IdleTimeout: t.Idle}
}

// storageLine describes where the data is kept and how it survives.
func storageLine(cfg config.Config, stack *local.Stack) string {
	switch {
	case stack.Engine == nil:
		return "DynamoDB at " + cfg.DynamoDBEndpoint
	case cfg.DataFile == "":
		return "embedded DynamoDB, in memory (set DATA_FILE to keep data across restarts)"
	}
	when := "at shutdown"
	if cfg.SnapshotInterval > 0 {
		when = "every " + cfg.SnapshotInterval.String() + " and at shutdown"
	}
	from := "new file"
	if r := stack.Engine.Restored; r != nil {
		var parts []string
		if !r.SavedAt.IsZero() {
			parts = append(parts, fmt.Sprintf("restored %d tables, %d items from %s", r.Tables, r.Items, r.SavedAt.Local().Format(time.DateTime)))
		}
		if r.Replayed > 0 {
			parts = append(parts, fmt.Sprintf("replayed %d journaled writes", r.Replayed))
		}
		from = strings.Join(parts, ", then ")
	}
	return fmt.Sprintf("embedded DynamoDB, kept in %s (%s; every write journaled to %s before it is answered, snapshot %s)",
		absPath(cfg.DataFile), from, filepath.Base(cfg.DataFile)+".journal", when)
}

// authLimitsLine describes the sign-up and sign-in limits, and says so
// plainly when a per-address one is off (as `make run` sets them).
func authLimitsLine(cfg config.Config) string {
	show := func(r ratelimit.Rule) string {
		if !r.Enabled() {
			return "OFF"
		}
		return r.String()
	}
	line := fmt.Sprintf("sign-ups per address %s, sign-ins per address %s, sign-ins per email %s",
		show(cfg.RateLimitSignUpAddress), show(cfg.RateLimitSignInAddress), show(cfg.RateLimitSignInEmail))
	if !cfg.RateLimitSignUpAddress.Enabled() || !cfg.RateLimitSignInAddress.Enabled() {
		line += " (per-address limits off, as make run sets them: any number of users from this machine; Lambda keeps them)"
	}
	return line
}

// devServiceName is the dev server's service.name in its spans, unless
// OTEL_SERVICE_NAME says otherwise.
const devServiceName = "workflowchat-devserver"

// tracingLine says where the spans go.
func tracingLine(getenv func(string) string) string {
	s, on, err := otlp.ReadSettings(getenv, devServiceName)
	if err != nil || !on {
		return "off (set OTEL_EXPORTER_OTLP_ENDPOINT, e.g. http://localhost:4318, to export spans over OTLP/HTTP)"
	}
	shown := s.URL
	if u, err := url.Parse(s.URL); err == nil {
		shown = u.Redacted()
	}
	return "spans exported to " + shown + " (OTLP/HTTP protobuf)"
}

// blobsLine says where the blobs (attachments, large values) are kept.
func blobsLine(cfg config.Config) string {
	if cfg.DataFile == "" {
		return "in memory (set DATA_FILE to keep them in DATA_FILE.blobs); signed URLs served at " + blob.PathPrefix
	}
	return "kept in " + absPath(local.BlobsDir(cfg.DataFile)) + "; signed URLs served at " + blob.PathPrefix
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
