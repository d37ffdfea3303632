package e2e_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type exportJSON struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	DownloadURL string `json:"downloadUrl"`
	Error       string `json:"error"`
}

// TestExportHoldsTheAccount: a user with a chat (a message, an
// attachment), a workflow with a webhook trigger and a run requests an
// export: 202 pending, and a second request while it is queued is 409
// EXPORT_IN_PROGRESS. The sweeper writes it; once completed, its
// downloadUrl gives a zip holding the profile, the chat's messages, runs,
// attachments and share, the attachment's bytes, the workflow with both
// its versions, its run and its trigger, the knowledge base with its
// document and the document's chunks, the remote MCP server, and the
// audit log with the request; nowhere the trigger's secret or the MCP
// server's header value. Another user cannot
// read the export (403 by user id, 404 by export id) nor request one for
// this user (403). A request over RATE_LIMIT_EXPORTS is 429.
func TestExportHoldsTheAccount(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	// The sweeper sweeps at start, then not for 10 minutes: the export
	// stays queued until the restart below.
	// RATE_LIMIT_EXPORTS counts per hour of the server's clock: every
	// request of this test falls in one hour of it.
	clock := newClockFile(t)
	clock.toStartOf(t, time.Hour)
	srv := durableServer(t, "DATA_FILE="+file, "ALLOWED_ORIGINS="+frontendOrigin, "SWEEP_INTERVAL=10m", "DEV_CLOCK_FILE="+string(clock),
		"TOOLS_ALLOW_PRIVATE_NETWORKS=true")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "export-me@example.com")
	other := newClient(t, srv.API)
	otherID := signUpChatUser(t, other, "nosy@example.com")

	chatID := newChat(t, c, map[string]string{"title": "to take away"}).ID
	const said = "remember the blue heron"
	if r := c.do("POST", "/api/chats/"+chatID+"/messages", map[string]string{"content": said}); r.Status != 200 && r.Status != 201 {
		t.Fatalf("message: %d %s", r.Status, r.Body)
	}
	doc := readyCSV(t, c, chatID)
	wfID := defineWorkflow(t, c, userID, "people", peopleWorkflow)
	tr := createTrigger(t, c, wfID, `{"type":"webhook","enabled":true}`)
	if tr.Secret == "" {
		t.Fatal("no webhook secret")
	}
	if status, _ := startRun(t, c, chatID, wfID, map[string]any{"doc": doc}); status != 201 {
		t.Fatalf("run: %d", status)
	}
	// A second version of the workflow, a share of the chat, a knowledge
	// base with an indexed document, a remote MCP server with a secret
	// header.
	if r := c.do("PATCH", "/api/workflows/"+wfID, map[string]any{"description": "the second version"}); r.Status != 200 {
		t.Fatalf("second version: %d %s", r.Status, r.Body)
	}
	var share struct{ Data struct{ ID, URL string } }
	if r := c.do("POST", "/api/chats/"+chatID+"/shares", nil); r.Status != 201 {
		t.Fatalf("share: %d %s", r.Status, r.Body)
	} else {
		r.decode(t, &share)
	}
	const kbFact = "The lighthouse keeper feeds the gulls at dawn."
	kb := newKnowledgeBase(t, c, "notes")
	kdoc := addDocument(t, c, kb.ID, readyAttachment(t, c, chatID, "notes.md", "text/markdown", []byte("# Notes\n\n"+kbFact+"\n")).ID)
	if got := indexed(t, c, kb.ID, kdoc.ID); got.Status != "ready" {
		t.Fatalf("document: %+v", got)
	}
	const mcpSecret = "Bearer mcp-secret-never-exported-42"
	mcp := createMCPServer(t, c, map[string]any{"name": "remote", "url": "http://127.0.0.1:1/mcp",
		"auth": map[string]string{"type": "header", "name": "Authorization", "value": mcpSecret}})

	expectError(t, "another user's export request", other.do("POST", "/api/users/"+userID+"/exports", nil), 403, "FORBIDDEN")
	r := c.do("POST", "/api/users/"+userID+"/exports", nil)
	if r.Status != 202 {
		t.Fatalf("export: %d %s", r.Status, r.Body)
	}
	var req struct{ Data exportJSON }
	r.decode(t, &req)
	if req.Data.ID == "" || req.Data.Status != "pending" {
		t.Fatalf("export answer %s; want an id, pending", r.Body)
	}
	expectError(t, "a second export while one is queued", c.do("POST", "/api/users/"+userID+"/exports", nil), 409, "EXPORT_IN_PROGRESS")
	if got := getExport(t, c, userID, req.Data.ID); got.Status != "pending" || got.DownloadURL != "" {
		t.Fatalf("queued export %+v; want pending without a downloadUrl", got)
	}
	expectError(t, "another user's export by user id", other.do("GET", "/api/users/"+userID+"/exports/"+req.Data.ID, nil), 403, "FORBIDDEN")
	expectError(t, "another user's export by its id", other.do("GET", "/api/users/"+otherID+"/exports/"+req.Data.ID, nil), 404, "EXPORT_NOT_FOUND")
	expectError(t, "a malformed export id", c.do("GET", "/api/users/"+userID+"/exports/nope", nil), 400, "INVALID_ID")

	// A crash (kill -9) with the export queued: the restarted server's
	// sweeper writes it.
	_ = srv.cmd.Process.Kill()
	<-srv.done
	srv = durableServer(t, "DATA_FILE="+file, "ALLOWED_ORIGINS="+frontendOrigin, "SWEEP_INTERVAL=300ms", "DEV_CLOCK_FILE="+string(clock))
	c = newClient(t, srv.API)
	if r := c.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "export-me@example.com", "password": "chat-password-1"}); r.Status != 200 {
		t.Fatalf("sign-in after the restart: %d %s", r.Status, r.Body)
	}
	var done exportJSON
	waitFor(t, "the export completed", func() bool {
		done = getExport(t, c, userID, req.Data.ID)
		if done.Status == "failed" {
			t.Fatalf("export failed: %s", done.Error)
		}
		return done.Status == "completed"
	})
	if done.DownloadURL == "" {
		t.Fatal("completed export without a downloadUrl")
	}
	dl := blobRequest(t, "GET", done.DownloadURL, nil, nil)
	if dl.Status != 200 {
		t.Fatalf("download: %d %s", dl.Status, dl.Body)
	}
	zr, err := zip.NewReader(bytes.NewReader(dl.Body), int64(len(dl.Body)))
	if err != nil {
		t.Fatalf("the download is not a zip: %v", err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name] = b
		if bytes.Contains(b, []byte(tr.Secret)) {
			t.Errorf("the trigger's secret is in %s", f.Name)
		}
		if bytes.Contains(b, []byte("mcp-secret-never-exported")) {
			t.Errorf("the MCP server's secret is in %s", f.Name)
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	want := map[string]string{
		"profile.json":                                           "export-me@example.com",
		"chats/" + chatID + "/chat.json":                         said,
		"workflows/" + wfID + "/workflow.json":                   tr.ID,
		"audit.json":                                             "export_requested",
		"tool-policies.json":                                     "",
		"mcp-servers.json":                                       mcp.ID,
		"knowledge/" + kb.ID + "/knowledge-base.json":            kdoc.ID,
		"knowledge/" + kb.ID + "/documents/" + kdoc.ID + ".json": "lighthouse keeper",
	}
	// The month's usage, in the API's field names.
	usageFiles := 0
	for n, b := range files {
		if strings.HasPrefix(n, "usage/") {
			usageFiles++
			if !strings.Contains(string(b), `"inputTokens"`) {
				t.Errorf("%s: %s, want the API's field names (inputTokens)", n, b)
			}
		}
	}
	if usageFiles == 0 {
		t.Errorf("the zip has no usage month; it has %v", names)
	}
	// Every member of the chat's and the workflow's files, the share
	// and both versions.
	var chatFile struct {
		Chat                        map[string]any
		Messages, Runs, Attachments []map[string]any
		Shares                      []struct{ ID, URL string }
	}
	if err := json.Unmarshal(files["chats/"+chatID+"/chat.json"], &chatFile); err != nil {
		t.Fatalf("chat.json: %v", err)
	}
	if chatFile.Chat["id"] != chatID || len(chatFile.Messages) < 2 || len(chatFile.Runs) != 1 || len(chatFile.Attachments) != 2 ||
		len(chatFile.Shares) != 1 || chatFile.Shares[0].ID != share.Data.ID || chatFile.Shares[0].URL == "" || chatFile.Shares[0].URL != share.Data.URL {
		t.Errorf("chat.json: %d messages, %d runs, %d attachments, shares %+v", len(chatFile.Messages), len(chatFile.Runs), len(chatFile.Attachments), chatFile.Shares)
	}
	var wfFile struct {
		Workflow map[string]any
		Versions []struct {
			Version     int
			Description string
		}
		Runs, Triggers []map[string]any
	}
	if err := json.Unmarshal(files["workflows/"+wfID+"/workflow.json"], &wfFile); err != nil {
		t.Fatalf("workflow.json: %v", err)
	}
	if wfFile.Workflow["id"] != wfID || len(wfFile.Versions) < 2 || wfFile.Versions[0].Description != "the second version" || len(wfFile.Runs) != 1 || len(wfFile.Triggers) != 1 {
		t.Errorf("workflow.json: versions %+v, %d runs, %d triggers", wfFile.Versions, len(wfFile.Runs), len(wfFile.Triggers))
	}
	for name, content := range want {
		b, ok := files[name]
		if !ok {
			t.Errorf("the zip has no %s; it has %v", name, names)
			continue
		}
		if !strings.Contains(string(b), content) {
			t.Errorf("%s does not hold %q: %s", name, content, b)
		}
	}
	att := files["chats/"+chatID+"/attachments/"+doc+"/people.csv"]
	if !bytes.Equal(att, peopleCSV) {
		t.Errorf("the attachment's bytes in the zip = %q, want %q (files %v)", att, peopleCSV, names)
	}
	for n := range files {
		if strings.Contains(n, otherID) {
			t.Errorf("another user's data in the zip: %s", n)
		}
	}
	// RATE_LIMIT_EXPORTS (3/h) counts the exports started, not the
	// requests refused 409 while one is in progress: after the first, two
	// more start (each once the one before it ended), and a fourth is 429.
	for i := 2; i <= 3; i++ {
		r := c.do("POST", "/api/users/"+userID+"/exports", nil)
		if r.Status != 202 {
			t.Fatalf("export %d after the one before completed: %d %s", i, r.Status, r.Body)
		}
		var next struct{ Data exportJSON }
		r.decode(t, &next)
		expectError(t, "a request while it is queued", c.do("POST", "/api/users/"+userID+"/exports", nil), 409, "EXPORT_IN_PROGRESS")
		waitFor(t, "the next export completed", func() bool {
			got := getExport(t, c, userID, next.Data.ID)
			if got.Status == "failed" {
				t.Fatalf("export %d failed: %s", i, got.Error)
			}
			return got.Status == "completed"
		})
	}
	expectError(t, "an export over the rate limit", c.do("POST", "/api/users/"+userID+"/exports", nil), 429, "RATE_LIMITED")
}

func getExport(t *testing.T, c *client, userID, id string) exportJSON {
	t.Helper()
	r := c.do("GET", "/api/users/"+userID+"/exports/"+id, nil)
	if r.Status != 200 {
		t.Fatalf("get export: %d %s", r.Status, r.Body)
	}
	var out struct{ Data exportJSON }
	r.decode(t, &out)
	return out.Data
}
