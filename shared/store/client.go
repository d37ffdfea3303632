package store

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/guregu/dynamo/v2"
)

// Options configures Open.
type Options struct {
	Region string
	// Endpoint, when set, is a DynamoDB-compatible endpoint (the embedded
	// engine, DynamoDB Local) reached with static dummy credentials. Empty
	// means AWS with the default credential chain.
	Endpoint string
	// Counter, when set, counts every DynamoDB call the client makes.
	Counter *CallCounter
}

// MaxAttempts is how many times the SDK tries a throttled or failed
// retryable call (standard retryer, exponential backoff with jitter) before
// the error reaches the handler. Kept low: an API request should fail fast
// with 503 rather than hold a Lambda for seconds.
const MaxAttempts = 3

// Open returns a guregu/dynamo client for opts. The same code path serves
// AWS and local engines; only the endpoint and credentials differ.
func Open(ctx context.Context, opts Options) (*dynamo.DB, error) {
	var cfg aws.Config
	if opts.Endpoint == "" {
		var err error
		cfg, err = awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(opts.Region))
		if err != nil {
			return nil, fmt.Errorf("store: load AWS config: %w", err)
		}
	} else {
		cfg = aws.Config{
			Region:      opts.Region,
			Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		}
	}
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = MaxAttempts })
	}
	if opts.Counter != nil {
		cfg.APIOptions = append(cfg.APIOptions, opts.Counter.register)
	}
	return dynamo.New(cfg, func(o *dynamodb.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
	}), nil
}

// CallCounter counts DynamoDB API calls (one per operation, retries not
// counted again), for benchmarks and tests that hold endpoints to their
// call budget.
type CallCounter struct {
	n atomic.Int64
}

// Count returns the number of calls so far.
func (c *CallCounter) Count() int64 { return c.n.Load() }

// Reset sets the count to zero.
func (c *CallCounter) Reset() { c.n.Store(0) }

func (c *CallCounter) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("store.CallCounter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.n.Add(1)
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}
