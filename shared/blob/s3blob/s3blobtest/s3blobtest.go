// Package s3blobtest serves a fake S3 (gofakes3, in memory) for the tests
// of functions that keep blobs: the real S3 SDK talks to it over HTTP at
// BLOB_ENDPOINT.
package s3blobtest

import (
	"net/http/httptest"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Start serves a fake S3 holding an empty bucket until the test ends and
// returns its URL.
func Start(t testing.TB, bucket string) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithoutVersioning()).Server())
	t.Cleanup(srv.Close)
	return srv.URL
}
