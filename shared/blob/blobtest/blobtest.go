// Package blobtest is the contract every blob.Store backend passes: the
// same tests run on memory and the folder (through blob.Local) and on S3
// (s3blob against an in-process fake S3 server, with the real SDK).
package blobtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
)

// Run runs the contract on the stores newStore returns: each call must
// return an empty store of its own (or one whose keys do not collide
// with another call's), whose presigned URLs are served.
func Run(t *testing.T, newStore func(t *testing.T) blob.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s blob.Store)
	}{
		{"put then get", testPutGet},
		{"missing blob", testMissing},
		{"put replaces", testReplace},
		{"size mismatch stores nothing", testSizeMismatch},
		{"empty blob", testEmpty},
		{"default content type", testDefaultContentType},
		{"invalid keys", testInvalidKeys},
		{"delete is idempotent", testDelete},
		{"delete prefix", testDeletePrefix},
		{"copy", testCopy},
		{"read all is bounded", testReadAll},
		{"large blob", testLarge},
		{"concurrent puts of one key", testConcurrentPuts},
		{"presigned put then get", testPresigned},
		{"create only", testCreateOnly},
		{"presign bounds", testPresignBounds},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// Client is the HTTP client of the presigned URLs: a transport of its own
// (tests elsewhere close httptest servers, which resets the default
// transport's connections).
var Client = &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}

func ctx() context.Context { return context.Background() }

// wantErr fails unless err has kind and code.
func wantErr(t *testing.T, what string, err error, kind errs.Kind, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %s %s", what, kind, code)
	}
	if errs.KindOf(err) != kind || errs.CodeOf(err) != code {
		t.Fatalf("%s: %v (kind %s, code %s), want %s %s", what, err, errs.KindOf(err), errs.CodeOf(err), kind, code)
	}
}

func put(t *testing.T, s blob.Store, key, data, ct string) blob.Info {
	t.Helper()
	info, err := blob.PutBytes(ctx(), s, key, []byte(data), ct)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return info
}

