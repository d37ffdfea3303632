package store_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/export"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

type exportClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *exportClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *exportClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestExportsOneAtATime: of concurrent requests of one user exactly one
// is queued and the others are 409 EXPORT_IN_PROGRESS; another user is
// not held up; once the export finished the user may request again.
func TestExportsOneAtATime(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewExports(db.DB, db.Data())
	clock := &exportClock{t: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	svc := export.NewService(s, nil, clock.now)
	ctx := auth.ActingFor(context.Background(), "u1")

	const n = 8
	var wg sync.WaitGroup
	results := make([]error, n)
	ids := make([]string, n)
	for i := range n {
		wg.Go(func() {
			e, err := svc.Request(ctx)
			results[i], ids[i] = err, e.ID
		})
	}
	wg.Wait()
	won := ""
	for i, err := range results {
		switch {
		case err == nil:
			if won != "" {
				t.Fatalf("two exports queued: %s and %s", won, ids[i])
			}
			won = ids[i]
		case errs.Is(err, errs.Conflict) && errs.CodeOf(err) == export.CodeInProgress:
		default:
			t.Fatalf("request %d: %v, want nil or Conflict %s", i, err, export.CodeInProgress)
		}
	}
	if won == "" {
		t.Fatal("no export queued")
	}
	if _, err := svc.Request(auth.ActingFor(context.Background(), "u2")); err != nil {
		t.Fatalf("another user's export: %v", err)
	}
	q, err := s.QueuedExports(ctx, 10)
	if err != nil || len(q) != 2 {
		t.Fatalf("queued = %v, %v; want u1's and u2's", q, err)
	}
	got, err := s.Export(ctx, "u1", won)
	if err != nil || got.Status != export.Pending {
		t.Fatalf("export = %+v, %v; want pending", got, err)
	}
	if _, err := s.Export(ctx, "u2", won); !errs.Is(err, errs.NotFound) {
		t.Fatalf("u1's export read as u2's: %v, want NotFound", err)
	}

	if err := s.ClaimExport(ctx, got, clock.now(), clock.now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimExport(ctx, got, clock.now(), clock.now().Add(time.Minute)); !errs.Is(err, errs.Conflict) {
		t.Fatalf("second claim: %v, want Conflict", err)
	}
	if _, err := svc.Request(ctx); errs.CodeOf(err) != export.CodeInProgress {
		t.Fatalf("request while running: %v, want %s", err, export.CodeInProgress)
	}
	got.Attempts++
	at := clock.now()
	got.Status, got.CompletedAt = export.Completed, &at
	if err := s.FinishExport(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishExport(ctx, got); !errs.Is(err, errs.Conflict) {
		t.Fatalf("second finish: %v, want Conflict", err)
	}
	if _, err := svc.Request(ctx); err != nil {
		t.Fatalf("request after the export finished: %v", err)
	}
}

// TestExportRunner: a queued export is written as a zip of its sections
// to its key and completed; a claimed export whose process died is taken
// again once its lease ran out and written from the start; a section that
// keeps failing fails the export after MaxAttempts with a clear error and
// frees the user for the next one.
func TestExportRunner(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewExports(db.DB, db.Data())
	clock := &exportClock{t: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	blobs := blob.NewMemory(clock.now)
	svc := export.NewService(s, nil, clock.now)
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789"), 100_000)
	failing := map[string]bool{"u3": true}
	sections := []export.Section{
		{Name: "profile", Write: func(ctx context.Context, uid string, a *export.Archive) error {
			if auth.UserID(ctx) != uid {
				return errors.New("the section does not act as the user")
			}
			return a.JSON("profile.json", map[string]string{"id": uid})
		}},
		{Name: "file", Write: func(ctx context.Context, uid string, a *export.Archive) error {
			if failing[uid] {
				return errs.E("test", errs.Unavailable, "", "storage down")
			}
			return a.Copy("files/big.bin", bytes.NewReader(big))
		}},
	}
	r := export.NewRunner(s, blobs, clock.now, nil, t.TempDir(), sections...)

	e1, err := svc.Request(auth.ActingFor(ctx, "u1"))
	if err != nil {
		t.Fatal(err)
	}
	// u2's export was claimed by a process that died.
	e2, err := svc.Request(auth.ActingFor(ctx, "u2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimExport(ctx, e2, clock.now(), clock.now().Add(export.Lease)); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want u1's export done, u2's left under its lease", n, err)
	}
	checkZip(t, blobs, "u1", e1.ID, big)
	if got, _ := s.Export(ctx, "u2", e2.ID); got.Status != export.Running {
		t.Fatalf("u2's export = %s, want running (its lease is live)", got.Status)
	}
	clock.add(export.Lease + time.Second)
	if n, err := r.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep after the lease = %d, %v; want u2's export done", n, err)
	}
	checkZip(t, blobs, "u2", e2.ID, big)
	got, _ := s.Export(ctx, "u2", e2.ID)
	if got.Attempts != 2 || got.CompletedAt == nil || got.Size == 0 {
		t.Fatalf("u2's export = %+v; want completed on attempt 2 with a size", got)
	}

	e3, err := svc.Request(auth.ActingFor(ctx, "u3"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range export.MaxAttempts {
		_, err := r.Sweep(ctx)
		if i < export.MaxAttempts-1 && err == nil {
			t.Fatalf("sweep %d: no error for a failing section", i)
		}
		clock.add(export.Lease + time.Second) // a failed attempt is retried after its lease
	}
	f, err := s.Export(ctx, "u3", e3.ID)
	if err != nil || f.Status != export.Failed || !strings.Contains(f.Error, "request a new one") {
		t.Fatalf("u3's export = %+v, %v; want failed with a clear error", f, err)
	}
	if _, err := blobs.Stat(ctx, export.Key("u3", e3.ID)); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a failed export left a zip: %v", err)
	}
	if q, _ := s.QueuedExports(ctx, 10); len(q) != 0 {
		t.Fatalf("queue after every export ended: %+v", q)
	}
	if _, err := svc.Request(auth.ActingFor(ctx, "u3")); err != nil {
		t.Fatalf("request after a failed export: %v", err)
	}
}

func checkZip(t *testing.T, blobs blob.Backend, uid, id string, big []byte) {
	t.Helper()
	data, _, err := blob.ReadAll(context.Background(), blobs, export.Key(uid, id), 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		files[f.Name] = b
	}
	if !strings.Contains(string(files["profile.json"]), `"id": "`+uid+`"`) || !bytes.Equal(files["files/big.bin"], big) {
		t.Fatalf("zip of %s holds %d files, profile %q", uid, len(files), files["profile.json"])
	}
}

// TestExportRequestsRefusedNotCounted: requests refused with 409
// EXPORT_IN_PROGRESS while an export is queued are not counted against
// RATE_LIMIT_EXPORTS, so that clicking again does not lock the user out;
// requests that queue an export are.
func TestExportRequestsRefusedNotCounted(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewExports(db.DB, db.Data())
	clock := &exportClock{t: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	svc := export.NewService(s, nil, clock.now)
	limiter := ratelimit.New(store.NewRateLimits(db.DB, db.RateLimits()), clock.now)
	const uid = "7b0c3b5e-6f0e-4a39-9a53-0d2f9d4b1a10"
	r := httpapi.NewRouter()
	signIn := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			next.ServeHTTP(w, req.WithContext(auth.ActingFor(req.Context(), uid)))
		})
	}
	export.Routes(r, svc, signIn, limiter.Limit(ratelimit.MustParse("exports", "2/h")))
	post := func() int {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("POST", "/api/users/"+uid+"/exports", nil))
		return w.Code
	}
	if c := post(); c != http.StatusAccepted {
		t.Fatalf("first request: %d", c)
	}
	for i := range 5 {
		if c := post(); c != http.StatusConflict {
			t.Fatalf("request %d while one is queued: %d, want 409", i+2, c)
		}
	}
	// The queued export finishes: the next request is the second counted,
	// within the limit of 2, and the one after that the third.
	finish := func() {
		q, err := s.QueuedExports(context.Background(), 10)
		if err != nil || len(q) != 1 {
			t.Fatalf("queued = %v, %v", q, err)
		}
		e := q[0]
		if err := s.ClaimExport(context.Background(), e, clock.now(), clock.now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		e.Attempts++
		e.Status = export.Failed
		e.Error = "test"
		if err := s.FinishExport(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	finish()
	if c := post(); c != http.StatusAccepted {
		t.Fatalf("request after the export finished: %d, want 202 (refused requests were counted)", c)
	}
	finish()
	if c := post(); c != http.StatusTooManyRequests {
		t.Fatalf("third export in the hour: %d, want 429", c)
	}
}
