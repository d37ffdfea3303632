// Package attachment is the files users attach to chats: a client asks
// for an upload (POST /api/chats/{chatId}/attachments with the file's
// name, type and size), PUTs the bytes straight to the presigned URL it
// gets (S3 in AWS, the dev server's own signed URL locally), and the
// attachment becomes ready once the bytes are there and are what was
// declared. Messages and workflow runs then read ready attachments
// (Service.Ready, Service.ReadyByID, Service.Open, Service.Text).
//
// Lifecycle (docs/decisions.md, Attachments):
//
//   - pending: created with an upload URL valid UploadTTL. Its declared
//     size counts against the user's storage quota (USER_STORAGE_QUOTA)
//     from creation, atomically with the create.
//   - ready: the upload was checked (size, and the content against the
//     declared type: PNG, JPEG, WebP and PDF signatures, UTF-8 text, JSON
//     that parses) and copied where no upload URL can reach it. The check
//     runs when the attachment is next read (its GET, or a message or run
//     that uses it), not on a notification.
//   - failed: the upload did not match (with a reason), or none arrived
//     before the upload URL expired (plus UploadGrace for an upload in
//     flight). A failed attachment holds no quota.
//
// Blobs: the upload goes to uploads/<userId>/<id> through a create-only
// URL (If-None-Match: *); the checked copy lives at
// attachments/<userId>/<id> until the attachment or its chat is deleted.
// Once the attachment is settled or deleted its upload key holds a
// tombstone, an empty blob, so the upload URL answers 412 for the rest of
// its life: nothing lands after a settle or a delete. Everything under
// uploads/ expires after a day (the bucket's lifecycle), so an upload
// nobody reads and the tombstones go away by themselves.
package attachment

