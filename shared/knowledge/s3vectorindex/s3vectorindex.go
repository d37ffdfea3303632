// Package s3vectorindex is the knowledge.VectorIndex of Amazon S3
// Vectors: one vector index (cosine, knowledge.Dimensions) holds every
// knowledge base's chunks, keyed <documentId>:<chunk>, with the
// knowledge base's id as filterable metadata ("kb"), so that a query
// filters to one knowledge base.
package s3vectorindex

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3vectors"
	"github.com/aws/aws-sdk-go-v2/service/s3vectors/document"
	"github.com/aws/aws-sdk-go-v2/service/s3vectors/types"
	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/knowledge"
)

// Limits of the S3 Vectors API.
const (
	// MaxBatch is the most vectors one PutVectors and the most keys one
	// DeleteVectors takes.
	MaxBatch = 500
	// MaxTopK is the most results one QueryVectors answers.
	MaxTopK = 100
)

// Options configure an Index.
type Options struct {
	// Bucket and Index name the vector bucket and index; an Index that
	// is an ARN (what the stack passes) names both.
	Bucket, Index, Region string
	// Endpoint overrides S3 Vectors' (tests).
	Endpoint string
	// Credentials override the AWS environment's (tests).
	Credentials aws.CredentialsProvider
}

// Index is the S3 Vectors index.
type Index struct {
	// client returns the client, made at the first call.
	client func() (*s3vectors.Client, error)
	// bucket and index name the index; arn does instead when set.
	bucket, index, arn *string
}

// New returns an Index. With a region given, the AWS configuration (the
// SDK's default chain: credentials, AWS_ENDPOINT_URL_S3VECTORS) is
// loaded at the first call, not here, so that a cold start that makes
// none does not pay for it, and a failure to load it fails that call
// (Unavailable). Without one, it is loaded here, and New fails when it
// cannot be loaded or names no region.
func New(ctx context.Context, o Options) (*Index, error) {
	opt := func(co *s3vectors.Options) {
		if o.Endpoint != "" {
			co.BaseEndpoint = aws.String(o.Endpoint)
		}
	}
	x := &Index{bucket: aws.String(o.Bucket), index: aws.String(o.Index)}
	if strings.HasPrefix(o.Index, "arn:") {
		x.bucket, x.index, x.arn = nil, nil, aws.String(o.Index)
	}
	if o.Credentials != nil {
		c := s3vectors.New(s3vectors.Options{Region: o.Region, Credentials: o.Credentials}, opt)
		x.client = func() (*s3vectors.Client, error) { return c, nil }
		return x, nil
	}
	load := func() (*s3vectors.Client, error) {
		var loaders []func(*awsconfig.LoadOptions) error
		if o.Region != "" {
			loaders = append(loaders, awsconfig.WithRegion(o.Region))
		}
		cfg, err := awsconfig.LoadDefaultConfig(context.WithoutCancel(ctx), loaders...)
		if err != nil {
			return nil, fmt.Errorf("s3vectorindex: load AWS config: %w", err)
		}
		if cfg.Region == "" {
			return nil, fmt.Errorf("s3vectorindex: no AWS region configured")
		}
		return s3vectors.NewFromConfig(cfg, opt), nil
	}
	if o.Region != "" {
		x.client = sync.OnceValues(load)
		return x, nil
	}
	c, err := load()
	if err != nil {
		return nil, err
	}
	x.client = func() (*s3vectors.Client, error) { return c, nil }
	return x, nil
}

func unavailable(op string, err error) error {
	return errs.E(op, errs.Unavailable, "VECTORS_UNAVAILABLE", "the vector index could not be reached; retry shortly").WithCause(err)
}

// PutDocument writes the vectors in batches of MaxBatch, 4 at once.
// PutVectors overwrites a key that exists, so a retried attempt writes
// the same keys again.
func (x *Index) PutDocument(ctx context.Context, kbID, docID string, vectors [][]float32) error {
	const op = "s3vectorindex.PutDocument"
	client, err := x.client()
	if err != nil {
		return unavailable(op, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for first := 0; first < len(vectors); first += MaxBatch {
		last := min(first+MaxBatch, len(vectors))
		g.Go(func() error {
			batch := make([]types.PutInputVector, 0, last-first)
			for i := first; i < last; i++ {
				batch = append(batch, types.PutInputVector{Key: aws.String(knowledge.ChunkID(docID, i)),
					Data:     &types.VectorDataMemberFloat32{Value: vectors[i]},
					Metadata: document.NewLazyDocument(map[string]any{"kb": kbID, "doc": docID})})
			}
			_, err := client.PutVectors(gctx, &s3vectors.PutVectorsInput{VectorBucketName: x.bucket, IndexName: x.index, IndexArn: x.arn, Vectors: batch})
			if err != nil {
				return unavailable(op, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// Query asks for the nearest topK (at most MaxTopK) of kbID's vectors.
func (x *Index) Query(ctx context.Context, kbID string, q []float32, topK int) ([]knowledge.Match, error) {
	const op = "s3vectorindex.Query"
	client, err := x.client()
	if err != nil {
		return nil, unavailable(op, err)
	}
	k := int32(min(max(topK, 1), MaxTopK))
	res, err := client.QueryVectors(ctx, &s3vectors.QueryVectorsInput{VectorBucketName: x.bucket, IndexName: x.index, IndexArn: x.arn,
		QueryVector: &types.VectorDataMemberFloat32{Value: q}, TopK: &k, ReturnDistance: true,
		Filter: document.NewLazyDocument(map[string]any{"kb": map[string]any{"$eq": kbID}})})
	if err != nil {
		return nil, unavailable(op, err)
	}
	out := make([]knowledge.Match, 0, len(res.Vectors))
	for _, v := range res.Vectors {
		doc, i, ok := knowledge.ParseChunkID(aws.ToString(v.Key))
		if !ok {
			continue
		}
		// Cosine distance: similarity is 1 - distance.
		out = append(out, knowledge.Match{DocumentID: doc, Chunk: i, Score: 1 - aws.ToFloat32(v.Distance)})
	}
	return out, nil
}

// DeleteDocument deletes the count keys of docID in batches of MaxBatch
// (deleting keys that are not there succeeds).
func (x *Index) DeleteDocument(ctx context.Context, kbID, docID string, count int) error {
	const op = "s3vectorindex.DeleteDocument"
	client, err := x.client()
	if err != nil {
		return unavailable(op, err)
	}
	for first := 0; first < count; first += MaxBatch {
		keys := make([]string, 0, MaxBatch)
		for i := first; i < min(first+MaxBatch, count); i++ {
			keys = append(keys, knowledge.ChunkID(docID, i))
		}
		if _, err := client.DeleteVectors(ctx, &s3vectors.DeleteVectorsInput{VectorBucketName: x.bucket, IndexName: x.index, IndexArn: x.arn, Keys: keys}); err != nil {
			return unavailable(op, err)
		}
	}
	return nil
}

var _ knowledge.VectorIndex = (*Index)(nil)
