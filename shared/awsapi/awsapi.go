// Package awsapi calls the two AWS operations the service makes outside
// DynamoDB, S3, Bedrock and EventBridge Scheduler: queueing an event for a
// Lambda function (Invoke with InvocationType Event) and reading a Secrets
// Manager secret (GetSecretValue). Each is one SigV4-signed HTTPS request,
// made here instead of through the AWS SDK's service/lambda and
// service/secretsmanager clients, whose package inits (serialization
// schemas, endpoint tables) and first-call setup every cold start of the
// functions that link them would pay for a single operation.
package awsapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// DefaultMaxAttempts is how many times a request is sent when AWS
// throttles or fails it (429, 5xx) or it does not arrive, as the SDK's
// standard retryer does.
const DefaultMaxAttempts = 3

// The signing names of the services, also the keys of Client.Endpoints.
const (
	Lambda         = "lambda"
	SecretsManager = "secretsmanager"
)

// maxResponse bounds the answer read: a secret is at most 64 KiB.
const maxResponse = 256 << 10

// Client signs and sends the requests, in one region.
type Client struct {
	// Region is the services' AWS region: it names the default endpoints
	// and is part of the signature.
	Region string
	// Endpoints override https://<service>.<Region>.amazonaws.com per
	// signing name (Lambda, SecretsManager): tests, VPC endpoints.
	Endpoints map[string]string
	// Credentials sign the requests (an aws.Config's, which caches them).
	Credentials aws.CredentialsProvider
	// HTTP sends the requests; nil means a client with a 10 s timeout.
	HTTP *http.Client
	// MaxAttempts bounds the sends of one request; zero means
	// DefaultMaxAttempts.
	MaxAttempts int
	// Now is the signing clock; nil means time.Now.
	Now func() time.Time
}

// Error is an AWS refusal: the service, the HTTP status, and the error
// type (X-Amzn-ErrorType or the body's __type, e.g.
// TooManyRequestsException, ResourceNotFoundException) and message.
type Error struct {
	Service string
	Status  int
	Type    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.Service, e.Status, e.Type, e.Message)
}

// retryable reports whether sending the request again may succeed: a
// server error or throttling (429, or a 400 whose type says so, as Secrets
// Manager answers).
func (e *Error) retryable() bool {
	switch e.Type {
	case "ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded":
		return true
	}
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

var defaultHTTP = &http.Client{Timeout: 10 * time.Second}

// Invoke queues payload (a JSON document) for function, a name or an ARN:
// Lambda answers 202 once the event is queued, and the function then runs
// it asynchronously, retrying and dead-lettering as configured. It fails
// with an *Error when Lambda refuses the event (after MaxAttempts when it
// throttles or fails), or when the credentials or the network fail.
func (c *Client) Invoke(ctx context.Context, function string, payload []byte) error {
	if !json.Valid(payload) {
		return fmt.Errorf("lambda: invoke %s: the payload is not JSON", function)
	}
	header := http.Header{"Content-Type": {"application/json"}, "X-Amz-Invocation-Type": {"Event"}}
	if _, err := c.do(ctx, Lambda, "/2015-03-31/functions/"+url.PathEscape(function)+"/invocations", header, payload, http.StatusAccepted); err != nil {
		return fmt.Errorf("lambda: invoke %s: %w", function, err)
	}
	return nil
}

// SecretString reads the current value of the secret secretID (a name or
// an ARN), a string secret. It fails with an *Error when Secrets Manager
// refuses (ResourceNotFoundException, AccessDeniedException...), when the
// secret holds binary data only, or when the credentials or the network
// fail.
func (c *Client) SecretString(ctx context.Context, secretID string) (string, error) {
	body, _ := json.Marshal(map[string]string{"SecretId": secretID})
	header := http.Header{"Content-Type": {"application/x-amz-json-1.1"}, "X-Amz-Target": {"secretsmanager.GetSecretValue"}}
	out, err := c.do(ctx, SecretsManager, "/", header, body, http.StatusOK)
	if err != nil {
		return "", fmt.Errorf("secretsmanager: read %s: %w", secretID, err)
	}
	var v struct{ SecretString *string }
	if err := json.Unmarshal(out, &v); err != nil {
		return "", fmt.Errorf("secretsmanager: read %s: the answer does not decode: %w", secretID, err)
	}
	if v.SecretString == nil {
		return "", fmt.Errorf("secretsmanager: read %s: not a string secret", secretID)
	}
	return *v.SecretString, nil
}

// do sends the request until it gets status ok, a refusal that is not
// worth repeating, or MaxAttempts.
func (c *Client) do(ctx context.Context, service, path string, header http.Header, body []byte, ok int) ([]byte, error) {
	endpoint := c.Endpoints[service]
	if endpoint == "" {
		endpoint = "https://" + service + "." + c.Region + ".amazonaws.com"
	}
	target := strings.TrimRight(endpoint, "/") + path
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	attempts := c.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultMaxAttempts
	}
	var err error
	for attempt := range attempts {
		if attempt > 0 {
			// Full jitter on 100 ms, 200 ms, ... as the SDK's retryer.
			backoff := time.Duration(rand.Int64N(int64(100*time.Millisecond) << (attempt - 1)))
			select {
			case <-ctx.Done():
				return nil, errors.Join(err, ctx.Err())
			case <-time.After(backoff):
			}
		}
		var out []byte
		var retry bool
		out, retry, err = c.send(ctx, service, target, header, body, hash, ok)
		if err == nil {
			return out, nil
		}
		if !retry {
			break
		}
	}
	return nil, err
}

// send makes one attempt; retry says whether another may succeed.
func (c *Client) send(ctx context.Context, service, target string, header http.Header, body []byte, hash string, ok int) (out []byte, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	creds, err := c.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("credentials: %w", err)
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hash, service, c.Region, now()); err != nil {
		return nil, false, fmt.Errorf("sign: %w", err)
	}
	client := c.HTTP
	if client == nil {
		client = defaultHTTP
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	out, err = io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, true, err
	}
	if resp.StatusCode == ok {
		return out, false, nil
	}
	e := &Error{Service: service, Status: resp.StatusCode, Type: resp.Header.Get("X-Amzn-ErrorType")}
	var msg struct {
		Type     string `json:"__type"`
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	_ = json.Unmarshal(out, &msg)
	if e.Type == "" {
		e.Type = msg.Type
	}
	// "Type:http://internal.amazon.com/..." and "namespace#Type".
	if i := strings.IndexByte(e.Type, ':'); i >= 0 {
		e.Type = e.Type[:i]
	}
	if i := strings.LastIndexByte(e.Type, '#'); i >= 0 {
		e.Type = e.Type[i+1:]
	}
	e.Message = msg.Message + msg.MessageU
	if e.Type == "" {
		e.Type, e.Message = "UnexpectedStatus", fmt.Sprintf("want %d", ok)
	}
	return nil, e.retryable(), e
}
