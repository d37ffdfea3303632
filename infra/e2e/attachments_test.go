package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// frontendOrigin is the browser origin the attachment tests allow.
const frontendOrigin = "http://localhost:5173"

// attachmentJSON is an attachment as the API returns it.
type attachmentJSON struct {
	ID                string            `json:"id"`
	ChatID            string            `json:"chatId"`
	Name              string            `json:"name"`
	ContentType       string            `json:"contentType"`
	Size              int64             `json:"size"`
	Status            string            `json:"status"`
	Reason            string            `json:"reason"`
	UploadURL         string            `json:"uploadUrl"`
	UploadHeaders     map[string]string `json:"uploadHeaders"`
	ExpiresAt         *time.Time        `json:"expiresAt"`
	DownloadURL       string            `json:"downloadUrl"`
	DownloadExpiresAt *time.Time        `json:"downloadExpiresAt"`
}

// blobClient talks to signed blob URLs as a browser's fetch does: no
// cookie jar (the URL's signature is the credential).
var blobClient = &http.Client{Transport: &http.Transport{}, Timeout: patience}

// attach creates an attachment in chatID and returns the response.
func attach(c *client, chatID, name, contentType string, size int64, header ...string) response {
	return c.do("POST", "/api/chats/"+chatID+"/attachments",
		map[string]any{"name": name, "contentType": contentType, "size": size}, header...)
}

func newAttachment(t *testing.T, c *client, chatID, name, contentType string, size int64) attachmentJSON {
	t.Helper()
	r := attach(c, chatID, name, contentType, size)
	if r.Status != 201 {
		t.Fatalf("attach %s: %d %s", name, r.Status, r.Body)
	}
	var out struct{ Data attachmentJSON }
	r.decode(t, &out)
	return out.Data
}

func getAttachment(t *testing.T, c *client, chatID, id string) attachmentJSON {
	t.Helper()
	r := c.do("GET", "/api/chats/"+chatID+"/attachments/"+id, nil)
	if r.Status != 200 {
		t.Fatalf("get attachment %s: %d %s", id, r.Status, r.Body)
	}
	var out struct{ Data attachmentJSON }
	r.decode(t, &out)
	return out.Data
}

// blobRequest sends a request to a signed URL and returns the response
// with its body read.
func blobRequest(t *testing.T, method, url string, body []byte, header map[string]string) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := blobClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// upload PUTs data to a's upload URL as a browser page of frontendOrigin
// does: its preflight first, then the PUT with the upload headers, an
// Origin, Sec-Fetch-Site cross-site and no cookie.
func upload(t *testing.T, a attachmentJSON, data []byte) response {
	t.Helper()
	names := make([]string, 0, len(a.UploadHeaders))
	for k := range a.UploadHeaders {
		names = append(names, strings.ToLower(k))
	}
	pre := blobRequest(t, "OPTIONS", a.UploadURL, nil, map[string]string{"Origin": frontendOrigin,
		"Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": strings.Join(names, ",")})
	allowed := strings.ToLower(pre.Header.Get("Access-Control-Allow-Headers"))
	if pre.Status != 204 || pre.Header.Get("Access-Control-Allow-Origin") != frontendOrigin || !strings.Contains(pre.Header.Get("Access-Control-Allow-Methods"), "PUT") {
		t.Fatalf("preflight of the upload: %d %v", pre.Status, pre.Header)
	}
	for _, n := range names {
		if !strings.Contains(allowed, n) {
			t.Fatalf("preflight allows headers %q, not %s", allowed, n)
		}
	}
	h := map[string]string{"Origin": frontendOrigin, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}
	for k, v := range a.UploadHeaders {
		h[k] = v
	}
	return blobRequest(t, "PUT", a.UploadURL, data, h)
}

var pngFile = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{0x42}, 1000)...)

