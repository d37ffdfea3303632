package runnerfn_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/workflowchat/service/functions/assembly/runnerfn"
	"github.com/workflowchat/service/shared/workflow"
)

// TestLambdaInvokerSendsAnAsyncInvoke checks the request the real
// aws-sdk-go-v2 Lambda client sends for a run against a local endpoint
// that speaks the Invoke API: POST /2015-03-31/functions/<name>/invocations,
// X-Amz-Invocation-Type Event, signed, the run reference as the payload;
// 202 is accepted, any other answer is an error.
func TestLambdaInvokerSendsAnAsyncInvoke(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		status  int
		wantErr bool
	}{
		{"accepted", http.StatusAccepted, false},
		{"throttled", http.StatusTooManyRequests, true},
		{"synchronous answer", http.StatusOK, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got struct {
				method, path, invocationType, auth string
				body                               []byte
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got.method, got.path = r.Method, r.URL.Path
				got.invocationType, got.auth = r.Header.Get("X-Amz-Invocation-Type"), r.Header.Get("Authorization")
				got.body, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "application/json")
				if c.status >= 400 {
					w.Header().Set("X-Amzn-ErrorType", "TooManyRequestsException")
					w.WriteHeader(c.status)
					_, _ = w.Write([]byte(`{"message":"Rate exceeded","Reason":"CallerRateLimitExceeded"}`))
					return
				}
				w.WriteHeader(c.status)
			}))
			defer srv.Close()
			client := lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
				Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
				RetryMaxAttempts: 1})
			inv := runnerfn.LambdaInvoker{Client: client, Function: "stack-RunnerFunction-1"}
			ref := workflow.RunRef{RunID: "r1", Attempt: 2}
			err := inv.Invoke(context.Background(), ref)
			if (err != nil) != c.wantErr {
				t.Fatalf("Invoke: %v, want error %v", err, c.wantErr)
			}
			if got.method != http.MethodPost || got.path != "/2015-03-31/functions/stack-RunnerFunction-1/invocations" ||
				got.invocationType != "Event" || !strings.HasPrefix(got.auth, "AWS4-HMAC-SHA256 ") {
				t.Fatalf("request %s %s, invocation type %q, auth %q", got.method, got.path, got.invocationType, got.auth)
			}
			var sent workflow.RunRef
			if err := json.Unmarshal(got.body, &sent); err != nil || sent != ref {
				t.Fatalf("payload %s (%v)", got.body, err)
			}
		})
	}
}
