package s3blob_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/blob/blobtest"
	"github.com/workflowchat/service/shared/blob/s3blob"
	"github.com/workflowchat/service/shared/errs"
)

// fakeS3 is an in-process fake S3 server (gofakes3) that the real SDK
// client talks to over HTTP, path-style.
type fakeS3 struct {
	url     string
	buckets atomic.Int64
}

func startFake(t *testing.T) *fakeS3 {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New(), gofakes3.WithoutVersioning()).Server())
	t.Cleanup(srv.Close)
	return &fakeS3{url: srv.URL}
}

// newStore returns a Store of a fresh bucket on the fake.
func (f *fakeS3) newStore(t *testing.T) *s3blob.Store {
	t.Helper()
	ctx := context.Background()
	bucket := fmt.Sprintf("blobs-%d", f.buckets.Add(1))
	s, err := s3blob.Open(ctx, s3blob.Options{Bucket: bucket, Region: "us-east-1", Endpoint: f.url,
		HTTPClient: &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client(f.url).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return s
}

func client(endpoint string) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: aws.AnonymousCredentials{}, HTTPClient: &http.Client{Transport: &http.Transport{}}})
}

func TestS3Contract(t *testing.T) {
	t.Parallel()
	fake := startFake(t)
	blobtest.Run(t, func(t *testing.T) blob.Store { return fake.newStore(t) })
}

// TestPresignedPutIsSignedWithTypeAndLength: S3 enforces what is signed,
// so the URL must sign the content type and the length.
func TestPresignedPutIsSignedWithTypeAndLength(t *testing.T) {
	t.Parallel()
	s := startFake(t).newStore(t)
	p, err := s.PresignPut(context.Background(), "uploads/u/1", blob.PutOptions{ContentType: "image/png", Size: 1234}, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	signed := ""
	for _, kv := range strings.Split(p.URL[strings.Index(p.URL, "?")+1:], "&") {
		if v, ok := strings.CutPrefix(kv, "X-Amz-SignedHeaders="); ok {
			signed = v
		}
	}
	for _, h := range []string{"content-length", "content-type", "host"} {
		if !strings.Contains(signed, h) {
			t.Errorf("X-Amz-SignedHeaders %q lacks %s", signed, h)
		}
	}
	if !strings.Contains(p.URL, "X-Amz-Expires=900") {
		t.Errorf("URL %s does not expire in 900 s", p.URL)
	}
	if len(p.Headers) != 1 || p.Headers["Content-Type"] != "image/png" {
		t.Errorf("headers %v, want only Content-Type", p.Headers)
	}
}

func TestMissingBucketIsNotNotFound(t *testing.T) {
	t.Parallel()
	fake := startFake(t)
	s, err := s3blob.Open(context.Background(), s3blob.Options{Bucket: "never-created", Region: "us-east-1", Endpoint: fake.url})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(context.Background(), "chats/c/v")
	if err == nil || errs.Is(err, errs.NotFound) {
		t.Fatalf("get from a missing bucket: %v; a deployment error must not read as a missing blob", err)
	}
}

func TestOpenNeedsABucket(t *testing.T) {
	t.Parallel()
	if _, err := s3blob.Open(context.Background(), s3blob.Options{}); err == nil || !strings.Contains(err.Error(), "BLOB_BUCKET") {
		t.Fatalf("Open without a bucket: %v", err)
	}
}
