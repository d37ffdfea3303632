// Package blobstore opens a function's blob store: the host's
// (assembly.Deps.Blobs: the dev server's folder or memory store, whose
// URLs it serves itself) or else the S3 bucket BLOB_BUCKET. Only the
// builders of functions that keep blobs import it, so only their
// binaries link the S3 SDK.
package blobstore

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/blob/s3blob"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/store"
)

// Open returns d.Blobs when set, else the Store of the S3 bucket
// BLOB_BUCKET in AWS_REGION (at BLOB_ENDPOINT when set: tests). It fails, naming BLOB_BUCKET, when neither
// is given, or when the AWS configuration cannot be loaded.
func Open(ctx context.Context, cfg config.Config, d assembly.Deps) (blob.Store, error) {
	if d.Blobs != nil {
		return d.Blobs, nil
	}
	if err := cfg.Require("BLOB_BUCKET"); err != nil {
		return nil, err
	}
	return s3blob.Open(ctx, s3blob.Options{Bucket: cfg.BlobBucket, Region: cfg.Region, Endpoint: cfg.BlobEndpoint})
}

// Attachments returns the attachment service: attachments in the Data
// table, their bytes in blobs (Open), each user's storage within
// USER_STORAGE_QUOTA.
func Attachments(cfg config.Config, d assembly.Deps, blobs blob.Store) *attachment.Service {
	return attachment.NewService(attachment.Options{Store: store.NewAttachments(d.DB, cfg.DataTable), Blobs: blobs,
		Quota: cfg.UserStorageQuota, Now: d.Now})
}
