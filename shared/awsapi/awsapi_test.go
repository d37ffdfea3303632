package awsapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/workflowchat/service/shared/awsapi"
)

var creds = credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", "TOKEN")

// verify recomputes the request's SigV4 signature for service with the
// test credentials from what arrived (method, path, headers, body), as
// AWS does, and reports whether the Authorization header matches.
func verify(t *testing.T, service string, r *http.Request, body []byte) bool {
	t.Helper()
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return false
	}
	clone, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.EscapedPath(), nil)
	for _, h := range []string{"Content-Type", "X-Amz-Invocation-Type", "X-Amz-Target", "X-Amz-Security-Token"} {
		if v := r.Header.Get(h); v != "" {
			clone.Header.Set(h, v)
		}
	}
	clone.ContentLength = int64(len(body))
	sum := sha256.Sum256(body)
	c, _ := creds.Retrieve(context.Background())
	if err := v4.NewSigner().SignHTTP(context.Background(), c, clone, hex.EncodeToString(sum[:]), service, "us-east-1", at); err != nil {
		t.Fatal(err)
	}
	return clone.Header.Get("Authorization") == r.Header.Get("Authorization")
}

// answer is one response of a stand-in: status, error type header, body.
type answer struct {
	status    int
	errorType string
	body      string
}

// standIn serves answers in turn (the last repeats), checking each
// request with check and its signature for service; it counts the
// requests.
func standIn(t *testing.T, service string, answers []answer, check func(r *http.Request, body []byte)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var sends atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(sends.Add(1))
		body, _ := io.ReadAll(r.Body)
		check(r, body)
		if !verify(t, service, r, body) {
			t.Errorf("the signature does not verify: %s", r.Header.Get("Authorization"))
		}
		a := answers[min(n, len(answers))-1]
		if a.errorType != "" {
			w.Header().Set("X-Amzn-ErrorType", a.errorType)
		}
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	return srv, &sends
}

// TestInvoke answers as Lambda would: the event is sent signed to the
// function's invocations path (an ARN escaped), and only 202 is success;
// throttling and server errors are sent again up to MaxAttempts, other
// refusals are not.
func TestInvoke(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:lambda:us-east-1:123456789012:function:stack-runner"
	refused := `{"Type":"User","message":"refused"}`
	for _, c := range []struct {
		name      string
		answers   []answer
		wantSends int
		wantType  string // "" means success
	}{
		{"accepted", []answer{{202, "", ""}}, 1, ""},
		{"throttled once", []answer{{429, "TooManyRequestsException", refused}, {202, "", ""}}, 2, ""},
		{"server error once", []answer{{500, "ServiceException", refused}, {202, "", ""}}, 2, ""},
		{"throttled throughout", []answer{{429, "TooManyRequestsException", refused}}, 3, "TooManyRequestsException"},
		{"not found is not retried", []answer{{404, "ResourceNotFoundException:http://internal.amazon.com/coral/com.amazonaws.awslambda/", refused}}, 1, "ResourceNotFoundException"},
		{"forbidden is not retried", []answer{{403, "AccessDeniedException", refused}}, 1, "AccessDeniedException"},
		{"a synchronous 200 is not queued", []answer{{200, "", "{}"}}, 1, "UnexpectedStatus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, sends := standIn(t, awsapi.Lambda, c.answers, func(r *http.Request, body []byte) {
				if r.Method != http.MethodPost || r.URL.EscapedPath() != "/2015-03-31/functions/arn:aws:lambda:us-east-1:123456789012:function:stack-runner/invocations" ||
					r.Header.Get("X-Amz-Invocation-Type") != "Event" || r.Header.Get("X-Amz-Security-Token") != "TOKEN" || string(body) != `{"runId":"r1"}` {
					t.Errorf("request %s %s, headers %v, body %s", r.Method, r.URL.EscapedPath(), r.Header, body)
				}
			})
			client := &awsapi.Client{Region: "us-east-1", Endpoints: map[string]string{awsapi.Lambda: srv.URL}, Credentials: creds}
			err := client.Invoke(context.Background(), arn, []byte(`{"runId":"r1"}`))
			if got := int(sends.Load()); got != c.wantSends {
				t.Errorf("%d sends, want %d", got, c.wantSends)
			}
			if c.wantType == "" {
				if err != nil {
					t.Fatalf("Invoke: %v", err)
				}
				return
			}
			var ae *awsapi.Error
			if !errors.As(err, &ae) || ae.Type != c.wantType || ae.Service != awsapi.Lambda {
				t.Fatalf("Invoke: %v, want a %s", err, c.wantType)
			}
			if !strings.Contains(err.Error(), arn) {
				t.Errorf("the error does not name the function: %v", err)
			}
		})
	}
}

