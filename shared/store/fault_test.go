package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/store"
)

// faultEndpoint is a DynamoDB endpoint that answers every request with the
// same error (status and AWS JSON 1.0 body), or drops the connection when
// status is 0. It counts the attempts.
func faultEndpoint(t *testing.T, status int, body string) (string, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n.Add(1)
		if status == 0 {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

func ddbError(typ, msg string) string {
	b, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + typ, "message": msg})
	return string(b)
}

func txCanceled(reasons ...string) string {
	rs := make([]map[string]string, len(reasons))
	for i, r := range reasons {
		rs[i] = map[string]string{"Code": r}
	}
	b, _ := json.Marshal(map[string]any{"__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
		"Message": "Transaction cancelled [" + strings.Join(reasons, ", ") + "]", "CancellationReasons": rs})
	return string(b)
}

// TestFaultStoreErrorClassification drives the store through the real SDK
// against an endpoint that always fails the same way, and checks what the
// handlers get after the retryer is done: the kind, code and Retry-After
// hint of the error, how many attempts were made, how long it took, and
// that the typed DynamoDB error is still found through the retryer's
// wrapping.
func TestFaultStoreErrorClassification(t *testing.T) {
	t.Parallel()
	const (
		retried = store.MaxAttempts
		once    = 1
	)
	cases := []struct {
		name     string
		status   int
		body     string
		tx       bool // call a transaction (CreateChat) rather than a PutItem (CreateSession)
		kind     errs.Kind
		code     string
		attempts int
		typed    any // a pointer to the typed error errors.As must find, or nil
	}{
		{name: "ThrottlingException", status: 400, body: ddbError("ThrottlingException", "slow down"),
			kind: errs.Unavailable, code: "STORAGE_UNAVAILABLE", attempts: retried, typed: new(*types.ThrottlingException)},
		{name: "ProvisionedThroughputExceeded", status: 400, body: ddbError("ProvisionedThroughputExceededException", "slow down"),
			kind: errs.Unavailable, code: "STORAGE_UNAVAILABLE", attempts: retried, typed: new(*types.ProvisionedThroughputExceededException)},
		{name: "RequestLimitExceeded", status: 400, body: ddbError("RequestLimitExceeded", "account limit"),
			kind: errs.Unavailable, code: "STORAGE_UNAVAILABLE", attempts: retried, typed: new(*types.RequestLimitExceeded)},
		{name: "InternalServerError", status: 500, body: ddbError("InternalServerError", "oops"),
			kind: errs.Unavailable, code: "STORAGE_UNAVAILABLE", attempts: retried, typed: new(*types.InternalServerError)},
		{name: "ServiceUnavailable", status: 503, body: ddbError("ServiceUnavailable", "down"),
			kind: errs.Unavailable, code: "STORAGE_UNAVAILABLE", attempts: retried},
		{name: "502 without a body", status: 502, body: "",
			kind: errs.Unavailable, code: "STORAGE_UNAVAILABLE", attempts: retried},
		{name: "connection dropped", status: 0,
			kind: errs.Unavailable, code: "STORAGE_UNAVAILABLE", attempts: retried},
		{name: "TransactionConflictException", status: 400, body: ddbError("TransactionConflictException", "conflict"),
			kind: errs.Unavailable, code: "STORAGE_UNAVAILABLE", attempts: retried, typed: new(*types.TransactionConflictException)},
		{name: "tx cancelled: ThrottlingError", status: 400, body: txCanceled("ThrottlingError", "None"), tx: true,
			kind: errs.Unavailable, code: "STORAGE_UNAVAILABLE", attempts: retried, typed: new(*types.TransactionCanceledException)},
		{name: "tx cancelled: ProvisionedThroughputExceeded", status: 400, body: txCanceled("None", "ProvisionedThroughputExceeded"), tx: true,
			kind: errs.Unavailable, code: "STORAGE_UNAVAILABLE", attempts: retried, typed: new(*types.TransactionCanceledException)},
		{name: "tx cancelled: TransactionConflict", status: 400, body: txCanceled("TransactionConflict", "None"), tx: true,
			kind: errs.Unavailable, code: "STORAGE_UNAVAILABLE", attempts: retried, typed: new(*types.TransactionCanceledException)},
		{name: "tx cancelled: ConditionalCheckFailed", status: 400, body: txCanceled("ConditionalCheckFailed", "None"), tx: true,
			kind: errs.Conflict, code: "CHAT_EXISTS", attempts: once},
		{name: "tx cancelled: ValidationError", status: 400, body: txCanceled("None", "ValidationError"), tx: true,
			kind: errs.Internal, code: "INTERNAL_ERROR", attempts: once, typed: new(*types.TransactionCanceledException)},
		{name: "ValidationException", status: 400, body: ddbError("ValidationException", "bad request"),
			kind: errs.Internal, code: "INTERNAL_ERROR", attempts: once},
		{name: "ResourceNotFoundException", status: 400, body: ddbError("ResourceNotFoundException", "no table"),
			kind: errs.Internal, code: "INTERNAL_ERROR", attempts: once, typed: new(*types.ResourceNotFoundException)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url, attempts := faultEndpoint(t, c.status, c.body)
			db, err := store.Open(context.Background(), store.Options{Region: "us-east-1", Endpoint: url})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if c.tx {
				now := time.Now()
				err = store.NewChats(db, "data").CreateChat(context.Background(), chat.Chat{ID: "c", UserID: "u", Title: "t", CreatedAt: now, UpdatedAt: now})
			} else {
				err = store.NewUsers(db, "users", "sessions").CreateSession(context.Background(),
					auth.Session{TokenHash: "h", User: auth.User{ID: "u"}, ExpiresAt: time.Now().Add(time.Hour)})
			}
			took := time.Since(start)
			if err == nil {
				t.Fatal("no error")
			}
			var e *errs.Error
			if !errors.As(err, &e) {
				t.Fatalf("not an *errs.Error: %v", err)
			}
			if e.Kind != c.kind || e.CodeOrDefault() != c.code {
				t.Errorf("kind %v code %s, want %v %s (%v)", e.Kind, e.CodeOrDefault(), c.kind, c.code, err)
			}
			if wantRA := 0; c.kind == errs.Unavailable && e.RetryAfter != 1 || c.kind != errs.Unavailable && e.RetryAfter != wantRA {
				t.Errorf("RetryAfter %d", e.RetryAfter)
			}
			if got := attempts.Load(); got != int64(c.attempts) {
				t.Errorf("%d attempts, want %d", got, c.attempts)
			}
			if c.attempts == retried {
				var max *retry.MaxAttemptsError
				if !errors.As(err, &max) {
					t.Errorf("no MaxAttemptsError in %v", err)
				}
				// Fail fast: the retries of a persistent failure wait at
				// most about 1.5 s (throttling), far less otherwise; 30 s
				// leaves a loaded machine room and still catches a
				// policy that backs off for seconds per attempt.
				if took > 30*time.Second {
					t.Errorf("the failure took %s to surface", took)
				}
			}
			if c.typed != nil && !errors.As(err, c.typed) {
				t.Errorf("errors.As does not find %T through %v", c.typed, err)
			}
			var api smithy.APIError
			if c.status >= 400 && c.body != "" && c.kind != errs.Conflict && !errors.As(err, &api) {
				t.Errorf("no smithy.APIError in %v", err)
			}
		})
	}
}
