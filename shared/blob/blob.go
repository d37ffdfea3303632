// Package blob is the service's store of values too large for a DynamoDB
// item (tool results, step inputs and outputs, a paused reply's state)
// and of users' files (attachments). The item keeps the key; the bytes
// live here.
//
// One interface, Store, and three backends: S3 in AWS (package s3blob, the
// only code that imports the S3 SDK), a folder on disk (NewFolder; the dev
// server keeps it beside DATA_FILE) and memory (NewMemory; the dev server
// without DATA_FILE, and tests). The folder and memory backends become
// Stores through Local, which signs upload and download URLs itself and
// serves them (Local.Handler) the way S3 serves presigned URLs, so that a
// browser uploads to the dev server exactly as it would to S3. The same
// contract tests (package blobtest) run on every backend.
//
// # Keys
//
// Callers choose keys: slash-separated segments of letters, digits and
// . _ = - (each starting with a letter or digit), at most MaxKeyLen
// bytes (CheckKey). The first segment names the kind of data, which
// decides how long S3 keeps it (Kinds, and the bucket's lifecycle rules in
// template.yaml):
//
//	uploads/...      presigned uploads not yet checked: expire after 1 day
//	runs/<runId>/... a workflow run's values: kept as long as the run
//	chats/<chatId>/... a chat's reply values: kept as long as the chat
//	attachments/...  checked attachments: kept until deleted
//	calls/...        tool inputs and results in transit: expire after 1 day
//
// Kept kinds are deleted by their owner's delete (Delete, DeletePrefix);
// expiring kinds also go on their own, S3 lifecycle deletion being lazy
// (a day or two), so readers that care check their own expiry.
package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// Store keeps blobs under caller-chosen keys and signs URLs that let a
// client without credentials download or upload one blob directly. Every
// method fails with an errs.Error: Invalid INVALID_BLOB_KEY for a malformed
// key, NotFound BLOB_NOT_FOUND for a missing blob where one is needed,
// Unavailable BLOB_STORE_UNAVAILABLE when the backend cannot be reached
// (retrying may help), Internal otherwise.
type Store interface {
	Backend
	// PresignGet returns a URL that lets anyone holding it GET the blob
	// at key, with no other credential, until ttl has passed. The URL is
	// signed, not checked: it answers 404 (S3: 403 or 404) once the blob
	// is gone. Invalid INVALID_TTL unless MinTTL <= ttl <= MaxTTL.
	PresignGet(ctx context.Context, key string, ttl time.Duration) (Presigned, error)
	// PresignPut returns a URL that lets anyone holding it PUT one blob
	// at key, until ttl has passed: the request must carry the returned
	// Headers (the content type, and If-None-Match: * with o.CreateOnly)
	// and a body of exactly o.Size bytes (the signature covers them;
	// anything else is refused with 403). With o.CreateOnly the PUT fails
	// with 412 while a blob is at key, so putting any blob there (a
	// tombstone) makes the URL useless. Invalid INVALID_TTL,
	// INVALID_BLOB_SIZE.
	PresignPut(ctx context.Context, key string, o PutOptions, ttl time.Duration) (Presigned, error)
}

// Backend is a Store without presigned URLs: the blob operations proper.
// Memory and Folder implement it, and Local makes them Stores.
type Backend interface {
	// Put stores o.Size bytes read from body under key, replacing any blob
	// there (with o.CreateOnly: Conflict BLOB_EXISTS when there is one,
	// decided atomically), and returns what was stored. The body must
	// hold exactly o.Size bytes: Invalid BLOB_SIZE_MISMATCH otherwise, and
	// nothing is stored. o.ContentType defaults to
	// application/octet-stream.
	Put(ctx context.Context, key string, body io.Reader, o PutOptions) (Info, error)
	// Get opens the blob at key. The caller closes the body. NotFound.
	Get(ctx context.Context, key string) (*Object, error)
	// Stat describes the blob at key without reading it. NotFound.
	Stat(ctx context.Context, key string) (Info, error)
	// Copy copies the blob at src to dst, replacing any blob there.
	// With o.IfMatch, only when src's ETag is o.IfMatch: Conflict
	// BLOB_CHANGED otherwise. NotFound when src is missing.
	Copy(ctx context.Context, src, dst string, o CopyOptions) (Info, error)
	// Delete removes the blobs at keys. Missing blobs are not an error.
	Delete(ctx context.Context, keys ...string) error
	// DeletePrefix removes every blob whose key starts with prefix (a
	// valid key or a valid key followed by "/") and returns how many it
	// removed.
	DeletePrefix(ctx context.Context, prefix string) (int, error)
}

// PutOptions describe a blob to store.
type PutOptions struct {
	// ContentType is the blob's media type; empty means
	// application/octet-stream.
	ContentType string
	// Size is the blob's length in bytes, 0 to MaxSize.
	Size int64
	// CreateOnly makes the write fail while a blob is at the key
	// (If-None-Match: * in S3's terms).
	CreateOnly bool
}

