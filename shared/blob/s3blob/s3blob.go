// Package s3blob is the blob.Store of AWS: one S3 bucket (BLOB_BUCKET),
// through aws-sdk-go-v2's S3 client and its presign client. It is the only
// package that imports the S3 SDK.
//
// Server-side encryption is the bucket's default (SSE-S3, set in
// template.yaml): requests name no key, so the bucket decides. Presigned
// PUTs are signed with the Content-Type and Content-Length, so S3 refuses
// (403) an upload of another type or size.
package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
)

// Store is the blob.Store of one S3 bucket.
type Store struct {
	client  *s3.Client
	presign *s3.PresignClient
	bucket  string
	now     func() time.Time
}

// Options configure Open.
type Options struct {
	// Bucket is the bucket's name (BLOB_BUCKET). Required.
	Bucket string
	// Region is the bucket's region (AWS_REGION).
	Region string
	// Endpoint, when set, is an S3-compatible endpoint (a fake server in
	// tests) reached with static dummy credentials and path-style
	// addressing. Empty means AWS with the default credential chain.
	Endpoint string
	// HTTPClient, when set, replaces the SDK's HTTP client.
	HTTPClient *http.Client
}

// bufferLimit is the largest body Put reads into memory when it is not
// seekable. The SDK signs a seekable body's payload; an unseekable one
// can only be streamed over TLS with a trailing checksum, which is what a
// larger body gets.
const bufferLimit = 64 << 20

// Open returns the Store of o.Bucket. It fails when the bucket is not
// named or the AWS configuration cannot be loaded.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Bucket == "" {
		return nil, errors.New("s3blob: no bucket (BLOB_BUCKET)")
	}
	var cfg aws.Config
	if o.Endpoint == "" {
		var err error
		if cfg, err = awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(o.Region)); err != nil {
			return nil, fmt.Errorf("s3blob: load AWS config: %w", err)
		}
	} else {
		cfg = aws.Config{Region: o.Region, Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if o.HTTPClient != nil {
		cfg.HTTPClient = o.HTTPClient
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
			so.UsePathStyle = true
		}
	})
	return New(client, o.Bucket, nil), nil
}

// New returns the Store of bucket through client; now (nil: time.Now)
// dates the presigned URLs' expiries.
func New(client *s3.Client, bucket string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{client: client, presign: s3.NewPresignClient(client), bucket: bucket, now: now}
}

// Bucket returns the bucket's name.
func (s *Store) Bucket() string { return s.bucket }

// Put implements blob.Store.Put.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, o blob.PutOptions) (blob.Info, error) {
	const op = "s3blob.Put"
	if err := blob.CheckKey(key); err != nil {
		return blob.Info{}, errs.Wrap(op, err)
	}
	if err := blob.CheckSize(op, o.Size); err != nil {
		return blob.Info{}, err
	}
	rs, err := seekable(body, o.Size)
	if err != nil {
		return blob.Info{}, errs.Wrap(op, err)
	}
	ct := blob.ContentTypeOr(o.ContentType)
	in := &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), Body: rs, ContentLength: aws.Int64(o.Size), ContentType: aws.String(ct),
	}
	if o.CreateOnly {
		in.IfNoneMatch = aws.String("*")
	}
	out, err := s.client.PutObject(ctx, in)
	if err != nil {
		if o.CreateOnly && isPreconditionFailed(err) {
			return blob.Info{}, blob.Exists(op, key)
		}
		return blob.Info{}, s3Error(op, key, err)
	}
	return blob.Info{Key: key, Size: o.Size, ContentType: ct, ETag: aws.ToString(out.ETag), LastModified: s.now().UTC()}, nil
}

// seekable returns body as a reader of exactly size bytes that the SDK
// can sign: a seekable body is checked for its remaining length, a small
// unseekable one is read into memory, a large one is streamed through a
// check of its length.
func seekable(body io.Reader, size int64) (io.Reader, error) {
	const op = "s3blob.seekable"
	if rs, ok := body.(io.ReadSeeker); ok {
		cur, err := rs.Seek(0, io.SeekCurrent)
		if err == nil {
			end, err := rs.Seek(0, io.SeekEnd)
			if err == nil {
				if _, err := rs.Seek(cur, io.SeekStart); err == nil {
					if end-cur != size {
						return nil, blob.SizeMismatch(op, size)
					}
					return io.NewSectionReader(readerAt{rs, cur}, 0, size), nil
				}
			}
		}
	}
	if size <= bufferLimit {
		buf := bytes.NewBuffer(make([]byte, 0, size))
		if _, err := blob.CopyExactly(buf, body, size); err != nil {
			return nil, err
		}
		return bytes.NewReader(buf.Bytes()), nil
	}
	return &exactReader{r: body, left: size, size: size}, nil
}

