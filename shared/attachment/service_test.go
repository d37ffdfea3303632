package attachment_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/blob/blobtest"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is the attachment service on the embedded DynamoDB engine and a
// memory blob store whose signed URLs an httptest server serves.
type env struct {
	svc   *attachment.Service
	chats *store.Chats
	atts  *store.Attachments
	mem   *blob.Memory
	blobs *blob.Local
	clock *clock
}

func setup(t *testing.T, quota int64) *env {
	t.Helper()
	db := storetest.New(t)
	c := &clock{t: time.Now().UTC()}
	mem := blob.NewMemory(c.Now)
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	local, err := blob.NewLocal(mem, blob.LocalOptions{BaseURL: srv.URL, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	h = local.Handler()
	atts := store.NewAttachments(db.DB, db.Data())
	svc := attachment.NewService(attachment.Options{Store: atts, Blobs: local, Quota: quota, Now: c.Now})
	chats := store.NewChats(db.DB, db.Data())
	return &env{svc: svc, chats: chats, atts: atts, mem: mem, blobs: local, clock: c}
}

func as(user string) context.Context { return auth.ActingFor(context.Background(), user) }

func (e *env) chat(t *testing.T, user string) chat.Chat {
	t.Helper()
	now := e.clock.Now()
	c := chat.Chat{ID: uuid.NewString(), UserID: user, Title: "t", CreatedAt: now, UpdatedAt: now}
	if err := e.chats.CreateChat(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func size(n int) *int64 { v := int64(n); return &v }

func (e *env) create(t *testing.T, user, chatID, name, ct string, n int) attachment.Attachment {
	t.Helper()
	a, err := e.svc.Create(as(user), chatID, attachment.CreateRequest{Name: name, ContentType: ct, Size: size(n)})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return a
}

// put sends data to url as a client would, with headers.
func put(t *testing.T, url string, headers map[string]string, data []byte) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(data))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := blobtest.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := blobtest.Client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func wantCode(t *testing.T, what string, err error, kind errs.Kind, code string) {
	t.Helper()
	if errs.KindOf(err) != kind || errs.CodeOf(err) != code {
		t.Fatalf("%s: %v (%s %s), want %s %s", what, err, errs.KindOf(err), errs.CodeOf(err), kind, code)
	}
}

func (e *env) used(t *testing.T, user string) int64 {
	t.Helper()
	n, err := e.atts.StorageUsed(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestUploadBecomesReady(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	c := e.chat(t, "ada")
	a := e.create(t, "ada", c.ID, " photo.png ", "image/png", len(png))
	if a.Status != attachment.StatusPending || a.Name != "photo.png" || a.ContentType != "image/png" || a.Size != int64(len(png)) ||
		a.UploadURL == "" || a.UploadHeaders["Content-Type"] != "image/png" || a.ExpiresAt == nil ||
		!a.ExpiresAt.Equal(e.clock.Now().Add(attachment.UploadTTL).Truncate(time.Second)) || a.DownloadURL != "" {
		t.Fatalf("created %+v", a)
	}
	if e.used(t, "ada") != int64(len(png)) {
		t.Fatalf("the pending attachment is not charged: %d", e.used(t, "ada"))
	}
	// Before the upload: pending, no download.
	got, err := e.svc.Get(as("ada"), c.ID, a.ID)
	if err != nil || got.Status != attachment.StatusPending || got.DownloadURL != "" || got.ExpiresAt == nil {
		t.Fatalf("before upload: %+v %v", got, err)
	}
	if status := put(t, a.UploadURL, a.UploadHeaders, png); status != 200 {
		t.Fatalf("upload: %d", status)
	}
	got, err = e.svc.Get(as("ada"), c.ID, a.ID)
	if err != nil || got.Status != attachment.StatusReady || got.DownloadURL == "" || got.DownloadExpiresAt == nil || got.ExpiresAt != nil || got.UploadURL != "" {
		t.Fatalf("after upload: %+v %v", got, err)
	}
	if status, b := get(t, got.DownloadURL); status != 200 || !bytes.Equal(b, png) {
		t.Fatalf("download: %d %q", status, b)
	}
	// The checked bytes moved where no upload URL reaches; the upload is
	// closed by a tombstone.
	e.wantTombstones(t, attachment.Key("ada", a.ID))
	// Uploading again through the same URL changes nothing.
	other := append([]byte{}, png...)
	other[len(other)-1] = 'X'
	if status := put(t, a.UploadURL, a.UploadHeaders, other); status != 412 {
		t.Fatalf("second upload: %d, want 412", status)
	}
	r, err := e.svc.Ready(context.Background(), "ada", c.ID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := e.svc.Read(context.Background(), r, 1<<20); err != nil || !bytes.Equal(b, png) {
		t.Fatalf("ready bytes after a second upload: %q %v", b, err)
	}
	if e.used(t, "ada") != int64(len(png)) {
		t.Fatalf("used %d", e.used(t, "ada"))
	}
}

func TestMismatchedUploadsFail(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	c := e.chat(t, "ada")
	// The right size and header, the wrong bytes.
	a := e.create(t, "ada", c.ID, "photo.png", "image/png", len(jpeg))
	if status := put(t, a.UploadURL, a.UploadHeaders, jpeg); status != 200 {
		t.Fatalf("upload: %d", status)
	}
	got, err := e.svc.Get(as("ada"), c.ID, a.ID)
	if err != nil || got.Status != attachment.StatusFailed || !strings.Contains(got.Reason, "not a PNG image") || got.DownloadURL != "" {
		t.Fatalf("jpeg bytes as png: %+v %v", got, err)
	}
	// Bytes of another size than declared (written past the URL, which
	// refuses them).
	b := e.create(t, "ada", c.ID, "notes.txt", "text/plain", 10)
	if status := put(t, b.UploadURL, b.UploadHeaders, []byte("0123456789AB")); status != 403 {
		t.Fatalf("upload of 12 bytes to a URL signed for 10: %d", status)
	}
	if _, err := blob.PutBytes(context.Background(), e.blobs, attachment.UploadKey("ada", b.ID), []byte("0123456789AB"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	got, err = e.svc.Get(as("ada"), c.ID, b.ID)
	if err != nil || got.Status != attachment.StatusFailed || !strings.Contains(got.Reason, "12 bytes, not the declared 10") {
		t.Fatalf("size mismatch: %+v %v", got, err)
	}
	// JSON that does not parse.
	j := e.create(t, "ada", c.ID, "data.json", "application/json", 7)
	if status := put(t, j.UploadURL, j.UploadHeaders, []byte(`{"a": }`)); status != 200 {
		t.Fatal(status)
	}
	if got, _ := e.svc.Get(as("ada"), c.ID, j.ID); got.Status != attachment.StatusFailed || !strings.Contains(got.Reason, "JSON") {
		t.Fatalf("bad JSON: %+v", got)
	}
	// Failed attachments hold no quota and leave no bytes (their uploads
	// closed); reading them says why.
	if e.used(t, "ada") != 0 {
		t.Fatalf("after failures: used %d", e.used(t, "ada"))
	}
	e.wantTombstones(t)
	if status := put(t, a.UploadURL, a.UploadHeaders, jpeg); status != 412 {
		t.Fatalf("uploading to a failed attachment: %d, want 412", status)
	}
	_, err = e.svc.Ready(context.Background(), "ada", c.ID, a.ID)
	wantCode(t, "ready of a failed attachment", err, errs.Conflict, attachment.CodeFailed)
}

func TestUploadDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	c := e.chat(t, "ada")
	a := e.create(t, "ada", c.ID, "late.txt", "text/plain", 5)
	_, err := e.svc.Ready(context.Background(), "ada", c.ID, a.ID)
	wantCode(t, "ready before upload", err, errs.Conflict, attachment.CodeNotReady)
	// Past the URL's expiry but within the grace for an upload in flight.
	e.clock.Add(a.ExpiresAt.Add(attachment.UploadGrace).Sub(e.clock.Now()))
	if got, err := e.svc.Get(as("ada"), c.ID, a.ID); err != nil || got.Status != attachment.StatusPending {
		t.Fatalf("within the grace: %+v %v", got, err)
	}
	if status := put(t, a.UploadURL, a.UploadHeaders, []byte("hello")); status != 403 {
		t.Fatalf("upload after the URL's expiry: %d", status)
	}
	e.clock.Add(time.Second)
	got, err := e.svc.Get(as("ada"), c.ID, a.ID)
	if err != nil || got.Status != attachment.StatusFailed || !strings.Contains(got.Reason, "no upload arrived") {
		t.Fatalf("after the deadline: %+v %v", got, err)
	}
	if e.used(t, "ada") != 0 {
		t.Fatalf("an expired attachment holds %d bytes", e.used(t, "ada"))
	}
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	c := e.chat(t, "ada")
	tests := []struct {
		name string
		in   attachment.CreateRequest
		kind errs.Kind
		code string
	}{
		{"no name", attachment.CreateRequest{Name: "  ", ContentType: "text/plain", Size: size(1)}, errs.Invalid, "VALIDATION_FAILED"},
		{"long name", attachment.CreateRequest{Name: strings.Repeat("n", 256), ContentType: "text/plain", Size: size(1)}, errs.Invalid, "VALIDATION_FAILED"},
		{"control characters", attachment.CreateRequest{Name: "a\nb", ContentType: "text/plain", Size: size(1)}, errs.Invalid, "VALIDATION_FAILED"},
		{"no type", attachment.CreateRequest{Name: "a", Size: size(1)}, errs.Invalid, "VALIDATION_FAILED"},
		{"malformed type", attachment.CreateRequest{Name: "a", ContentType: "image/", Size: size(1)}, errs.Invalid, "VALIDATION_FAILED"},
		{"no size", attachment.CreateRequest{Name: "a", ContentType: "text/plain"}, errs.Invalid, "VALIDATION_FAILED"},
		{"empty file", attachment.CreateRequest{Name: "a", ContentType: "text/plain", Size: size(0)}, errs.Invalid, "VALIDATION_FAILED"},
		{"html", attachment.CreateRequest{Name: "a.html", ContentType: "text/html", Size: size(1)}, errs.UnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"},
		{"svg", attachment.CreateRequest{Name: "a.svg", ContentType: "image/svg+xml", Size: size(1)}, errs.UnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"},
		{"latin-1 text", attachment.CreateRequest{Name: "a", ContentType: "text/plain; charset=iso-8859-1", Size: size(1)}, errs.UnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"},
		{"unsupported and too large", attachment.CreateRequest{Name: "a", ContentType: "video/mp4", Size: size(attachment.MaxSize + 1)}, errs.UnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"},
		{"one byte over 25 MiB", attachment.CreateRequest{Name: "a", ContentType: "application/pdf", Size: size(attachment.MaxSize + 1)}, errs.TooLarge, attachment.CodeTooLarge},
	}
	for _, tt := range tests {
		_, err := e.svc.Create(as("ada"), c.ID, tt.in)
		wantCode(t, tt.name, err, tt.kind, tt.code)
	}
	_, err := e.svc.Create(as("ada"), c.ID, attachment.CreateRequest{Name: "a", ContentType: "application/pdf", Size: size(attachment.MaxSize + 1)})
	if !strings.Contains(errs.MessageOf(err, ""), "26214400") {
		t.Errorf("the size error does not name the limit: %v", err)
	}
	// At the limits.
	big := e.create(t, "ada", c.ID, strings.Repeat("n", 255), "application/pdf", attachment.MaxSize)
	if big.Size != attachment.MaxSize {
		t.Fatalf("25 MiB: %+v", big)
	}
	utf := e.create(t, "ada", c.ID, "notes.md", "Text/Markdown; charset=UTF-8", 3)
	if utf.ContentType != "text/markdown" || utf.UploadHeaders["Content-Type"] != "text/markdown" {
		t.Fatalf("normalized type: %+v", utf)
	}
	if e.used(t, "ada") != attachment.MaxSize+3 {
		t.Fatalf("used %d", e.used(t, "ada"))
	}
}

func TestQuota(t *testing.T) {
	t.Parallel()
	e := setup(t, 100)
	c := e.chat(t, "ada")
	e.create(t, "ada", c.ID, "a", "text/plain", 60)
	e.create(t, "ada", c.ID, "b", "text/plain", 39) // 99: just under
	last := e.create(t, "ada", c.ID, "c", "text/plain", 1)
	_, err := e.svc.Create(as("ada"), c.ID, attachment.CreateRequest{Name: "d", ContentType: "text/plain", Size: size(1)}) // one byte over
	wantCode(t, "one byte over the quota", err, errs.TooLarge, attachment.CodeQuotaExceeded)
	_, err = e.svc.Create(as("ada"), c.ID, attachment.CreateRequest{Name: "e", ContentType: "text/plain", Size: size(101)})
	wantCode(t, "larger than the whole quota", err, errs.TooLarge, attachment.CodeQuotaExceeded)
	// Deleting gives the bytes back.
	if err := e.svc.Delete(as("ada"), c.ID, last.ID); err != nil {
		t.Fatal(err)
	}
	e.create(t, "ada", c.ID, "d", "text/plain", 1)
	// Another user's quota is untouched.
	e.create(t, "bob", e.chat(t, "bob").ID, "b", "text/plain", 100)
}

func TestIsolationBetweenUsers(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	c := e.chat(t, "ada")
	a := e.create(t, "ada", c.ID, "notes.txt", "text/plain", 5)
	if status := put(t, a.UploadURL, a.UploadHeaders, []byte("hello")); status != 200 {
		t.Fatal(status)
	}
	_, err := e.svc.Get(as("bob"), c.ID, a.ID)
	wantCode(t, "bob reads ada's attachment", err, errs.Forbidden, "FORBIDDEN")
	_, err = e.svc.Create(as("bob"), c.ID, attachment.CreateRequest{Name: "x", ContentType: "text/plain", Size: size(1)})
	wantCode(t, "bob attaches to ada's chat", err, errs.Forbidden, "FORBIDDEN")
	wantCode(t, "bob deletes ada's attachment", e.svc.Delete(as("bob"), c.ID, a.ID), errs.Forbidden, "FORBIDDEN")
	_, err = e.svc.Ready(context.Background(), "bob", c.ID, a.ID)
	wantCode(t, "bob's message names ada's attachment", err, errs.Forbidden, "FORBIDDEN")
	_, err = e.svc.ReadyByID(context.Background(), "bob", a.ID)
	wantCode(t, "bob's run names ada's attachment", err, errs.NotFound, attachment.CodeNotFound)
	// Bob's own chat does not hold ada's attachment either.
	_, err = e.svc.Get(as("bob"), e.chat(t, "bob").ID, a.ID)
	wantCode(t, "ada's attachment through bob's chat", err, errs.NotFound, attachment.CodeNotFound)
	_, err = e.svc.Get(as("ada"), uuid.NewString(), a.ID)
	wantCode(t, "unknown chat", err, errs.NotFound, "CHAT_NOT_FOUND")
	_, err = e.svc.Get(as("ada"), c.ID, uuid.NewString())
	wantCode(t, "unknown attachment", err, errs.NotFound, attachment.CodeNotFound)
	_, err = e.svc.ReadyByID(context.Background(), "ada", "not-a-uuid")
	wantCode(t, "malformed id", err, errs.NotFound, attachment.CodeNotFound)
	// Ada's, untouched.
	if r, err := e.svc.ReadyByID(context.Background(), "ada", a.ID); err != nil || r.ChatID != c.ID {
		t.Fatalf("ada's own: %+v %v", r, err)
	}
}

func TestDeleteStopsURLs(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	c := e.chat(t, "ada")
	a := e.create(t, "ada", c.ID, "notes.txt", "text/plain", 5)
	put(t, a.UploadURL, a.UploadHeaders, []byte("hello"))
	got, err := e.svc.Get(as("ada"), c.ID, a.ID)
	if err != nil || got.Status != attachment.StatusReady {
		t.Fatal(got, err)
	}
	if err := e.svc.Delete(as("ada"), c.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	if status, _ := get(t, got.DownloadURL); status != 404 {
		t.Fatalf("download URL after delete: %d", status)
	}
	_, err = e.svc.Get(as("ada"), c.ID, a.ID)
	wantCode(t, "get after delete", err, errs.NotFound, attachment.CodeNotFound)
	wantCode(t, "delete again", e.svc.Delete(as("ada"), c.ID, a.ID), errs.NotFound, attachment.CodeNotFound)
	if e.used(t, "ada") != 0 {
		t.Fatalf("after delete: used %d", e.used(t, "ada"))
	}
	e.wantTombstones(t)
	// A pending attachment's upload URL stops working too.
	p := e.create(t, "ada", c.ID, "later.txt", "text/plain", 5)
	if err := e.svc.Delete(as("ada"), c.ID, p.ID); err != nil {
		t.Fatal(err)
	}
	if status := put(t, p.UploadURL, p.UploadHeaders, []byte("hello")); status != 412 {
		t.Fatalf("upload URL after delete: %d, want 412", status)
	}
	e.wantTombstones(t)
}

// deleteFails is a blob store whose deletes fail, as when S3 is
// unreachable.
type deleteFails struct{ *blob.Local }

func (deleteFails) Delete(context.Context, ...string) error {
	return errs.E("test.Delete", errs.Unavailable, blob.CodeUnavailable, "the blob store is down")
}

// TestDeleteFinishesAHalfDoneDelete: a delete that fails after marking
// the attachment deleted leaves it unseen but holding its quota; the next
// delete finishes the job instead of answering 404.
func TestDeleteFinishesAHalfDoneDelete(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	c := e.chat(t, "ada")
	a := e.create(t, "ada", c.ID, "notes.txt", "text/plain", 5)
	put(t, a.UploadURL, a.UploadHeaders, []byte("hello"))
	broken := attachment.NewService(attachment.Options{Store: e.atts, Blobs: deleteFails{e.blobs}, Now: e.clock.Now})
	wantCode(t, "delete with the blob store down", broken.Delete(as("ada"), c.ID, a.ID), errs.Unavailable, blob.CodeUnavailable)
	_, err := e.svc.Get(as("ada"), c.ID, a.ID)
	wantCode(t, "get after the failed delete", err, errs.NotFound, attachment.CodeNotFound)
	if e.used(t, "ada") != 5 {
		t.Fatalf("after the failed delete: used %d, want 5", e.used(t, "ada"))
	}
	wantCode(t, "another user's delete", e.svc.Delete(as("bob"), c.ID, a.ID), errs.Forbidden, "FORBIDDEN")
	if err := e.svc.Delete(as("ada"), c.ID, a.ID); err != nil {
		t.Fatalf("the retried delete: %v", err)
	}
	if e.used(t, "ada") != 0 {
		t.Fatalf("after the retried delete: used %d", e.used(t, "ada"))
	}
	e.wantTombstones(t)
	wantCode(t, "delete once more", e.svc.Delete(as("ada"), c.ID, a.ID), errs.NotFound, attachment.CodeNotFound)
	wantCode(t, "delete of an id never created", e.svc.Delete(as("ada"), c.ID, uuid.NewString()), errs.NotFound, attachment.CodeNotFound)
}

// wantTombstones fails unless the blob store holds exactly keep and
// tombstones (empty blobs under uploads/).
func (e *env) wantTombstones(t *testing.T, keep ...string) {
	t.Helper()
	for _, k := range e.mem.Keys() {
		if slices.Contains(keep, k) {
			continue
		}
		info, err := e.mem.Stat(context.Background(), k)
		if err != nil || info.Size != 0 || !strings.HasPrefix(k, "uploads/") {
			t.Fatalf("blob %s (%+v) is neither a tombstone nor expected", k, info)
		}
	}
	for _, k := range keep {
		if !slices.Contains(e.mem.Keys(), k) {
			t.Fatalf("blob %s missing", k)
		}
	}
}

func TestChatDeleteRemovesAttachments(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	c, keep := e.chat(t, "ada"), e.chat(t, "ada")
	ready := e.create(t, "ada", c.ID, "a.png", "image/png", len(png))
	put(t, ready.UploadURL, ready.UploadHeaders, png)
	got, err := e.svc.Get(as("ada"), c.ID, ready.ID)
	if err != nil || got.Status != attachment.StatusReady {
		t.Fatal(got, err)
	}
	uploaded := e.create(t, "ada", c.ID, "b.txt", "text/plain", 2) // uploaded, never checked
	put(t, uploaded.UploadURL, uploaded.UploadHeaders, []byte("hi"))
	pending := e.create(t, "ada", c.ID, "c.txt", "text/plain", 3) // never uploaded
	other := e.create(t, "ada", keep.ID, "d.txt", "text/plain", 4)
	if e.used(t, "ada") != int64(len(png))+9 {
		t.Fatalf("used %d", e.used(t, "ada"))
	}
	if err := e.chats.DeleteChat(context.Background(), c.ID, "ada", func(ctx context.Context) error { return e.svc.DeleteChat(ctx, c.ID, "ada") }); err != nil {
		t.Fatal(err)
	}
	// When the delete has answered, the chat's URLs no longer work.
	if status, _ := get(t, got.DownloadURL); status != 404 {
		t.Fatalf("download URL after the chat's delete: %d", status)
	}
	e.wantTombstones(t)
	for _, a := range []attachment.Attachment{uploaded, pending} {
		if status := put(t, a.UploadURL, a.UploadHeaders, []byte("hey")[:a.Size]); status != 412 {
			t.Fatalf("upload URL of %s after the chat's delete: %d, want 412", a.Name, status)
		}
	}
	if e.used(t, "ada") != 4 {
		t.Fatalf("used %d after the chat's delete, want 4 (the other chat's)", e.used(t, "ada"))
	}
	if _, err := e.svc.Get(as("ada"), keep.ID, other.ID); err != nil {
		t.Fatalf("the other chat's attachment: %v", err)
	}
}

func TestReadingReadyAttachments(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	c := e.chat(t, "ada")
	text := "héllo wörld" // ö is two bytes, at 8-9
	a := e.create(t, "ada", c.ID, "notes.txt", "text/plain", len(text))
	put(t, a.UploadURL, a.UploadHeaders, []byte(text))
	r, err := e.svc.ReadyByID(context.Background(), "ada", a.ID)
	if err != nil || r.Status != attachment.StatusReady || r.Name != "notes.txt" {
		t.Fatalf("ready: %+v %v", r, err)
	}
	if s, cut, err := e.svc.Text(context.Background(), r, 100); err != nil || s != text || cut {
		t.Fatalf("text: %q %v %v", s, cut, err)
	}
	if s, cut, err := e.svc.Text(context.Background(), r, 9); err != nil || s != "héllo w" || !cut {
		t.Fatalf("text cut inside ö: %q %v %v", s, cut, err)
	}
	_, err = e.svc.Read(context.Background(), r, int64(len(text)-1))
	wantCode(t, "read over the bound", err, errs.TooLarge, attachment.CodeTooLarge)
	body, err := e.svc.Open(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(body)
	body.Close()
	if string(b) != text {
		t.Fatalf("open: %q", b)
	}
	img := e.create(t, "ada", c.ID, "p.png", "image/png", len(png))
	put(t, img.UploadURL, img.UploadHeaders, png)
	ri, err := e.svc.Ready(context.Background(), "ada", c.ID, img.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = e.svc.Text(context.Background(), ri, 100)
	wantCode(t, "text of an image", err, errs.Invalid, "ATTACHMENT_NOT_TEXT")
}

func TestForModel(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	c := e.chat(t, "ada")
	ctx := context.Background()
	ready := func(name, ct string, data []byte) attachment.Attachment {
		a := e.create(t, "ada", c.ID, name, ct, len(data))
		put(t, a.UploadURL, a.UploadHeaders, data)
		r, err := e.svc.Ready(ctx, "ada", c.ID, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	txt := ready("notes.txt", "text/plain", []byte("hello world"))
	img := ready("cat.png", "image/png", png)
	vision, blind := model.Input{Images: true}, model.Input{}

	m, err := e.svc.ForModel(ctx, txt, blind, 5, 0)
	if err != nil || m.Text != "hello" || !m.Cut || m.Data != nil || m.Size != 11 || m.Kind() != model.KindText {
		t.Fatalf("text cut to 5: %+v %v", m, err)
	}
	if m, err := e.svc.ForModel(ctx, img, vision, 0, 0); err != nil || !bytes.Equal(m.Data, png) || m.ContentType != "image/png" {
		t.Fatalf("image for a vision model: %+v %v", m, err)
	}
	if m, err := e.svc.ForModel(ctx, img, blind, 0, 0); err != nil || m.Data != nil || m.Name != "cat.png" {
		t.Fatalf("image for a text-only model: %+v %v", m, err)
	}
	if m, err := e.svc.ForModel(ctx, img, vision, 0, int64(len(png)-1)); err != nil || m.Data != nil {
		t.Fatalf("image over the bound: %+v %v", m, err)
	}
}