import (
	"fmt"
	"mime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

// Bounds and lifetimes.
const (
	// MaxSize is the largest attachment: 25 MiB.
	MaxSize = 25 << 20
	// MaxNameLen bounds a name, in characters.
	MaxNameLen = 255
	// UploadTTL is how long an upload URL works.
	UploadTTL = 15 * time.Minute
	// UploadGrace is how long after the upload URL's expiry an upload
	// that started in time may still arrive before the attachment fails.
	UploadGrace = 10 * time.Minute
	// DownloadTTL is how long a download URL works.
	DownloadTTL = 15 * time.Minute
)

// Status is an attachment's state.
type Status string

// The statuses.
const (
	StatusPending Status = "pending"
	StatusReady   Status = "ready"
	StatusFailed  Status = "failed"
)

// Types are the content types an attachment may have.
var Types = []string{
	"text/plain", "text/markdown", "text/csv", "application/json",
	"application/pdf", "image/png", "image/jpeg", "image/webp",
}

// IsText reports whether ct is a text-like type: its bytes are UTF-8
// text a model can read as context.
func IsText(ct string) bool { return strings.HasPrefix(ct, "text/") || ct == "application/json" }

// IsImage reports whether ct is an image type.
func IsImage(ct string) bool { return strings.HasPrefix(ct, "image/") }

// Error codes.
const (
	CodeNotFound      = "ATTACHMENT_NOT_FOUND"
	CodeNotReady      = "ATTACHMENT_NOT_READY"
	CodeFailed        = "ATTACHMENT_FAILED"
	CodeTooLarge      = "ATTACHMENT_TOO_LARGE"
	CodeQuotaExceeded = "QUOTA_EXCEEDED"
	CodeChanged       = "ATTACHMENT_CHANGED"
)

// Attachment is a file attached to a chat. The JSON fields are the API's;
// the others are the service's own.
type Attachment struct {
	ID          string    `json:"id"`
	ChatID      string    `json:"chatId"`
	Name        string    `json:"name"`
	ContentType string    `json:"contentType"`
	Size        int64     `json:"size"`
	Status      Status    `json:"status"`
	Reason      string    `json:"reason,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`

	// UploadURL, UploadHeaders and ExpiresAt (the upload URL's expiry)
	// answer the create; ExpiresAt also tells a pending attachment's
	// deadline.
	UploadURL     string            `json:"uploadUrl,omitempty"`
	UploadHeaders map[string]string `json:"uploadHeaders,omitempty"`
	ExpiresAt     *time.Time        `json:"expiresAt,omitempty"`
	// DownloadURL (valid DownloadTTL, until DownloadExpiresAt) comes with
	// a ready attachment.
	DownloadURL       string     `json:"downloadUrl,omitempty"`
	DownloadExpiresAt *time.Time `json:"downloadExpiresAt,omitempty"`

	// UserID owns the attachment (the chat's owner).
	UserID string `json:"-"`
	// UploadExpires is when the upload URL expires.
	UploadExpires time.Time `json:"-"`
	// Charged is the bytes counted against the owner's quota: Size while
	// pending or ready, 0 once failed.
	Charged int64 `json:"-"`
	// ETag identifies the checked bytes (ready).
	ETag string `json:"-"`
	// Deleting is set once a delete has begun.
	Deleting bool `json:"-"`
}

// UploadKey is the blob key the upload URL writes.
func UploadKey(userID, id string) string { return blob.PrefixUploads + userID + "/" + id }

// Key is the blob key of the checked bytes.
func Key(userID, id string) string { return blob.PrefixAttachments + userID + "/" + id }

// CreateRequest is the body of POST /api/chats/{chatId}/attachments.
type CreateRequest struct {
	Name        string `json:"name"`
	ContentType string `json:"contentType"`
	// Size is the file's length in bytes (a pointer: absent is an error).
	Size *int64 `json:"size"`
}

// validated is a CreateRequest after validate.
type validated struct {
	name, contentType string
	size              int64
}

// validate checks the request in the order the API reports problems:
// missing or malformed fields (400 VALIDATION_FAILED with details), then
// a type not accepted (415 UNSUPPORTED_MEDIA_TYPE), then a size over
// MaxSize (413 ATTACHMENT_TOO_LARGE).
func (r CreateRequest) validate() (validated, error) {
	const op = "attachment.Validate"
	var bad errs.FieldErrors
	name := strings.TrimSpace(r.Name)
	switch n := utf8.RuneCountInString(name); {
	case !utf8.ValidString(name):
		bad.Add("name", "must be UTF-8 text")
	case n == 0:
		bad.Add("name", "is required")
	case n > MaxNameLen:
		bad.Add("name", "must be at most %d characters", MaxNameLen)
	case strings.ContainsFunc(name, errs.IsControl):
		bad.Add("name", "must not contain control characters")
	}
	var mediaType string
	var params map[string]string
	if strings.TrimSpace(r.ContentType) == "" {
		bad.Add("contentType", "is required, one of %s", strings.Join(Types, ", "))
	} else {
		var err error
		if mediaType, params, err = mime.ParseMediaType(r.ContentType); err != nil {
			bad.Add("contentType", "must be a media type such as image/png")
		}
	}
	switch {
	case r.Size == nil:
		bad.Add("size", "is required: the file's length in bytes")
	case *r.Size < 1:
		bad.Add("size", "must be at least 1 byte")
	}
	if err := bad.Err(op); err != nil {
		return validated{}, err
	}
	if !slices.Contains(Types, mediaType) {
		return validated{}, errs.E(op, errs.UnsupportedMediaType, "",
			fmt.Sprintf("attachments of type %q are not accepted; accepted types: %s", mediaType, strings.Join(Types, ", ")))
	}
	for k, v := range params {
		if k != "charset" || !IsText(mediaType) || !strings.EqualFold(v, "utf-8") {
			return validated{}, errs.E(op, errs.UnsupportedMediaType, "",
				fmt.Sprintf("content type parameter %s=%s is not accepted: text attachments are UTF-8, other types take no parameters", k, v))
		}
	}
	if *r.Size > MaxSize {
		return validated{}, errs.E(op, errs.TooLarge, CodeTooLarge,
			fmt.Sprintf("attachments are at most %s; this one declares %d bytes", httpapi.SizeText(MaxSize), *r.Size))
	}
	return validated{name: name, contentType: mediaType, size: *r.Size}, nil
}