// readerAt adapts a ReadSeeker whose data starts at base to io.ReaderAt
// for io.NewSectionReader (which the SDK can seek to retry).
type readerAt struct {
	rs   io.ReadSeeker
	base int64
}

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	if _, err := r.rs.Seek(r.base+off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.ReadFull(r.rs, p)
}

// exactReader fails a stream that is longer or shorter than left.
type exactReader struct {
	r          io.Reader
	left, size int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left == 0 {
		var one [1]byte
		if k, _ := io.ReadFull(e.r, one[:]); k > 0 {
			return 0, blob.SizeMismatch("s3blob.exactReader", e.size)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) && e.left > 0 {
		return n, io.ErrUnexpectedEOF
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// Get implements blob.Store.Get. S3 answers a missing key 404 (NotFound)
// only to a role allowed s3:ListBucket on the bucket with no s3:prefix
// condition (the request has no prefix to match), and 403 AccessDenied,
// an Internal error here, to any other: template.yaml grants it to every
// function that reads keys that may be missing. Stat and Copy likewise.
func (s *Store) Get(ctx context.Context, key string) (*blob.Object, error) {
	const op = "s3blob.Get"
	if err := blob.CheckKey(key); err != nil {
		return nil, errs.Wrap(op, err)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, s3Error(op, key, err)
	}
	return &blob.Object{Info: blob.Info{Key: key, Size: aws.ToInt64(out.ContentLength), ContentType: aws.ToString(out.ContentType),
		ETag: aws.ToString(out.ETag), LastModified: aws.ToTime(out.LastModified).UTC()}, Body: out.Body}, nil
}

// Stat implements blob.Store.Stat.
func (s *Store) Stat(ctx context.Context, key string) (blob.Info, error) {
	const op = "s3blob.Stat"
	if err := blob.CheckKey(key); err != nil {
		return blob.Info{}, errs.Wrap(op, err)
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return blob.Info{}, s3Error(op, key, err)
	}
	return blob.Info{Key: key, Size: aws.ToInt64(out.ContentLength), ContentType: aws.ToString(out.ContentType),
		ETag: aws.ToString(out.ETag), LastModified: aws.ToTime(out.LastModified).UTC()}, nil
}

// Copy implements blob.Store.Copy: a server-side CopyObject, conditioned
// on the source's ETag (x-amz-copy-source-if-match) when o.IfMatch is
// set. The source is read first (HeadObject), for its metadata and for a
// clear NotFound or Conflict.
func (s *Store) Copy(ctx context.Context, src, dst string, o blob.CopyOptions) (blob.Info, error) {
	const op = "s3blob.Copy"
	if err := blob.CheckKey(dst); err != nil {
		return blob.Info{}, errs.Wrap(op, err)
	}
	info, err := s.Stat(ctx, src)
	if err != nil {
		return blob.Info{}, errs.Wrap(op, err)
	}
	if o.IfMatch != "" && info.ETag != o.IfMatch {
		return blob.Info{}, blob.Changed(op, src)
	}
	in := &s3.CopyObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(dst), CopySource: aws.String(s.bucket + "/" + url.PathEscape(src)),
		MetadataDirective: types.MetadataDirectiveCopy,
	}
	if o.IfMatch != "" {
		in.CopySourceIfMatch = aws.String(o.IfMatch)
	}
	out, err := s.client.CopyObject(ctx, in)
	if err != nil {
		if isPreconditionFailed(err) {
			return blob.Info{}, blob.Changed(op, src)
		}
		return blob.Info{}, s3Error(op, src, err)
	}
	info.Key, info.LastModified = dst, s.now().UTC()
	if out.CopyObjectResult != nil {
		if e := aws.ToString(out.CopyObjectResult.ETag); e != "" {
			info.ETag = e
		}
		if t := out.CopyObjectResult.LastModified; t != nil {
			info.LastModified = t.UTC()
		}
	}
	return info, nil
}

// maxDeleteBatch is how many keys one DeleteObjects takes.
const maxDeleteBatch = 1000

// Delete implements blob.Store.Delete with DeleteObjects (IAM:
// s3:DeleteObject), up to 1000 keys a call.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	const op = "s3blob.Delete"
	for _, k := range keys {
		if err := blob.CheckKey(k); err != nil {
			return errs.Wrap(op, err)
		}
	}
	for len(keys) > 0 {
		n := min(len(keys), maxDeleteBatch)
		objs := make([]types.ObjectIdentifier, n)
		for i, k := range keys[:n] {
			objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(s.bucket),
			Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}})
		if err != nil {
			return s3Error(op, keys[0], err)
		}
		for _, e := range out.Errors {
			if c := aws.ToString(e.Code); c != "NoSuchKey" {
				return errs.E(op, errs.Internal, "", "internal error").
					WithCause(fmt.Errorf("delete %s: %s: %s", aws.ToString(e.Key), c, aws.ToString(e.Message)))
			}
		}
		keys = keys[n:]
	}
	return nil
}