// TestAttachmentBrowserUpload: a page of the frontend asks for an upload
// with its session, PUTs the file to the signed URL with no cookie (CORS
// preflight answered), and the attachment becomes ready with a download
// URL the page can read.
func TestAttachmentBrowserUpload(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "ALLOWED_ORIGINS="+frontendOrigin)
	ada := newClient(t, srv.API)
	signUpChatUser(t, ada, "ada-files@example.com")
	chat := newChat(t, ada, map[string]string{"title": "files"})

	r := attach(ada, chat.ID, "photo.png", "image/png", int64(len(pngFile)), "Origin", frontendOrigin)
	if r.Status != 201 {
		t.Fatalf("create from the frontend: %d %s", r.Status, r.Body)
	}
	var created struct{ Data attachmentJSON }
	r.decode(t, &created)
	a := created.Data
	if a.Status != "pending" || a.UploadHeaders["Content-Type"] != "image/png" || a.ExpiresAt == nil || !strings.HasPrefix(a.UploadURL, srv.API+"/blobs/") {
		t.Fatalf("created %+v", a)
	}
	if got := getAttachment(t, ada, chat.ID, a.ID); got.Status != "pending" || got.DownloadURL != "" {
		t.Fatalf("before the upload: %+v", got)
	}

	put := upload(t, a, pngFile)
	if put.Status != 200 || put.Header.Get("Access-Control-Allow-Origin") != frontendOrigin || put.Header.Get("ETag") == "" {
		t.Fatalf("browser PUT: %d %v %s", put.Status, put.Header, put.Body)
	}
	ready := getAttachment(t, ada, chat.ID, a.ID)
	if ready.Status != "ready" || ready.DownloadURL == "" || ready.DownloadExpiresAt == nil || ready.ExpiresAt != nil {
		t.Fatalf("after the upload: %+v", ready)
	}
	got := blobRequest(t, "GET", ready.DownloadURL, nil, map[string]string{"Origin": frontendOrigin})
	if got.Status != 200 || !bytes.Equal(got.Body, pngFile) || got.Header.Get("Content-Type") != "image/png" ||
		got.Header.Get("Access-Control-Allow-Origin") != frontendOrigin {
		t.Fatalf("download: %d %v (%d bytes)", got.Status, got.Header, len(got.Body))
	}

	// The URL uploads once; a tampered URL or another origin's preflight
	// is refused.
	if again := upload(t, a, pngFile); again.Status != 412 {
		t.Fatalf("second PUT: %d %s", again.Status, again.Body)
	}
	tampered := strings.Replace(ready.DownloadURL, "attachments%2F", "uploads%2F", 1)
	if r := blobRequest(t, "GET", tampered, nil, nil); r.Status != 403 || !strings.Contains(string(r.Body), "SIGNATURE_INVALID") {
		t.Fatalf("tampered download URL: %d %s", r.Status, r.Body)
	}
	if r := blobRequest(t, "OPTIONS", a.UploadURL, nil, map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "PUT"}); r.Status != 403 {
		t.Fatalf("preflight from another origin: %d", r.Status)
	}
	// A file that is not what it claims fails, with its reason.
	bad := newAttachment(t, ada, chat.ID, "fake.png", "image/png", 5)
	if r := upload(t, bad, []byte("hello")); r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	if f := getAttachment(t, ada, chat.ID, bad.ID); f.Status != "failed" || !strings.Contains(f.Reason, "not a PNG image") {
		t.Fatalf("text uploaded as PNG: %+v", f)
	}
}

