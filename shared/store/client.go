package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
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
	// Capacity, when set, asks DynamoDB for the capacity every call
	// consumes and sums it: a measurement mode (make cost), never set by
	// the functions.
	Capacity *CapacityMeter
	// AccessKeyID is the access key id of the dummy credentials at
	// Endpoint ("local" when empty): the local stack signs each
	// function's calls with the function's logical id, by which the
	// embedded engine's IAM check (infra/iampolicy) knows whose policy
	// applies.
	AccessKeyID string
}

// MaxAttempts is how many times the SDK tries a throttled or failed
// retryable call (standard retryer, exponential backoff with jitter) before
// the error reaches the handler. Kept low: an API request should fail fast
// with 503 rather than hold a Lambda for seconds.
const MaxAttempts = 3

// The retry delays: full jitter under an exponential ceiling of base·2^n,
// capped at maxRetryDelay. DynamoDB answers in milliseconds, so other
// errors wait little; throttling waits longer, for capacity to return. A
// persistent failure thus reaches the handler after at most about 0.3 s of
// waiting (1.5 s when throttled), where the SDK's default (1 s base) waits
// up to 6 s.
const (
	retryBase         = 50 * time.Millisecond
	throttleRetryBase = 250 * time.Millisecond
	maxRetryDelay     = time.Second
)

// newRetryer is the retryer of every DynamoDB client: the SDK's standard
// retryer (its retryable errors: 5xx, throttling codes, connection errors;
// its retry quota) with MaxAttempts, the delays above, and also retrying
// what DynamoDB documents as retryable but the SDK does not retry: a
// transaction cancelled only for throttling or a conflict with another
// transaction (nothing was written; TransactWriteItems carries an
// idempotency token across attempts), and TransactionConflictException.
func newRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = MaxAttempts
		o.Backoff = backoff{throttle: retry.IsErrorThrottles(append([]retry.IsErrorThrottle{retry.IsErrorThrottleFunc(txThrottled)}, o.Throttles...))}
		dynamo.RetryTxConflicts(o)
		o.Retryables = append(o.Retryables, retry.RetryableErrorCode{Codes: map[string]struct{}{"TransactionConflictException": {}}})
	})
}

// backoff implements retry.BackoffDelayer with the delays above.
type backoff struct{ throttle retry.IsErrorThrottle }

func (b backoff) BackoffDelay(attempt int, err error) (time.Duration, error) {
	base := retryBase
	if b.throttle.IsErrorThrottle(err) == aws.TrueTernary {
		base = throttleRetryBase
	}
	ceiling := maxRetryDelay
	if attempt < 8 {
		ceiling = min(maxRetryDelay, base<<max(attempt, 1))
	}
	return rand.N(ceiling + 1), nil
}

// txThrottled reports a transaction cancelled for throttling as a throttle.
func txThrottled(err error) aws.Ternary {
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if c := aws.ToString(r.Code); c == "ThrottlingError" || c == "ProvisionedThroughputExceeded" {
				return aws.TrueTernary
			}
		}
	}
	return aws.UnknownTernary
}

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
			Credentials: credentials.NewStaticCredentialsProvider(cmp.Or(opts.AccessKeyID, "local"), "local", ""),
		}
	}
	cfg.Retryer = newRetryer
	if opts.Counter != nil {
		cfg.APIOptions = append(cfg.APIOptions, opts.Counter.register)
	}
	if opts.Capacity != nil {
		cfg.APIOptions = append(cfg.APIOptions, opts.Capacity.register)
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

// CapacityMeter sums the capacity units DynamoDB reports for the calls of
// a client (Options.Capacity): it sets ReturnConsumedCapacity TOTAL on
// every item operation that does not ask for more, and adds up the
// ConsumedCapacity of the answers. DynamoDB reports nothing for a failed
// call (a failed condition consumes capacity all the same): those are
// counted apart.
type CapacityMeter struct {
	mu     sync.Mutex
	c      Capacity
	byKind map[string]Capacity
}

// Capacity is what a CapacityMeter counted.
type Capacity struct {
	// ReadUnits and WriteUnits are the read and write request units the
	// answers reported (an eventually consistent read of up to 4 KB is
	// half a unit).
	ReadUnits, WriteUnits float64
	// Reads and Writes count the successful calls of each kind;
	// FailedReads and FailedWrites the failed ones.
	Reads, Writes, FailedReads, FailedWrites int64
	// Unreported counts successful calls whose answer had no
	// ConsumedCapacity (an engine that does not report it).
	Unreported int64
}

// Sub is c minus d: what was counted between two snapshots.
func (c Capacity) Sub(d Capacity) Capacity {
	return Capacity{ReadUnits: c.ReadUnits - d.ReadUnits, WriteUnits: c.WriteUnits - d.WriteUnits,
		Reads: c.Reads - d.Reads, Writes: c.Writes - d.Writes, FailedReads: c.FailedReads - d.FailedReads,
		FailedWrites: c.FailedWrites - d.FailedWrites, Unreported: c.Unreported - d.Unreported}
}

// Snapshot returns the sums so far.
func (m *CapacityMeter) Snapshot() Capacity {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c
}

// readOps are the item operations that read.
var readOps = map[string]bool{"GetItem": true, "BatchGetItem": true, "Query": true, "Scan": true, "TransactGetItems": true}

// register adds the meter to a client's operations that have
// ReturnConsumedCapacity (the item operations): it asks for TOTAL unless
// the caller asked for more, and counts the answer.
func (m *CapacityMeter) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("store.CapacityMeter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			rc := field(in.Parameters, "ReturnConsumedCapacity")
			if !rc.IsValid() {
				return next.HandleInitialize(ctx, in)
			}
			if s := rc.String(); s == "" || s == string(types.ReturnConsumedCapacityNone) {
				rc.SetString(string(types.ReturnConsumedCapacityTotal))
			}
			op := awsmiddleware.GetOperationName(ctx)
			out, md, err := next.HandleInitialize(ctx, in)
			m.add(CallKind(op, in.Parameters), !readOps[op], out.Result, err)
			return out, md, err
		}), middleware.After)
}