// DeletePrefix implements blob.Store.DeletePrefix: ListObjectsV2 under
// prefix (IAM: s3:ListBucket on the bucket), a page of at most 1000
// keys at a time, each page deleted by Delete.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	const op = "s3blob.DeletePrefix"
	if err := blob.CheckPrefix(prefix); err != nil {
		return 0, errs.Wrap(op, err)
	}
	n := 0
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, s3Error(op, prefix, err)
		}
		keys := make([]string, 0, len(page.Contents))
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if err := s.Delete(ctx, keys...); err != nil {
			return n, errs.Wrap(op, err)
		}
		n += len(keys)
	}
	return n, nil
}

// PresignGet implements blob.Store.PresignGet.
func (s *Store) PresignGet(ctx context.Context, key string, ttl time.Duration) (blob.Presigned, error) {
	const op = "s3blob.PresignGet"
	if err := blob.CheckKey(key); err != nil {
		return blob.Presigned{}, errs.Wrap(op, err)
	}
	if err := blob.CheckTTL(op, ttl); err != nil {
		return blob.Presigned{}, err
	}
	exp := s.now().Add(ttl).UTC()
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return blob.Presigned{}, s3Error(op, key, err)
	}
	return blob.Presigned{URL: req.URL, Method: req.Method, Headers: clientHeaders(req.SignedHeader), ExpiresAt: exp}, nil
}

// PresignPut implements blob.Store.PresignPut: the signature covers
// Content-Type and Content-Length, and If-None-Match with o.CreateOnly
// (S3's conditional write: 412 while an object is at the key).
func (s *Store) PresignPut(ctx context.Context, key string, o blob.PutOptions, ttl time.Duration) (blob.Presigned, error) {
	const op = "s3blob.PresignPut"
	if err := blob.CheckKey(key); err != nil {
		return blob.Presigned{}, errs.Wrap(op, err)
	}
	if err := blob.CheckTTL(op, ttl); err != nil {
		return blob.Presigned{}, err
	}
	if err := blob.CheckSize(op, o.Size); err != nil {
		return blob.Presigned{}, err
	}
	exp := s.now().Add(ttl).UTC()
	in := &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), ContentType: aws.String(blob.ContentTypeOr(o.ContentType)),
		ContentLength: aws.Int64(o.Size),
	}
	if o.CreateOnly {
		in.IfNoneMatch = aws.String("*")
	}
	req, err := s.presign.PresignPutObject(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return blob.Presigned{}, s3Error(op, key, err)
	}
	return blob.Presigned{URL: req.URL, Method: req.Method, Headers: clientHeaders(req.SignedHeader), ExpiresAt: exp}, nil
}

// clientHeaders are the signed headers a client must set itself: all but
// Host and Content-Length, which an HTTP client (a browser above all)
// sets from the URL and the body.
func clientHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if strings.EqualFold(k, "Host") || strings.EqualFold(k, "Content-Length") || len(v) == 0 {
			continue
		}
		out[http.CanonicalHeaderKey(k)] = strings.Join(v, ",")
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// isPreconditionFailed reports a failed conditional request (412).
func isPreconditionFailed(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "PreconditionFailed" {
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusPreconditionFailed
}

// s3Error classifies an S3 failure on key: NotFound for a missing object
// (NoSuchKey, or HeadObject's bodiless 404), Unavailable for what a
// later retry may fix (throttling, 5xx, a failed connection), Internal
// for the rest (e.g. AccessDenied: a deployment error). The cause is kept
// for logs.
func s3Error(op, key string, err error) error {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	var re *awshttp.ResponseError
	switch {
	case errors.As(err, &nsk), errors.As(err, &nf), errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound && !isNoSuchBucket(err):
		return errs.Wrap(op, blob.NotFound(op, key))
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return &errs.Error{Op: op, Kind: errs.Unavailable, Code: blob.CodeUnavailable, Message: "the request was cancelled", Err: err}
	case retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary:
		e := errs.E(op, errs.Unavailable, blob.CodeUnavailable, "the blob store is temporarily unavailable; retry shortly").WithCause(err)
		e.RetryAfter = 1
		return e
	}
	return &errs.Error{Op: op, Kind: errs.Internal, Err: err}
}

func isNoSuchBucket(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket"
}

var _ blob.Store = (*Store)(nil)