// TestAttachmentRules: types, the size limit, the quota counted exactly,
// isolation between users, and a chat's delete taking its attachments'
// bytes and URLs with it.
func TestAttachmentRules(t *testing.T) {
	t.Parallel()
	const limit = 25 << 20
	const quota = limit + 100
	srv := startServer(t, "ALLOWED_ORIGINS="+frontendOrigin, "USER_STORAGE_QUOTA="+strconv.Itoa(quota))
	ada, bob := newClient(t, srv.API), newClient(t, srv.API)
	signUpChatUser(t, ada, "ada-rules@example.com")
	signUpChatUser(t, bob, "bob-rules@example.com")
	chat := newChat(t, ada, map[string]string{"title": "rules"})
	base := "/api/chats/" + chat.ID + "/attachments"

	// Types and sizes.
	expectError(t, "html", attach(ada, chat.ID, "page.html", "text/html", 10), 415, "UNSUPPORTED_MEDIA_TYPE")
	expectError(t, "no size", ada.do("POST", base, map[string]any{"name": "a.txt", "contentType": "text/plain"}), 400, "VALIDATION_FAILED")
	e := expectError(t, "25 MiB and a byte", attach(ada, chat.ID, "big.pdf", "application/pdf", limit+1), 413, "ATTACHMENT_TOO_LARGE")
	if !strings.Contains(e.Message, "26214400") {
		t.Errorf("the size error does not name the limit: %q", e.Message)
	}

	// Exactly 25 MiB, uploaded for real.
	big := newAttachment(t, ada, chat.ID, "big.pdf", "application/pdf", limit)
	pdf := append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte("0"), limit-9)...)
	if r := upload(t, big, pdf); r.Status != 200 {
		t.Fatalf("25 MiB upload: %d %s", r.Status, r.Body)
	}
	bigReady := getAttachment(t, ada, chat.ID, big.ID)
	if bigReady.Status != "ready" || bigReady.Size != limit {
		t.Fatalf("25 MiB: %+v", bigReady)
	}

	// The quota: 25 MiB + 99 is just under, + 100 is at it, one byte more is over.
	newAttachment(t, ada, chat.ID, "under.txt", "text/plain", 99)
	at := newAttachment(t, ada, chat.ID, "at.txt", "text/plain", 1)
	e = expectError(t, "one byte over the quota", attach(ada, chat.ID, "over.txt", "text/plain", 1), 413, "QUOTA_EXCEEDED")
	if !strings.Contains(e.Message, strconv.Itoa(quota)) {
		t.Errorf("the quota error does not say the quota: %q", e.Message)
	}
	// Deleting an attachment gives its bytes back.
	if r := ada.do("DELETE", base+"/"+at.ID, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	expectError(t, "deleted attachment", ada.do("GET", base+"/"+at.ID, nil), 404, "ATTACHMENT_NOT_FOUND")
	pending := newAttachment(t, ada, chat.ID, "again.txt", "text/plain", 1)

	// Isolation.
	expectError(t, "bob reads ada's attachment", bob.do("GET", base+"/"+big.ID, nil), 403, "FORBIDDEN")
	expectError(t, "bob deletes ada's attachment", bob.do("DELETE", base+"/"+big.ID, nil), 403, "FORBIDDEN")
	expectError(t, "bob attaches to ada's chat", attach(bob, chat.ID, "x.txt", "text/plain", 1), 403, "FORBIDDEN")
	expectError(t, "unknown attachment", ada.do("GET", base+"/00000000-0000-4000-8000-000000000009", nil), 404, "ATTACHMENT_NOT_FOUND")
	expectError(t, "malformed id", ada.do("GET", base+"/nope", nil), 400, "INVALID_ID")
	expectError(t, "anonymous", newClient(t, srv.API).do("GET", base+"/"+big.ID, nil), 401, "UNAUTHORIZED")
	bobChat := newChat(t, bob, map[string]string{"title": "bob's"})
	expectError(t, "ada's attachment through bob's chat", bob.do("GET", "/api/chats/"+bobChat.ID+"/attachments/"+big.ID, nil), 404, "ATTACHMENT_NOT_FOUND")

	// Deleting the chat deletes its attachments: when the DELETE has
	// answered, their URLs no longer work and the quota is free.
	if r := ada.do("DELETE", "/api/chats/"+chat.ID, nil); r.Status != 204 {
		t.Fatalf("delete chat: %d %s", r.Status, r.Body)
	}
	if r := blobRequest(t, "GET", bigReady.DownloadURL, nil, nil); r.Status != 404 {
		t.Fatalf("download URL after the chat's delete: %d", r.Status)
	}
	if r := upload(t, pending, []byte("x")); r.Status != 412 {
		t.Fatalf("upload URL after the chat's delete: %d %s", r.Status, r.Body)
	}
	expectError(t, "attachment of a deleted chat", ada.do("GET", base+"/"+big.ID, nil), 404, "CHAT_NOT_FOUND")
	other := newChat(t, ada, map[string]string{"title": "after"})
	newAttachment(t, ada, other.ID, "big-again.pdf", "application/pdf", limit)
	newAttachment(t, ada, other.ID, "rest.txt", "text/plain", quota-limit)
}