func read(t *testing.T, s blob.Store, key string) (string, blob.Info) {
	t.Helper()
	obj, err := s.Get(ctx(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer obj.Body.Close()
	b, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return string(b), obj.Info
}

func testPutGet(t *testing.T, s blob.Store) {
	key := "runs/r1/step_1/output"
	info := put(t, s, key, `{"a":1}`, "application/json")
	if info.Key != key || info.Size != 7 || info.ContentType != "application/json" || info.ETag == "" {
		t.Fatalf("put info %+v", info)
	}
	got, gi := read(t, s, key)
	if got != `{"a":1}` {
		t.Fatalf("get = %q", got)
	}
	if gi.Size != 7 || gi.ContentType != "application/json" || gi.ETag != info.ETag || gi.LastModified.IsZero() {
		t.Fatalf("get info %+v, put info %+v", gi, info)
	}
	st, err := s.Stat(ctx(), key)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != 7 || st.ContentType != "application/json" || st.ETag != info.ETag {
		t.Fatalf("stat %+v", st)
	}
	// Equal contents have equal ETags; other contents another.
	if other := put(t, s, "runs/r1/step_2/output", `{"a":1}`, "application/json"); other.ETag != info.ETag {
		t.Fatalf("ETag of equal content %s, want %s", other.ETag, info.ETag)
	}
	if other := put(t, s, "runs/r1/step_3/output", `{"a":2}`, "application/json"); other.ETag == info.ETag {
		t.Fatalf("ETag of other content equals %s", info.ETag)
	}
	// Every allowed character survives.
	odd := "chats/A-b_c.d=e/9/x.json"
	put(t, s, odd, "odd", "text/plain")
	if got, _ := read(t, s, odd); got != "odd" {
		t.Fatalf("get %s = %q", odd, got)
	}
}

func testMissing(t *testing.T, s blob.Store) {
	_, err := s.Get(ctx(), "calls/nothing/here")
	wantErr(t, "get", err, errs.NotFound, blob.CodeNotFound)
	_, err = s.Stat(ctx(), "calls/nothing/here")
	wantErr(t, "stat", err, errs.NotFound, blob.CodeNotFound)
	_, err = s.Copy(ctx(), "calls/nothing/here", "calls/copy", blob.CopyOptions{})
	wantErr(t, "copy", err, errs.NotFound, blob.CodeNotFound)
	// A key that is a prefix of a stored key is not a blob.
	put(t, s, "calls/a/b", "x", "text/plain")
	_, err = s.Get(ctx(), "calls/a")
	wantErr(t, "get a directory", err, errs.NotFound, blob.CodeNotFound)
}

func testReplace(t *testing.T, s blob.Store) {
	put(t, s, "chats/c/v", "first", "text/plain")
	put(t, s, "chats/c/v", "second value", "application/json")
	got, info := read(t, s, "chats/c/v")
	if got != "second value" || info.ContentType != "application/json" || info.Size != 12 {
		t.Fatalf("after replace: %q %+v", got, info)
	}
}

func testSizeMismatch(t *testing.T, s blob.Store) {
	for _, tc := range []struct {
		name string
		body string
		size int64
	}{{"short", "abc", 5}, {"long", "abcdef", 5}} {
		key := "chats/c/" + tc.name
		_, err := s.Put(ctx(), key, strings.NewReader(tc.body), blob.PutOptions{ContentType: "text/plain", Size: tc.size})
		wantErr(t, tc.name, err, errs.Invalid, blob.CodeSize)
		_, err = s.Stat(ctx(), key)
		wantErr(t, tc.name+": stat after", err, errs.NotFound, blob.CodeNotFound)
	}
	// A failed replace keeps the old blob.
	put(t, s, "chats/c/kept", "old", "text/plain")
	_, err := s.Put(ctx(), "chats/c/kept", strings.NewReader("new!"), blob.PutOptions{Size: 3})
	wantErr(t, "replace", err, errs.Invalid, blob.CodeSize)
	if got, _ := read(t, s, "chats/c/kept"); got != "old" {
		t.Fatalf("after a failed replace: %q", got)
	}
	_, err = s.Put(ctx(), "chats/c/neg", strings.NewReader(""), blob.PutOptions{Size: -1})
	wantErr(t, "negative size", err, errs.Invalid, blob.CodeInvalidSize)
}

func testEmpty(t *testing.T, s blob.Store) {
	info := put(t, s, "chats/c/empty", "", "text/plain")
	if info.Size != 0 {
		t.Fatalf("size %d", info.Size)
	}
	if got, gi := read(t, s, "chats/c/empty"); got != "" || gi.Size != 0 {
		t.Fatalf("get %q %+v", got, gi)
	}
}

func testDefaultContentType(t *testing.T, s blob.Store) {
	put(t, s, "chats/c/raw", "raw", "")
	if _, info := read(t, s, "chats/c/raw"); info.ContentType != blob.DefaultContentType {
		t.Fatalf("content type %q", info.ContentType)
	}
}

func testInvalidKeys(t *testing.T, s blob.Store) {
	bad := []string{"", "/a", "a/", "a//b", "../a", "a/../b", "a/./b", ".hidden", "a/.b", "a b", "a\\b", "a/b?c", "a%2Fb",
		"a\x00b", "é", strings.Repeat("a", blob.MaxKeyLen+1)}
	for _, k := range bad {
		_, err := blob.PutBytes(ctx(), s, k, []byte("x"), "text/plain")
		wantErr(t, fmt.Sprintf("put %q", k), err, errs.Invalid, blob.CodeInvalidKey)
		_, err = s.Get(ctx(), k)
		wantErr(t, fmt.Sprintf("get %q", k), err, errs.Invalid, blob.CodeInvalidKey)
		err = s.Delete(ctx(), k)
		wantErr(t, fmt.Sprintf("delete %q", k), err, errs.Invalid, blob.CodeInvalidKey)
		_, err = s.PresignGet(ctx(), k, time.Minute)
		wantErr(t, fmt.Sprintf("presign %q", k), err, errs.Invalid, blob.CodeInvalidKey)
	}
	for _, p := range []string{"", "/", "a//", "../"} {
		_, err := s.DeletePrefix(ctx(), p)
		wantErr(t, fmt.Sprintf("delete prefix %q", p), err, errs.Invalid, blob.CodeInvalidKey)
	}
	if err := blob.CheckKey(strings.Repeat("a", blob.MaxKeyLen)); err != nil {
		t.Fatalf("a key of MaxKeyLen bytes: %v", err)
	}
}

func testDelete(t *testing.T, s blob.Store) {
	put(t, s, "chats/c/a", "a", "text/plain")
	put(t, s, "chats/c/b", "b", "text/plain")
	put(t, s, "chats/c/keep", "k", "text/plain")
	if err := s.Delete(ctx(), "chats/c/a", "chats/c/b", "chats/c/never"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"chats/c/a", "chats/c/b"} {
		_, err := s.Stat(ctx(), k)
		wantErr(t, "stat deleted "+k, err, errs.NotFound, blob.CodeNotFound)
	}
	if err := s.Delete(ctx(), "chats/c/a"); err != nil {
		t.Fatalf("delete again: %v", err)
	}
	if err := s.Delete(ctx()); err != nil {
		t.Fatalf("delete nothing: %v", err)
	}
	if got, _ := read(t, s, "chats/c/keep"); got != "k" {
		t.Fatalf("kept blob %q", got)
	}
	// A key under a deleted one's "directory" still works.
	put(t, s, "chats/c/a/b", "nested", "text/plain")
	if got, _ := read(t, s, "chats/c/a/b"); got != "nested" {
		t.Fatalf("nested %q", got)
	}
}

func testDeletePrefix(t *testing.T, s blob.Store) {
	keys := []string{"runs/r1/a", "runs/r1/b/c", "runs/r10/a", "runs/r2/a", "calls/r1/a"}
	for _, k := range keys {
		put(t, s, k, k, "text/plain")
	}
	n, err := s.DeletePrefix(ctx(), "runs/r1/")
	if err != nil || n != 2 {
		t.Fatalf("delete runs/r1/: %d %v, want 2", n, err)
	}
	for _, k := range []string{"runs/r10/a", "runs/r2/a", "calls/r1/a"} {
		if got, _ := read(t, s, k); got != k {
			t.Fatalf("%s = %q after deleting another prefix", k, got)
		}
	}
	// A prefix ending inside a segment matches as S3's does.
	n, err = s.DeletePrefix(ctx(), "runs/r")
	if err != nil || n != 2 {
		t.Fatalf("delete runs/r: %d %v, want 2", n, err)
	}
	if n, err := s.DeletePrefix(ctx(), "runs/"); err != nil || n != 0 {
		t.Fatalf("delete an emptied prefix: %d %v", n, err)
	}
	if n, err := s.DeletePrefix(ctx(), "never/"); err != nil || n != 0 {
		t.Fatalf("delete a prefix never used: %d %v", n, err)
	}
	if got, _ := read(t, s, "calls/r1/a"); got != "calls/r1/a" {
		t.Fatal("other prefix touched")
	}
}

func testCopy(t *testing.T, s blob.Store) {
	src := put(t, s, "uploads/u/1", "%PDF-1.7 body", "application/pdf")
	info, err := s.Copy(ctx(), "uploads/u/1", "attachments/u/1", blob.CopyOptions{IfMatch: src.ETag})
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "attachments/u/1" || info.Size != src.Size {
		t.Fatalf("copy info %+v", info)
	}
	got, gi := read(t, s, "attachments/u/1")
	if got != "%PDF-1.7 body" || gi.ContentType != "application/pdf" || gi.ETag != src.ETag {
		t.Fatalf("copy = %q %+v, source %+v", got, gi, src)
	}
	// The source changed since its ETag was read: nothing copied.
	put(t, s, "uploads/u/1", "changed", "application/pdf")
	_, err = s.Copy(ctx(), "uploads/u/1", "attachments/u/2", blob.CopyOptions{IfMatch: src.ETag})
	wantErr(t, "copy of a changed source", err, errs.Conflict, blob.CodeChanged)
	_, err = s.Stat(ctx(), "attachments/u/2")
	wantErr(t, "stat after a refused copy", err, errs.NotFound, blob.CodeNotFound)
	// Unconditional copy replaces.
	if _, err := s.Copy(ctx(), "uploads/u/1", "attachments/u/1", blob.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, s, "attachments/u/1"); got != "changed" {
		t.Fatalf("copy over = %q", got)
	}
}

func testReadAll(t *testing.T, s blob.Store) {
	put(t, s, "chats/c/ten", "0123456789", "text/plain")
	b, info, err := blob.ReadAll(ctx(), s, "chats/c/ten", 10)
	if err != nil || string(b) != "0123456789" || info.Size != 10 {
		t.Fatalf("read all at the bound: %q %+v %v", b, info, err)
	}
	_, _, err = blob.ReadAll(ctx(), s, "chats/c/ten", 9)
	wantErr(t, "read all over the bound", err, errs.TooLarge, blob.CodeTooLarge)
	_, _, err = blob.ReadAll(ctx(), s, "chats/c/none", 9)
	wantErr(t, "read all of a missing blob", err, errs.NotFound, blob.CodeNotFound)
}

func testLarge(t *testing.T, s blob.Store) {
	data := make([]byte, 3<<20+17)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	info, err := s.Put(ctx(), "runs/big/out", bytes.NewReader(data), blob.PutOptions{ContentType: "application/octet-stream", Size: int64(len(data))})
	if err != nil || info.Size != int64(len(data)) {
		t.Fatalf("put large: %+v %v", info, err)
	}
	got, _, err := blob.ReadAll(ctx(), s, "runs/big/out", int64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("large blob changed (%d bytes, %v)", len(got), err)
	}
}

// testConcurrentPuts: writers of one key leave one whole value.
func testConcurrentPuts(t *testing.T, s blob.Store) {
	const n = 8
	values := make([]string, n)
	for i := range values {
		values[i] = strings.Repeat(string(rune('a'+i)), 64<<10)
	}
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for _, v := range values {
		wg.Go(func() {
			_, err := blob.PutBytes(ctx(), s, "chats/c/contended", []byte(v), "text/plain")
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, _ := read(t, s, "chats/c/contended")
	for _, v := range values {
		if got == v {
			return
		}
	}
	t.Fatalf("the blob is no writer's whole value (%d bytes)", len(got))
}

func testPresigned(t *testing.T, s blob.Store) {
	key := "uploads/u1/att-1"
	body := []byte("\x89PNG\r\n\x1a\n fake image")
	up, err := s.PresignPut(ctx(), key, blob.PutOptions{ContentType: "image/png", Size: int64(len(body))}, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if up.Method != http.MethodPut || up.Headers["Content-Type"] != "image/png" || !up.ExpiresAt.After(time.Now().Add(14*time.Minute)) {
		t.Fatalf("presigned put %+v", up)
	}
	for h := range up.Headers {
		if strings.EqualFold(h, "Content-Length") || strings.EqualFold(h, "Host") {
			t.Fatalf("presigned put asks the client for %s, which browsers set themselves", h)
		}
	}
	req, _ := http.NewRequest(up.Method, up.URL, bytes.NewReader(body))
	for k, v := range up.Headers {
		req.Header.Set(k, v)
	}
	resp, err := Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT to the presigned URL: %d %s", resp.StatusCode, b)
	}
	got, info := read(t, s, key)
	if got != string(body) || info.ContentType != "image/png" {
		t.Fatalf("uploaded blob %q %+v", got, info)
	}

	down, err := s.PresignGet(ctx(), key, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if down.Method != http.MethodGet || down.URL == up.URL {
		t.Fatalf("presigned get %+v", down)
	}
	resp, err = Client.Get(down.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != string(body) || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("GET of the presigned URL: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}

	// Once the blob is gone its URL stops working.
	if err := s.Delete(ctx(), key); err != nil {
		t.Fatal(err)
	}
	resp, err = Client.Get(down.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET of a deleted blob's URL: %d, want 404 or 403", resp.StatusCode)
	}
}

func testPresignBounds(t *testing.T, s blob.Store) {
	for _, ttl := range []time.Duration{0, time.Millisecond, blob.MaxTTL + time.Second} {
		_, err := s.PresignGet(ctx(), "chats/c/x", ttl)
		wantErr(t, fmt.Sprintf("get ttl %s", ttl), err, errs.Invalid, blob.CodeInvalidTTL)
		_, err = s.PresignPut(ctx(), "chats/c/x", blob.PutOptions{Size: 1}, ttl)
		wantErr(t, fmt.Sprintf("put ttl %s", ttl), err, errs.Invalid, blob.CodeInvalidTTL)
	}
	_, err := s.PresignPut(ctx(), "chats/c/x", blob.PutOptions{Size: -1}, time.Minute)
	wantErr(t, "put size -1", err, errs.Invalid, blob.CodeInvalidSize)
	_, err = s.PresignPut(ctx(), "chats/c/x", blob.PutOptions{Size: blob.MaxSize + 1}, time.Minute)
	wantErr(t, "put size over the max", err, errs.Invalid, blob.CodeInvalidSize)
}

// testCreateOnly: a create-only write, direct or through a presigned URL,
// fails while a blob is at the key, and works again once it is deleted.
func testCreateOnly(t *testing.T, s blob.Store) {
	key := "uploads/u1/once"
	if _, err := s.Put(ctx(), key, strings.NewReader("first"), blob.PutOptions{ContentType: "text/plain", Size: 5, CreateOnly: true}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Put(ctx(), key, strings.NewReader("again"), blob.PutOptions{ContentType: "text/plain", Size: 5, CreateOnly: true})
	wantErr(t, "second create-only put", err, errs.Conflict, blob.CodeExists)
	if got, _ := read(t, s, key); got != "first" {
		t.Fatalf("after a refused create: %q", got)
	}

	up, err := s.PresignPut(ctx(), "uploads/u1/url", blob.PutOptions{ContentType: "text/plain", Size: 5, CreateOnly: true}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if up.Headers["If-None-Match"] != "*" || up.Headers["Content-Type"] != "text/plain" {
		t.Fatalf("create-only URL headers %v", up.Headers)
	}
	send := func(body string) int {
		req, _ := http.NewRequest(up.Method, up.URL, strings.NewReader(body))
		for k, v := range up.Headers {
			req.Header.Set(k, v)
		}
		resp, err := Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := send("hello"); status != http.StatusOK {
		t.Fatalf("first PUT: %d", status)
	}
	if status := send("HELLO"); status != http.StatusPreconditionFailed {
		t.Fatalf("second PUT through a create-only URL: %d, want 412", status)
	}
	// A blob put at the key closes the URL (a tombstone).
	if err := s.Delete(ctx(), "uploads/u1/url"); err != nil {
		t.Fatal(err)
	}
	put(t, s, "uploads/u1/url", "", "application/octet-stream")
	if status := send("later"); status != http.StatusPreconditionFailed {
		t.Fatalf("PUT over a tombstone: %d, want 412", status)
	}
	if got, _ := read(t, s, "uploads/u1/url"); got != "" {
		t.Fatalf("the tombstone changed: %q", got)
	}
}
