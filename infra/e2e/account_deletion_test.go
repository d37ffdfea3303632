package e2e_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAccountDeletionErasesEverything: a user who used every feature
// (a chat with a reply and an attachment, a workflow with a webhook
// trigger and runs, a tool policy, a personal access token, a queued
// data export, an audit log)
// deletes the account: a wrong password is 403 INVALID_CREDENTIALS and
// changes nothing; the right one is 202, and at once the session, the
// token and sign-in stop working. The server is then killed (kill -9)
// before its sweeper ran: the erasure, queued with the deletion, runs
// after the restart. Once it has, the email signs up again (a new
// account), and the data file and the blob folder hold nothing of the
// user: no item, object or path names the user's id or any id the user
// created. Another user's data is untouched.
func TestAccountDeletionErasesEverything(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	clock := newClockFile(t)
	// The sweeper sweeps at start, then not for 10 minutes.
	srv := durableServer(t, "DATA_FILE="+file, "ALLOWED_ORIGINS="+frontendOrigin, "SWEEP_INTERVAL=10m", "DEV_CLOCK_FILE="+string(clock))
	c := newClient(t, srv.API)
	const email = "erase-me@example.com"
	userID := signUpChatUser(t, c, email)
	other := newClient(t, srv.API)
	otherID := signUpChatUser(t, other, "keep-me@example.com")
	otherChat := newChat(t, other, map[string]string{"title": "kept"}).ID

	chatID := newChat(t, c, map[string]string{"title": "doomed"}).ID
	if r := c.do("POST", "/api/chats/"+chatID+"/messages", map[string]string{"content": "hello there"}); r.Status != 200 && r.Status != 201 {
		t.Fatalf("message: %d %s", r.Status, r.Body)
	}
	doc := readyCSV(t, c, chatID)
	wfID := defineWorkflow(t, c, userID, "people", peopleWorkflow)
	tr := createTrigger(t, c, wfID, `{"type":"webhook","enabled":true}`)
	status, run := startRun(t, c, chatID, wfID, map[string]any{"doc": doc})
	if status != 201 {
		t.Fatalf("run: %d", status)
	}
	if r := c.do("PUT", "/api/users/"+userID+"/tool-permissions/http_request", map[string]string{"policy": "deny"}); r.Status != 200 {
		t.Fatalf("policy: %d %s", r.Status, r.Body)
	}
	var exp struct{ Data struct{ ID string } }
	if r := c.do("POST", "/api/users/"+userID+"/exports", nil); r.Status != 202 {
		t.Fatalf("export: %d %s", r.Status, r.Body)
	} else {
		r.decode(t, &exp)
	}
	var pat struct{ Data struct{ ID, Token string } }
	c.do("POST", "/api/users/"+userID+"/tokens", `{"name":"doomed","expiresInDays":1}`).decode(t, &pat)
	if pat.Data.Token == "" {
		t.Fatal("no personal access token")
	}
	// The audit log: this sign-in, then a failed one from another client.
	if r := c.do("POST", "/api/auth/sign-in/email", map[string]string{"email": email, "password": "chat-password-1"}); r.Status != 200 {
		t.Fatalf("sign-in: %d %s", r.Status, r.Body)
	}
	expectError(t, "wrong password at sign-in", newClient(t, srv.API).do("POST", "/api/auth/sign-in/email",
		map[string]string{"email": email, "password": "wrong-password-9"}), 401, "INVALID_CREDENTIALS")
	var log struct {
		Data struct {
			Events []struct{ Type, IP, UserAgent string }
		}
	}
	c.do("GET", "/api/users/"+userID+"/audit", nil).decode(t, &log)
	if len(log.Data.Events) != 5 || log.Data.Events[0].Type != "sign_in_failed" || log.Data.Events[1].Type != "sign_in" || log.Data.Events[0].IP == "" {
		t.Fatalf("audit log %+v; want the failed sign-in newest, then the sign-in, with addresses", log.Data.Events)
	}
	expectError(t, "another user's audit log", other.do("GET", "/api/users/"+userID+"/audit", nil), 403, "FORBIDDEN")

	// Deletion: another user's id, a missing and a wrong password.
	expectError(t, "delete another user", other.do("DELETE", "/api/users/"+userID, map[string]string{"password": "chat-password-1"}), 403, "FORBIDDEN")
	expectError(t, "delete without password", c.do("DELETE", "/api/users/"+userID, map[string]string{}), 400, "VALIDATION_FAILED")
	expectError(t, "delete, wrong password", c.do("DELETE", "/api/users/"+userID, map[string]string{"password": "wrong-password-9"}), 403, "INVALID_CREDENTIALS")
	if r := c.do("GET", "/api/chats/"+chatID, nil); r.Status != 200 {
		t.Fatalf("after a refused deletion the chat answers %d", r.Status)
	}
	var share struct{ Data shareJSON }
	if r := c.do("POST", "/api/chats/"+chatID+"/shares", nil); r.Status != 201 {
		t.Fatalf("share: %d %s", r.Status, r.Body)
	} else {
		r.decode(t, &share)
	}
	anon := newClient(t, srv.API)
	if r := anon.do("GET", "/api/shares/"+share.Data.ID, nil); r.Status != 200 {
		t.Fatalf("the share before deletion: %d %s", r.Status, r.Body)
	}
	if r := c.do("DELETE", "/api/users/"+userID, map[string]string{"password": "chat-password-1"}); r.Status != 202 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	// At once, before the erasure (the sweeper is 10 minutes away): the
	// public share is gone and the webhook takes no call.
	expectError(t, "the share after deletion", anon.do("GET", "/api/shares/"+share.Data.ID, nil), 404, "SHARE_NOT_FOUND")
	hookBody := `{"n":1}`
	expectError(t, "a signed webhook call after deletion", anon.do("POST", "/hooks/"+tr.ID, hookBody,
		"X-Signature", webhookSignature(tr.Secret, fmt.Sprint(time.Now().Unix()), hookBody)), 404, "TRIGGER_NOT_FOUND")
	// At once: no session, no token, no sign-in; the email is free.
	expectError(t, "the session after deletion", c.do("GET", "/api/auth/session", nil), 401, "UNAUTHORIZED")
	bearer := newClient(t, srv.API).do("POST", "/api/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		"Authorization", "Bearer "+pat.Data.Token, "Accept", "application/json, text/event-stream")
	if bearer.Status != 401 {
		t.Errorf("the personal access token after deletion: %d %s", bearer.Status, bearer.Body)
	}
	expectError(t, "sign-in after deletion", newClient(t, srv.API).do("POST", "/api/auth/sign-in/email",
		map[string]string{"email": email, "password": "chat-password-1"}), 401, "INVALID_CREDENTIALS")

	_ = srv.cmd.Process.Kill()
	<-srv.done
	srv = durableServer(t, "DATA_FILE="+file, "ALLOWED_ORIGINS="+frontendOrigin, "LOG_LEVEL=info", "DEV_CLOCK_FILE="+string(clock))
	waitFor(t, "the erasure's first pass", func() bool { return strings.Contains(srv.logs.String(), `"account erased; a last pass follows"`) })
	// The last pass, once the upload URLs the user may hold expired.
	clock.ahead(t, 17*time.Minute)
	waitFor(t, "the erasure", func() bool { return strings.Contains(srv.logs.String(), `"account erased"`) })
	other = newClient(t, srv.API)
	if r := other.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "keep-me@example.com", "password": "chat-password-1"}); r.Status != 200 {
		t.Fatalf("the other user's sign-in after the restart: %d %s", r.Status, r.Body)
	}
	again := newClient(t, srv.API)
	newID := signUpChatUser(t, again, email)
	if newID == userID {
		t.Fatal("signing up again gave the deleted user's id")
	}
	if r := other.do("GET", "/api/chats/"+otherChat, nil); r.Status != 200 {
		t.Errorf("another user's chat after the erasure: %d", r.Status)
	}
	// The new account's sign-up wrote the email again: the old account
	// is looked for by its ids.
	_ = srv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-srv.done:
	case <-time.After(patience):
		t.Fatal("the dev server did not stop")
	}
	traces := map[string]string{"user id": userID, "chat": chatID, "workflow": wfID, "trigger": tr.ID, "run": run.ID, "attachment": doc, "token id": pat.Data.ID, "export": exp.Data.ID}
	var found []string
	err := filepath.WalkDir(filepath.Dir(file), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for what, id := range traces {
			if id == "" {
				continue
			}
			if strings.Contains(path, id) {
				found = append(found, what+" in the path "+path)
			}
			if i := bytes.Index(b, []byte(id)); i >= 0 {
				found = append(found, what+" in "+filepath.Base(path)+": …"+string(b[max(0, i-200):min(len(b), i+100)])+"…")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
	if otherID == "" {
		t.Fatal("no other user")
	}
}

// TestAuditLogRecordsSecurityEvents: each security action of a session
// lands in the user's audit log, newest first, with the client's address
// and user agent and what it acted on; paging by cursor lists each event
// once; a cursor it did not give is 400.
func TestAuditLogRecordsSecurityEvents(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "ALLOWED_ORIGINS="+frontendOrigin)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "audited@example.com")
	wfID := defineWorkflow(t, c, userID, "audited", `{"steps":[{"id":"a","toolId":"json_query","inputs":{"input":1,"query":"."}}]}`)
	tr := createTrigger(t, c, wfID, `{"type":"webhook","enabled":true}`)
	if r := c.do("POST", "/api/workflows/"+wfID+"/triggers/"+tr.ID+"/rotate-secret", map[string]any{}); r.Status != 200 {
		t.Fatalf("rotate: %d %s", r.Status, r.Body)
	}
	if r := c.do("PUT", "/api/users/"+userID+"/tool-permissions/hash", map[string]string{"policy": "ask"}); r.Status != 200 {
		t.Fatalf("policy: %d %s", r.Status, r.Body)
	}
	var srvJSON struct{ Data struct{ ID string } }
	c.do("POST", "/api/mcp-servers", `{"name":"audited","url":"https://mcp.example.com/mcp","auth":{"type":"oauth"}}`).decode(t, &srvJSON)
	if srvJSON.Data.ID == "" {
		t.Fatal("no MCP server created")
	}
	if r := c.do("DELETE", "/api/mcp-servers/"+srvJSON.Data.ID, nil); r.Status != 204 {
		t.Fatalf("delete MCP server: %d %s", r.Status, r.Body)
	}
	var pat struct{ Data struct{ ID string } }
	c.do("POST", "/api/users/"+userID+"/tokens", `{"name":"audited","expiresInDays":1}`).decode(t, &pat)
	if r := c.do("DELETE", "/api/users/"+userID+"/tokens/"+pat.Data.ID, nil); r.Status != 204 {
		t.Fatalf("revoke token: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "audited@example.com", "password": "chat-password-1"},
		"User-Agent", "audit-test/2.0"); r.Status != 200 {
		t.Fatalf("sign-in: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/api/auth/sign-out-all", nil); r.Status != 200 {
		t.Fatalf("sign-out-all: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "audited@example.com", "password": "chat-password-1"}); r.Status != 200 {
		t.Fatalf("sign-in again: %d %s", r.Status, r.Body)
	}
	type event struct {
		ID, Type, IP, UserAgent string
		Details                 map[string]any
	}
	var all []event
	cursor := ""
	for range 20 {
		var page struct {
			Data struct {
				Events     []event
				NextCursor string
			}
		}
		path := "/api/users/" + userID + "/audit?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		c.do("GET", path, nil).decode(t, &page)
		all = append(all, page.Data.Events...)
		if cursor = page.Data.NextCursor; cursor == "" {
			break
		}
	}
	var types []string
	for _, e := range all {
		types = append(types, e.Type)
	}
	want := []string{"sign_in", "sign_out_all", "sign_in", "token_revoked", "token_created", "mcp_server_removed", "mcp_server_added", "policy_changed", "trigger_secret_rotated"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Fatalf("audit log %v, want %v (newest first)", types, want)
	}
	if e := all[2]; e.UserAgent != "audit-test/2.0" || e.IP != "127.0.0.1" {
		t.Errorf("the sign-in's origin: %q %q", e.IP, e.UserAgent)
	}
	if all[3].Details["tokenId"] != pat.Data.ID || all[6].Details["serverId"] != srvJSON.Data.ID || all[7].Details["toolId"] != "hash" || all[8].Details["triggerId"] != tr.ID {
		t.Errorf("details: %+v", all)
	}
	expectError(t, "bad cursor", c.do("GET", "/api/users/"+userID+"/audit?cursor=nope", nil), 400, "INVALID_PAGINATION")
}
