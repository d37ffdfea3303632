// Package wiring builds, from the configuration, what every authenticated
// Lambda function needs (config, middleware, DynamoDB, auth, the rate
// limiter), so that each functions/<name>/main.go stays a few lines: load
// the config, build once per cold start, fail init loudly, start the
// adapter. Like the mains, it is where concrete types are named. It
// imports no model provider SDK, tool or chat code, so functions that only
// need it stay small; package services builds those.
package wiring

import (
	"context"
	"net/http"
	"os"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/store"
)

// Config loads the configuration from getenv and requires the named
// variables. Its errors name the variables at fault.
func Config(getenv func(string) string, required ...string) (config.Config, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return config.Config{}, err
	}
	return cfg, cfg.Require(required...)
}

// Stack wraps routes in the standard middleware, logging to stdout in the
// configured format (JSON in Lambda).
func Stack(cfg config.Config, routes http.Handler) http.Handler {
	logger := logging.New(os.Stdout, cfg.LogFormat, cfg.LogLevel)
	return httpapi.Stack(routes, httpapi.Options{Logger: logger, AllowedOrigins: cfg.AllowedOrigins})
}

// Base is what every authenticated function needs: DynamoDB, the users
// store and the auth service, and the per-user rate limiter (over
// RATE_LIMITS_TABLE; only the functions with limited routes use it, and
// they require that variable).
type Base struct {
	DB      *dynamo.DB
	Users   *store.Users
	Auth    *auth.Service
	Limiter *ratelimit.Limiter
}

// Open connects to DynamoDB (AWS, or DYNAMODB_ENDPOINT) and builds Base.
func Open(ctx context.Context, cfg config.Config) (Base, error) {
	db, err := store.Open(ctx, store.Options{Region: cfg.Region, Endpoint: cfg.DynamoDBEndpoint})
	if err != nil {
		return Base{}, err
	}
	users := store.NewUsers(db, cfg.UsersTable, cfg.SessionsTable)
	return Base{DB: db, Users: users, Auth: auth.NewService(users, nil, time.Now),
		Limiter: ratelimit.New(store.NewRateLimits(db, cfg.RateLimitsTable), time.Now)}, nil
}

// Attempts returns the limits of the credential endpoints: the configured
// RATE_LIMIT_SIGN_IN_EMAIL, RATE_LIMIT_SIGN_IN_ADDRESS and
// RATE_LIMIT_SIGN_UP_ADDRESS rules on b's limiter.
func Attempts(cfg config.Config, b Base) ratelimit.Attempts {
	return ratelimit.Attempts{Limiter: b.Limiter, SignInPerEmail: cfg.RateLimitSignInEmail,
		SignInPerAddress: cfg.RateLimitSignInAddress, SignUpPerAddress: cfg.RateLimitSignUpAddress}
}
