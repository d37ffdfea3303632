// Package storetest gives tests real DynamoDB storage: the embedded engine
// over HTTP, with fresh tables per test. There are no mocks of the store.
package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/infra/dynamolocal"
	"github.com/workflowchat/service/shared/store"
)

var (
	engineOnce sync.Once
	engine     *dynamolocal.Engine
	engineErr  error
	seq        atomic.Int64
)

// Engine returns the process-wide embedded engine, starting it on first use.
func Engine(t testing.TB) *dynamolocal.Engine {
	t.Helper()
	engineOnce.Do(func() { engine, engineErr = dynamolocal.Start() })
	if engineErr != nil {
		t.Fatalf("storetest: start engine: %v", engineErr)
	}
	return engine
}

// DB is a client and the names of a fresh set of tables.
type DB struct {
	*dynamo.DB
	// Names maps each table's EnvVar to its name.
	Names   map[string]string
	Counter *store.CallCounter
}

// Users returns the name of the Users table.
func (d *DB) Users() string { return d.Names[store.UsersTable.EnvVar] }

// Sessions returns the name of the Sessions table.
func (d *DB) Sessions() string { return d.Names[store.SessionsTable.EnvVar] }

// Data returns the name of the Data table.
func (d *DB) Data() string { return d.Names[store.DataTable.EnvVar] }

// RateLimits returns the name of the RateLimits table.
func (d *DB) RateLimits() string { return d.Names[store.RateLimitsTable.EnvVar] }

// OAuth returns the name of the OAuth table.
func (d *DB) OAuth() string { return d.Names[store.OAuthTable.EnvVar] }

// New creates every table under a unique prefix on the shared engine and
// returns a client that counts its calls.
func New(t testing.TB) *DB {
	t.Helper()
	eng := Engine(t)
	ctx := context.Background()
	counter := &store.CallCounter{}
	db, err := store.Open(ctx, store.Options{Region: "us-east-1", Endpoint: eng.URL, Counter: counter})
	if err != nil {
		t.Fatalf("storetest: open: %v", err)
	}
	prefix := fmt.Sprintf("t%d_", seq.Add(1))
	names := map[string]string{}
	for _, tb := range store.Tables() {
		names[tb.EnvVar] = prefix + tb.LocalName
	}
	if err := store.CreateTables(ctx, db.Client(), names); err != nil {
		t.Fatalf("storetest: create tables: %v", err)
	}
	counter.Reset()
	return &DB{DB: db, Names: names, Counter: counter}
}

// Env returns the environment a function needs to reach these tables on
// the embedded engine, as a getenv function, plus extra variables.
func (d *DB) Env(t testing.TB, extra map[string]string) func(string) string {
	env := map[string]string{"DYNAMODB_ENDPOINT": Engine(t).URL, "AWS_REGION": "us-east-1"}
	for k, v := range d.Names {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}
