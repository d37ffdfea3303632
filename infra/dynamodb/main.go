// Command dynamodb serves the embedded DynamoDB engine on its own, with the
// service's tables created, for tools and tests outside the dev server: a
// Lambda bootstrap under the Runtime Interface Emulator, the AWS CLI
// (--endpoint-url), a second dev server (DYNAMODB_ENDPOINT). It listens on
// ADDR (default 127.0.0.1:8000), keeps its data in DATA_FILE when set (the
// same journal and snapshot as the dev server's), and stops on SIGINT or
// SIGTERM. `make dynamodb-local` runs it.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/workflowchat/service/infra/dynamolocal"
	"github.com/workflowchat/service/shared/store"
)

func main() {
	if err := run(os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "dynamodb:", err)
		os.Exit(1)
	}
}

func run(getenv func(string) string) error {
	addr := getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8000"
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	eng, err := dynamolocal.StartWith(dynamolocal.Options{Addr: addr, DataFile: getenv("DATA_FILE"), Logger: logger})
	if err != nil {
		return fmt.Errorf("ADDR %s: %w", addr, err)
	}
	defer eng.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := createTables(ctx, eng.URL); err != nil {
		return err
	}
	fmt.Printf("DynamoDB (embedded) at %s, tables:", eng.URL)
	for _, t := range store.Tables() {
		fmt.Printf(" %s (%s)", t.LocalName, t.EnvVar)
	}
	fmt.Println("\nStop with Ctrl+C.")
	<-ctx.Done()
	return nil
}

// createTables creates the service's tables under their local names,
// unless a DATA_FILE brought them back.
func createTables(ctx context.Context, url string) error {
	db, err := store.Open(ctx, store.Options{Region: "us-east-1", Endpoint: url})
	if err != nil {
		return err
	}
	existing, err := db.ListTables().All(ctx)
	if err != nil {
		return err
	}
	if len(existing) > 0 {
		return nil
	}
	names := map[string]string{}
	for _, t := range store.Tables() {
		names[t.EnvVar] = t.LocalName
	}
	return store.CreateTables(ctx, db.Client(), names)
}