// TestAttachmentsSurviveRestart: with DATA_FILE the files are kept beside
// it (DATA_FILE.blobs) and a restarted server serves them, under the URLs
// signed before the restart too (the signing secret is kept beside
// DATA_FILE, DATA_FILE.blob-secret, mode 0600).
func TestAttachmentsSurviveRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data", "devserver.json")
	srv, ada, token := signedUpOnFile(t, file, "ada-restart-files@example.com")
	chat := newChat(t, ada, map[string]string{"title": "kept"})
	a := newAttachment(t, ada, chat.ID, "notes.md", "text/markdown", 12)
	if r := upload(t, a, []byte("# kept ✓\n\n")); r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	before := getAttachment(t, ada, chat.ID, a.ID)
	if before.Status != "ready" {
		t.Fatalf("before restart: %+v", before)
	}
	out := stopServer(t, srv)
	if !strings.Contains(out, "devserver.json.blobs") {
		t.Errorf("the server did not say where it keeps blobs:\n%s", out)
	}

	again := startServer(t, "DATA_FILE="+file, "ALLOWED_ORIGINS="+frontendOrigin)
	c := withCookie(t, again.API, token)
	after := getAttachment(t, c, chat.ID, a.ID)
	if after.Status != "ready" || after.DownloadURL == "" {
		t.Fatalf("after restart: %+v", after)
	}
	for _, u := range []string{after.DownloadURL, onServer(t, before.DownloadURL, again.API)} {
		if r := blobRequest(t, "GET", u, nil, nil); r.Status != 200 || string(r.Body) != "# kept ✓\n\n" {
			t.Fatalf("download after restart: %d %q", r.Status, r.Body)
		}
	}
	if fi, err := os.Stat(file + ".blob-secret"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the signing secret file: %v, %v; want mode 0600", fi, err)
	}
}

// signedUpOnFile starts a dev server over DATA_FILE file and signs up
// email: the server, the user's client and session token (to use after a
// restart).
func signedUpOnFile(t *testing.T, file, email string) (*server, *client, string) {
	t.Helper()
	srv := startServer(t, "DATA_FILE="+file, "ALLOWED_ORIGINS="+frontendOrigin)
	c := newClient(t, srv.API)
	r := c.do("POST", "/api/auth/sign-up/email", map[string]string{"email": email, "password": "chat-password-1", "name": "Ada"})
	if r.Status != 200 {
		t.Fatalf("sign-up: %d %s", r.Status, r.Body)
	}
	return srv, c, sessionToken(t, r)
}

// onServer returns signed URL u moved to the server at api: a restarted
// test server listens on another port (PORT=0); a dev server on a fixed
// PORT keeps its URLs as they are.
func onServer(t *testing.T, u, api string) string {
	t.Helper()
	moved, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	base, err := url.Parse(api)
	if err != nil {
		t.Fatal(err)
	}
	moved.Host = base.Host
	return moved.String()
}

// TestPendingUploadAfterRestart: an attachment created before a restart
// of the dev server and not yet uploaded is uploaded after it, with the
// create's URL or with the one its read signs afresh, and becomes ready.
func TestPendingUploadAfterRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	srv, ada, token := signedUpOnFile(t, file, "ada-pending-restart@example.com")
	chat := newChat(t, ada, map[string]string{"title": "pending"})
	content := []byte("# later\n")
	created := newAttachment(t, ada, chat.ID, "created.md", "text/markdown", int64(len(content)))
	reread := newAttachment(t, ada, chat.ID, "reread.md", "text/markdown", int64(len(content)))
	stopServer(t, srv)

	again := startServer(t, "DATA_FILE="+file, "ALLOWED_ORIGINS="+frontendOrigin)
	c := withCookie(t, again.API, token)
	read := getAttachment(t, c, chat.ID, reread.ID)
	if read.Status != "pending" || read.UploadURL == "" || read.UploadHeaders["Content-Type"] != "text/markdown" ||
		read.ExpiresAt == nil || !read.ExpiresAt.Equal(*reread.ExpiresAt) {
		t.Fatalf("a pending attachment read after the restart: %+v", read)
	}
	if r := upload(t, read, content); r.Status != 200 {
		t.Fatalf("upload with the read's URL: %d %s", r.Status, r.Body)
	}
	created.UploadURL = onServer(t, created.UploadURL, again.API)
	if r := upload(t, created, content); r.Status != 200 {
		t.Fatalf("upload with the create's URL: %d %s", r.Status, r.Body)
	}
	for _, id := range []string{created.ID, reread.ID} {
		got := getAttachment(t, c, chat.ID, id)
		if got.Status != "ready" || got.UploadURL != "" {
			t.Fatalf("after the upload: %+v", got)
		}
		if r := blobRequest(t, "GET", got.DownloadURL, nil, nil); r.Status != 200 || !bytes.Equal(r.Body, content) {
			t.Fatalf("download: %d %q", r.Status, r.Body)
		}
	}
}

