// Command devserver runs the whole service locally: the REST API (every
// Lambda function's routes, the chat stream included) on PORT (3000) and the
// tool server on MCP_PORT (3001), on the embedded DynamoDB engine unless
// DYNAMODB_ENDPOINT is set. It needs no AWS account and no API keys, and
// shuts down gracefully on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/workflowchat/service/infra/local"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/logging"
)

func main() {
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
	stack, err := local.New(ctx, cfg, local.Options{Logger: logger, ToolServerURL: "http://" + mcpLn.Addr().String()})
	if err != nil {
		return err
	}
	defer stack.Close()

	servers := []*http.Server{
		{Handler: stack.API, ReadHeaderTimeout: 10 * time.Second},
		{Handler: stack.Tools, ReadHeaderTimeout: 10 * time.Second},
	}
	errc := make(chan error, 2)
	for i, ln := range []net.Listener{apiLn, mcpLn} {
		go func() { errc <- servers[i].Serve(ln) }()
	}
	store := "embedded DynamoDB (in memory)"
	if cfg.DynamoDBEndpoint != "" {
		store = "DynamoDB at " + cfg.DynamoDBEndpoint
	}
	fmt.Printf("REST API     http://%s\n", apiLn.Addr())
	fmt.Printf("Tool server  http://%s/mcp\n", mcpLn.Addr())
	if cfg.MCPServiceKey == "" {
		fmt.Printf("Service key  %s (development key, generated; set MCP_SERVICE_KEY to choose one)\n", stack.ServiceKey)
	} else {
		fmt.Printf("Service key  from MCP_SERVICE_KEY\n")
	}
	fmt.Printf("Storage      %s\n", store)
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
	for _, s := range servers {
		if err := s.Shutdown(shutdownCtx); err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
	}
	return nil
}