// TestSecretString answers as Secrets Manager would (JSON 1.1): the value
// of a string secret; its errors, typed from the body's __type, sent again
// when throttled or failed; a binary secret is refused.
func TestSecretString(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:keys-AbCdEf"
	for _, c := range []struct {
		name      string
		answers   []answer
		want      string
		wantSends int
		wantErr   string
	}{
		{"a string secret", []answer{{200, "", `{"ARN":"` + arn + `","SecretString":"{\"kid\":\"k1\"}","VersionId":"v1"}`}}, `{"kid":"k1"}`, 1, ""},
		{"throttled once", []answer{{400, "", `{"__type":"ThrottlingException","message":"slow down"}`}, {200, "", `{"SecretString":"s"}`}}, "s", 2, ""},
		{"internal error once", []answer{{500, "", `{"__type":"InternalServiceError"}`}, {200, "", `{"SecretString":"s"}`}}, "s", 2, ""},
		{"not found", []answer{{400, "", `{"__type":"com.amazonaws.secretsmanager#ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`}}, "", 1, "ResourceNotFoundException"},
		{"a binary secret", []answer{{200, "", `{"SecretBinary":"AAEC"}`}}, "", 1, "not a string secret"},
		{"an answer that is not JSON", []answer{{200, "", `<html>`}}, "", 1, "does not decode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, sends := standIn(t, awsapi.SecretsManager, c.answers, func(r *http.Request, body []byte) {
				if r.Method != http.MethodPost || r.URL.Path != "/" || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" ||
					r.Header.Get("Content-Type") != "application/x-amz-json-1.1" || string(body) != `{"SecretId":"`+arn+`"}` {
					t.Errorf("request %s %s, headers %v, body %s", r.Method, r.URL.Path, r.Header, body)
				}
			})
			client := &awsapi.Client{Region: "us-east-1", Endpoints: map[string]string{awsapi.SecretsManager: srv.URL}, Credentials: creds}
			got, err := client.SecretString(context.Background(), arn)
			if n := int(sends.Load()); n != c.wantSends {
				t.Errorf("%d sends, want %d", n, c.wantSends)
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), arn) {
					t.Fatalf("SecretString: %q, %v; want an error naming %q and the secret", got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("SecretString: %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestRefusesWhatItCannotSend: a payload that is not JSON is refused
// before any request; a context that ends stops the retries; credentials
// that cannot be had fail the request, naming why.
func TestRefusesWhatItCannotSend(t *testing.T) {
	t.Parallel()
	var sends atomic.Int32
	retried := make(chan struct{}) // closed at the second send
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sends.Add(1) == 2 {
			close(retried)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	client := &awsapi.Client{Region: "us-east-1", Endpoints: map[string]string{awsapi.Lambda: srv.URL}, Credentials: creds, MaxAttempts: 1000}
	if err := client.Invoke(context.Background(), "f", []byte("not json")); err == nil || sends.Load() != 0 {
		t.Fatalf("a payload that is not JSON: %v, %d sends", err, sends.Load())
	}
	// The context ends once the client has retried (an event, not a
	// time a loaded machine may not reach a send in).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-retried; cancel() }()
	err := client.Invoke(ctx, "f", []byte(`{}`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Invoke with a context that ends: %v", err)
	}
	if n := sends.Load(); n < 2 || n >= 1000 {
		t.Fatalf("%d sends before the context ended", n)
	}
	noCreds := &awsapi.Client{Region: "us-east-1", Endpoints: map[string]string{awsapi.Lambda: srv.URL},
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return aws.Credentials{}, errors.New("no role") })}
	if err := noCreds.Invoke(context.Background(), "f", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "no role") {
		t.Fatalf("Invoke without credentials: %v", err)
	}
}