// field is the field name of the struct *v points to (invalid if none).
func field(v any, name string) reflect.Value {
	p := reflect.ValueOf(v)
	if p.Kind() != reflect.Pointer || p.IsNil() || p.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return p.Elem().FieldByName(name)
}

// Reset sets every sum to zero.
func (m *CapacityMeter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.c, m.byKind = Capacity{}, nil
}

// ByKind returns the sums so far per kind of call (CallKind).
func (m *CapacityMeter) ByKind() map[string]Capacity {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Capacity, len(m.byKind))
	for k, c := range m.byKind {
		out[k] = c
	}
	return out
}

// add counts one item operation's answer, of the given kind of call: its
// ConsumedCapacity, one entry or one per table.
func (m *CapacityMeter) add(kind string, write bool, result any, err error) {
	var reported []types.ConsumedCapacity
	switch c := field(result, "ConsumedCapacity"); {
	case !c.IsValid():
	case c.Kind() == reflect.Slice:
		reported, _ = c.Interface().([]types.ConsumedCapacity)
	case !c.IsNil():
		if one, ok := c.Interface().(*types.ConsumedCapacity); ok {
			reported = []types.ConsumedCapacity{*one}
		}
	}
	var d Capacity
	switch {
	case err != nil && write:
		d.FailedWrites++
	case err != nil:
		d.FailedReads++
	case write:
		d.Writes++
	default:
		d.Reads++
	}
	if err == nil && len(reported) == 0 {
		d.Unreported++
	}
	for _, c := range reported {
		r, w := aws.ToFloat64(c.ReadCapacityUnits), aws.ToFloat64(c.WriteCapacityUnits)
		if r == 0 && w == 0 { // TOTAL may give CapacityUnits alone
			if write {
				w = aws.ToFloat64(c.CapacityUnits)
			} else {
				r = aws.ToFloat64(c.CapacityUnits)
			}
		}
		d.ReadUnits += r
		d.WriteUnits += w
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.c = m.c.Add(d)
	if m.byKind == nil {
		m.byKind = map[string]Capacity{}
	}
	m.byKind[kind] = m.byKind[kind].Add(d)
}

// Add is c plus d.
func (c Capacity) Add(d Capacity) Capacity {
	return Capacity{ReadUnits: c.ReadUnits + d.ReadUnits, WriteUnits: c.WriteUnits + d.WriteUnits,
		Reads: c.Reads + d.Reads, Writes: c.Writes + d.Writes, FailedReads: c.FailedReads + d.FailedReads,
		FailedWrites: c.FailedWrites + d.FailedWrites, Unreported: c.Unreported + d.Unreported}
}

// Calls is the number of calls c counts, failed ones included.
func (c Capacity) Calls() int64 { return c.Reads + c.Writes + c.FailedReads + c.FailedWrites }

// decodeAttr decodes the JSON attribute attr of the item with key pk/sk
// into v. Stored JSON that does not decode is corruption: it fails with an
// Internal error (500 INTERNAL_ERROR to the client) whose cause, logged,
// names the item, never with empty data that a later write would store
// over the real value.
func decodeAttr(pk, sk, attr, data string, v any) error {
	if err := json.Unmarshal([]byte(data), v); err != nil {
		return errs.E("store.decode", errs.Internal, "", "internal error").
			WithCause(fmt.Errorf("item PK=%q SK=%q: attribute %s does not decode: %w", pk, sk, attr, err))
	}
	return nil
}