// CopyOptions condition a Copy.
type CopyOptions struct {
	// IfMatch, when set, is the ETag the source must have.
	IfMatch string
}

// Info describes a stored blob.
type Info struct {
	Key         string
	Size        int64
	ContentType string
	// ETag identifies the blob's content: equal contents have equal
	// ETags, and a changed blob has another one. Opaque (S3 quotes it).
	ETag         string
	LastModified time.Time
}

// Object is an open blob.
type Object struct {
	Info
	// Body reads the blob's bytes; the caller closes it.
	Body io.ReadCloser
}

// Presigned is a signed URL and how to use it.
type Presigned struct {
	URL    string `json:"url"`
	Method string `json:"method"`
	// Headers are the request headers the client must send with exactly
	// these values (for a PUT: Content-Type). Content-Length is not among
	// them: a browser sets it from the body, which must be exactly the
	// signed size.
	Headers   map[string]string `json:"headers,omitempty"`
	ExpiresAt time.Time         `json:"expiresAt"`
}

// Bounds.
const (
	// MaxKeyLen bounds a key, in bytes.
	MaxKeyLen = 512
	// MaxSize bounds one blob: 5 GiB, S3's limit for a single PUT.
	MaxSize = 5 << 30
	// MinTTL and MaxTTL bound a presigned URL's lifetime. S3 allows up
	// to 7 days, but the bucket's policy refuses signatures older than
	// an hour (template.yaml), so a leaked URL is short-lived whatever
	// the code asks; and a URL signed with a Lambda role's temporary
	// credentials dies with them anyway.
	MinTTL = time.Second
	MaxTTL = time.Hour
)

// DefaultContentType is the content type of a blob stored without one.
const DefaultContentType = "application/octet-stream"

// The key prefixes, one per kind of data (see the package comment and
// Kinds).
const (
	PrefixUploads     = "uploads/"
	PrefixRuns        = "runs/"
	PrefixChats       = "chats/"
	PrefixAttachments = "attachments/"
	PrefixCalls       = "calls/"
	// PrefixKnowledge holds knowledge base documents' segments (their
	// chunks), deleted with the document or its knowledge base.
	PrefixKnowledge = "knowledge/"
	PrefixExports   = "exports/"
)

// Kind is one kind of data in the store: its key prefix and how many days
// S3 keeps a blob of it after its creation (0: until it is deleted).
// template.yaml's lifecycle rules are checked against Kinds.
type Kind struct {
	Prefix      string
	ExpiresDays int
	// What says what the kind holds.
	What string
}

// Kinds are every kind of data the store holds.
var Kinds = []Kind{
	{PrefixUploads, 1, "presigned uploads (attachments) waiting to be checked; a checked upload is copied to attachments/ and deleted"},
	{PrefixRuns, 0, "workflow runs' inputs, step inputs and outputs; deleted with the run"},
	{PrefixChats, 0, "chat replies' values (tool results, a paused reply's state); deleted with the chat"},
	{PrefixAttachments, 0, "checked attachments; deleted with the attachment or its chat"},
	{PrefixCalls, 1, "tool inputs and results passed by reference between the service and the tool server; deleted after the call"},
	{PrefixKnowledge, 0, "knowledge base documents' chunks (segments); deleted with the document or its knowledge base"},
	{PrefixExports, 7, "users' data exports (zips downloaded through a presigned URL); deleted with the account"},
}

// Error codes.
const (
	CodeInvalidKey  = "INVALID_BLOB_KEY"
	CodeNotFound    = "BLOB_NOT_FOUND"
	CodeChanged     = "BLOB_CHANGED"
	CodeExists      = "BLOB_EXISTS"
	CodeSize        = "BLOB_SIZE_MISMATCH"
	CodeTooLarge    = "BLOB_TOO_LARGE"
	CodeInvalidSize = "INVALID_BLOB_SIZE"
	CodeInvalidTTL  = "INVALID_TTL"
	CodeUnavailable = "BLOB_STORE_UNAVAILABLE"
)

// NotFound returns the NotFound error of the blob at key.
func NotFound(op, key string) error {
	return errs.E(op, errs.NotFound, CodeNotFound, "no blob at "+key)
}

// Changed returns the Conflict error of a conditional copy whose source
// changed.
func Changed(op, key string) error {
	return errs.E(op, errs.Conflict, CodeChanged, "the blob at "+key+" changed")
}

// Exists returns the Conflict error of a create-only write over a blob.
func Exists(op, key string) error {
	return errs.E(op, errs.Conflict, CodeExists, "a blob is already at "+key)
}