// TestAttachmentAsRunInput: a run input of format attachment takes the id
// of one of the user's ready attachments, and steps read the file's text
// as {{input.<name>}}; an id of another user's attachment, one not yet
// uploaded, and an image are 400 INVALID_INPUT naming the field, and no
// run starts.
func TestAttachmentAsRunInput(t *testing.T) {
	t.Parallel()
	srv := durableServer(t, "ALLOWED_ORIGINS="+frontendOrigin)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "file-input@example.com")
	chatID := newChat(t, c, map[string]string{"title": "files"}).ID
	csv := []byte("name,age\nAda,36\nAlan,41\n")
	a := newAttachment(t, c, chatID, "people.csv", "text/csv", int64(len(csv)))
	if r := upload(t, a, csv); r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	wfID := defineWorkflow(t, c, userID, "people", `{
	  "inputSchema": {"type": "object", "properties": {"doc": {"type": "string", "format": "attachment"}}, "required": ["doc"]},
	  "steps": [{"id": "rows", "toolId": "csv_parse", "inputs": {"text": "{{input.doc}}"}},
	            {"id": "names", "toolId": "json_query", "inputs": {"input": "{{rows.rows}}", "query": "map(.name)"}}]}`)
	status, run := startRun(t, c, chatID, wfID, map[string]any{"doc": a.ID})
	if b, _ := json.Marshal(run.Steps[1].Output["result"]); status != 201 || run.Status != "completed" || string(b) != `["Ada","Alan"]` {
		t.Fatalf("run over the attachment: %d %s %q %s", status, run.Status, run.Error, b)
	}
	if run.Trigger == nil || getRunInput(t, c, wfID, run.ID)["doc"] != a.ID {
		t.Errorf("the run's input should name the attachment")
	}

	other := newClient(t, srv.API)
	signUpChatUser(t, other, "file-input-other@example.com")
	otherChat := newChat(t, other, map[string]string{"title": "theirs"}).ID
	theirs := newAttachment(t, other, otherChat, "t.csv", "text/csv", int64(len(csv)))
	if r := upload(t, theirs, csv); r.Status != 200 {
		t.Fatalf("upload: %d", r.Status)
	}
	pending := newAttachment(t, c, chatID, "later.csv", "text/csv", 10)
	img := newAttachment(t, c, chatID, "p.png", "image/png", int64(len(pngFile)))
	if r := upload(t, img, pngFile); r.Status != 200 {
		t.Fatalf("upload png: %d", r.Status)
	}
	for name, id := range map[string]string{"another user's": theirs.ID, "not uploaded": pending.ID, "an image": img.ID, "no such": "00000000-0000-4000-8000-000000000000"} {
		r := c.do("POST", "/api/chats/"+chatID+"/workflow-runs", map[string]any{"workflowId": wfID, "input": map[string]any{"doc": id}})
		e := expectError(t, name, r, 400, "INVALID_INPUT")
		if len(e.Details) != 1 || e.Details[0].Field != "input.doc" {
			t.Errorf("%s: details %+v", name, e.Details)
		}
		// Another user's file reads as no file at all: nothing tells
		// the caller it exists.
		if name == "another user's" && (strings.Contains(e.Message, "access") || !strings.Contains(e.Message, "no attachment")) {
			t.Errorf("%s: %q tells more than that there is no such attachment", name, e.Message)
		}
	}
	var list struct {
		Data struct{ WorkflowRuns []unattendedRun }
	}
	c.do("GET", "/api/workflows/"+wfID+"/runs", nil).decode(t, &list)
	if len(list.Data.WorkflowRuns) != 1 {
		t.Errorf("%d runs after one good and four refused starts", len(list.Data.WorkflowRuns))
	}
}

func getRunInput(t *testing.T, c *client, wfID, runID string) map[string]any {
	t.Helper()
	var out struct {
		Data struct {
			Input map[string]any `json:"input"`
		}
	}
	c.do("GET", "/api/workflows/"+wfID+"/runs/"+runID, nil).decode(t, &out)
	return out.Data.Input
}
