// Package local composes every Lambda function's handler into one process
// for the local dev server and the end-to-end tests: the REST API on one
// handler (every function's routes, as API Gateway would route them) and
// the tool server on another. With no DYNAMODB_ENDPOINT it starts the
// embedded DynamoDB engine and creates the tables from the same definitions
// as template.yaml.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/infra/dynamolocal"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/health"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
)

// Function is one Lambda function of template.yaml and the routes it serves.
type Function struct {
	// LogicalID is the function's resource name in template.yaml.
	LogicalID string
	// Dir is the function's folder under functions/.
	Dir    string
	Router *httpapi.Router
}

// Stack is the whole service in one process.
type Stack struct {
	// Functions are the HTTP API functions, each with its routes.
	Functions []Function
	// API serves every function's routes behind the standard middleware.
	API http.Handler
	// Tools serves the tool server (POST /mcp).
	Tools http.Handler
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
		eng, err := dynamolocal.Start()
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
	names := map[string]string{"USERS_TABLE": cfg.UsersTable, "SESSIONS_TABLE": cfg.SessionsTable, "DATA_TABLE": cfg.DataTable}
	if err := store.CreateTables(ctx, db.Client(), names); err != nil {
		s.Close()
		return nil, err
	}

	users := store.NewUsers(db, cfg.UsersTable, cfg.SessionsTable)
	authn := auth.NewService(users, o.Hasher, o.Now)
	models, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Functions = []Function{
		{LogicalID: "HealthFunction", Dir: "health", Router: health.Routes(o.Now)},
		{LogicalID: "AuthFunction", Dir: "auth", Router: auth.Routes(authn)},
		{LogicalID: "ModelsFunction", Dir: "models", Router: model.Routes(models, users, authn)},
	}
	api := httpapi.NewRouter()
	for _, f := range s.Functions {
		api.Mount(f.Router, f.Router.Patterns()...)
	}
	mw := httpapi.Options{Logger: o.Logger, AllowedOrigins: cfg.AllowedOrigins}
	s.API = httpapi.Stack(api, mw)
	s.Tools = httpapi.Stack(httpapi.NewRouter(), mw)
	return s, nil
}

// Close stops the embedded engine, if any.
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