// SizeMismatch returns the Invalid error of a body that does not hold the
// declared size.
func SizeMismatch(op string, want int64) error {
	return errs.E(op, errs.Invalid, CodeSize, fmt.Sprintf("the body does not hold exactly %d bytes", want))
}

// CheckKey fails with Invalid INVALID_BLOB_KEY unless key is a valid key:
// 1 to MaxKeyLen bytes of slash-separated segments, each made of ASCII
// letters, digits, '.', '_', '=' and '-' and starting with a letter or a
// digit (so no empty, "." or ".." segment, no leading or trailing slash,
// nothing a path or URL would read differently).
func CheckKey(key string) error {
	if err := checkKey(key, false); err != nil {
		return errs.E("blob.CheckKey", errs.Invalid, CodeInvalidKey, err.Error())
	}
	return nil
}

// CheckPrefix fails with Invalid INVALID_BLOB_KEY unless prefix is a valid
// key, or a valid key followed by one "/".
func CheckPrefix(prefix string) error {
	if err := checkKey(strings.TrimSuffix(prefix, "/"), true); err != nil {
		return errs.E("blob.CheckPrefix", errs.Invalid, CodeInvalidKey, err.Error())
	}
	return nil
}

func checkKey(key string, prefix bool) error {
	what := "key"
	if prefix {
		what = "prefix"
	}
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("a blob %s has 1 to %d bytes", what, MaxKeyLen)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || !isAlnum(seg[0]) {
			return fmt.Errorf("blob %s %q: every segment starts with a letter or a digit", what, key)
		}
		for i := 1; i < len(seg); i++ {
			if c := seg[i]; !isAlnum(c) && c != '.' && c != '_' && c != '=' && c != '-' {
				return fmt.Errorf("blob %s %q: segments hold only letters, digits, '.', '_', '=' and '-'", what, key)
			}
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// checkTTL fails with Invalid INVALID_TTL unless MinTTL <= ttl <= MaxTTL.
func checkTTL(op string, ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return errs.E(op, errs.Invalid, CodeInvalidTTL, fmt.Sprintf("a presigned URL lives from %s to %s, got %s", MinTTL, MaxTTL, ttl))
	}
	return nil
}

// CheckTTL is checkTTL for the backends outside this package.
func CheckTTL(op string, ttl time.Duration) error { return checkTTL(op, ttl) }

// CheckSize fails with Invalid INVALID_BLOB_SIZE unless 0 <= size <=
// MaxSize.
func CheckSize(op string, size int64) error {
	if size < 0 || size > MaxSize {
		return errs.E(op, errs.Invalid, CodeInvalidSize, fmt.Sprintf("a blob holds 0 to %d bytes, got %d", int64(MaxSize), size))
	}
	return nil
}

// ContentTypeOr returns ct, or DefaultContentType when ct is empty.
func ContentTypeOr(ct string) string {
	if ct == "" {
		return DefaultContentType
	}
	return ct
}

// PutBytes stores data under key with the given content type.
func PutBytes(ctx context.Context, s Backend, key string, data []byte, contentType string) (Info, error) {
	return s.Put(ctx, key, bytes.NewReader(data), PutOptions{ContentType: contentType, Size: int64(len(data))})
}

// ReadAll returns the bytes of the blob at key and its Info, when it holds
// at most max bytes: TooLarge BLOB_TOO_LARGE otherwise (nothing is read).
// NotFound.
func ReadAll(ctx context.Context, s Backend, key string, max int64) ([]byte, Info, error) {
	const op = "blob.ReadAll"
	obj, err := s.Get(ctx, key)
	if err != nil {
		return nil, Info{}, errs.Wrap(op, err)
	}
	defer obj.Body.Close()
	if obj.Size > max {
		return nil, obj.Info, errs.E(op, errs.TooLarge, CodeTooLarge, fmt.Sprintf("the blob holds %d bytes, more than the %d allowed here", obj.Size, max))
	}
	// Read into one buffer of the blob's size: io.ReadAll grows its
	// buffer by doubling, up to twice a large value's size in garbage.
	// A byte past the size is read for, to tell a body that is longer.
	data := make([]byte, obj.Size+1) // obj.Size <= max, checked above
	n, err := io.ReadFull(obj.Body, data)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, obj.Info, errs.Wrap(op, readError(err))
	}
	data = data[:n:n]
	if int64(len(data)) != obj.Size {
		return nil, obj.Info, errs.E(op, errs.Internal, "", "internal error").
			WithCause(fmt.Errorf("blob %s: read %d bytes, its size is %d", key, len(data), obj.Size))
	}
	return data, obj.Info, nil
}

// readError wraps a failure reading a blob's body as Unavailable.
func readError(err error) error {
	return errs.E("blob.read", errs.Unavailable, CodeUnavailable, "the blob store is temporarily unavailable; retry shortly").WithCause(err)
}
