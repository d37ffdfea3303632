package s3vectorindex_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/knowledge/knowledgetest"
	"github.com/workflowchat/service/shared/knowledge/s3vectorindex"
)

// TestContract runs the vector index contract (the one the embedded
// index passes) on the S3 Vectors client against a fake S3 Vectors
// endpoint, and checks the batching at the API's 500-vector limit.
func newIndex(t *testing.T) (*s3vectorindex.Index, *knowledgetest.FakeS3Vectors) {
	fake := knowledgetest.NewFakeS3Vectors("kb-vectors", "chunks", knowledge.Dimensions)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	x, err := s3vectorindex.New(context.Background(), s3vectorindex.Options{Bucket: "kb-vectors", Index: "chunks", Region: "us-east-1",
		Endpoint: srv.URL, Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	if err != nil {
		t.Fatal(err)
	}
	return x, fake
}

// TestContract runs the vector index contract (the one the embedded
// index passes) on the S3 Vectors client against a fake S3 Vectors
// endpoint.
func TestContract(t *testing.T) {
	t.Parallel()
	knowledgetest.VectorContract(t, func(t *testing.T) knowledge.VectorIndex {
		x, _ := newIndex(t)
		return x
	})
}

// TestBatches: a document of 1,200 vectors is written and deleted in
// calls of at most 500 (the API's limit), and a topK over 100 is asked
// as 100.
func TestBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x, fake := newIndex(t)
	vs := make([][]float32, 1200)
	for i := range vs {
		vs[i] = make([]float32, knowledge.Dimensions)
		vs[i][i%knowledge.Dimensions] = 1
	}
	if err := x.PutDocument(ctx, "kb", "doc", vs); err != nil {
		t.Fatal(err)
	}
	got, err := x.Query(ctx, "kb", vs[5], 500)
	if err != nil || len(got) != 100 || got[0].Chunk%knowledge.Dimensions != 5 {
		t.Fatalf("query: %d results, %v", len(got), err)
	}
	if err := x.DeleteDocument(ctx, "kb", "doc", len(vs)); err != nil {
		t.Fatal(err)
	}
	if fake.Calls["/PutVectors"] != 3 || fake.Calls["/DeleteVectors"] != 3 {
		t.Fatalf("calls %v, want 3 PutVectors and 3 DeleteVectors", fake.Calls)
	}
	if got, _ := x.Query(ctx, "kb", vs[5], 10); len(got) != 0 {
		t.Fatalf("after delete: %d results", len(got))
	}
}

// TestIndexByARNFromTheEnvironment builds the index as a Lambda function
// does: the index named by its ARN alone (what the stack passes as
// KNOWLEDGE_VECTOR_INDEX), the credentials, region and endpoint from the
// environment (AWS_ENDPOINT_URL_S3VECTORS, the SDK's variable); every
// call the contract makes is signed for s3vectors with the environment's
// key and names the index by its ARN.
func TestIndexByARNFromTheEnvironment(t *testing.T) {
	fake := knowledgetest.NewFakeS3Vectors("kb-vectors", "chunks", knowledge.Dimensions)
	var unsigned atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDENV/") || !strings.Contains(auth, "/us-east-1/s3vectors/aws4_request") {
			unsigned.Add(1)
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL_S3VECTORS", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	knowledgetest.VectorContract(t, func(t *testing.T) knowledge.VectorIndex {
		x, err := s3vectorindex.New(context.Background(), s3vectorindex.Options{Bucket: "ignored", Index: fake.ARN()})
		if err != nil {
			t.Fatal(err)
		}
		// The contract's subtests share the fake: each starts empty.
		fake.Reset()
		return x
	})
	if n := unsigned.Load(); n > 0 || fake.Calls["/PutVectors"] == 0 || fake.Calls["/QueryVectors"] == 0 || fake.Calls["/DeleteVectors"] == 0 {
		t.Fatalf("%d calls not signed for s3vectors with the environment's key; calls %v", n, fake.Calls)
	}
}
