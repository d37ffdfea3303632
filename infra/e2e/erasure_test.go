package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestErasureSurvivesKillMidwayAndLateUploads: a user with many chats
// (so that erasing them takes a while), a workflow and an attachment
// whose upload URL was issued but not yet used deletes the account. The
// restarted server's sweeper starts the erasure and the server is killed
// (kill -9) as soon as it has, before it finished; the next start
// finishes the first pass. The upload URL, issued before the deletion and
// still valid, is then used: the bytes land in the blob folder, and the
// erasure's last pass (due once every upload URL the user held expired,
// here brought forward by the server's clock) erases them. Nothing in the
// data file or the blob folder names the user or anything the user had,
// and the email signs up again.
func TestErasureSurvivesKillMidwayAndLateUploads(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	clock := newClockFile(t)
	env := []string{"DATA_FILE=" + file, "ALLOWED_ORIGINS=" + frontendOrigin, "DEV_CLOCK_FILE=" + string(clock), "LOG_LEVEL=info"}
	// The sweeper sweeps at start, then not for 10 minutes.
	srv := durableServer(t, append(env, "SWEEP_INTERVAL=10m")...)
	c := newClient(t, srv.API)
	const email = "erase-midway@example.com"
	userID := signUpChatUser(t, c, email)
	traces := map[string]string{"user id": userID}
	for i := range 40 {
		id := newChat(t, c, map[string]string{"title": fmt.Sprintf("chat %d", i)}).ID
		traces[fmt.Sprintf("chat %d", i)] = id
		if i%10 == 0 {
			if r := c.do("POST", "/api/chats/"+id+"/messages", map[string]string{"content": "hello there"}); r.Status != 200 && r.Status != 201 {
				t.Fatalf("message: %d %s", r.Status, r.Body)
			}
		}
	}
	chatID := traces["chat 0"]
	traces["workflow"] = defineWorkflow(t, c, userID, "doomed", `{"steps":[{"id":"a","toolId":"json_query","inputs":{"input":1,"query":"."}}]}`)
	late := newAttachment(t, c, chatID, "late.md", "text/markdown", 8)
	traces["late upload"] = late.ID
	if r := c.do("DELETE", "/api/users/"+userID, map[string]string{"password": "chat-password-1"}); r.Status != 202 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	_ = srv.cmd.Process.Kill()
	<-srv.done

	// Killed as soon as the erasure started.
	srv = durableServer(t, append(env, "SWEEP_INTERVAL=10m")...)
	waitFor(t, "the erasure started", func() bool { return strings.Contains(srv.logs.String(), `"account erasure started"`) })
	_ = srv.cmd.Process.Signal(syscall.SIGKILL)
	<-srv.done
	if strings.Contains(srv.logs.String(), `"account erased`) {
		t.Fatal("the erasure finished before the kill; the test needs a larger account")
	}

	srv = durableServer(t, env...)
	waitFor(t, "the erasure's first pass", func() bool { return strings.Contains(srv.logs.String(), `"account erased; a last pass follows"`) })
	late.UploadURL = onServer(t, late.UploadURL, srv.API)
	if r := upload(t, late, []byte("# late\n\n")); r.Status != 200 {
		t.Fatalf("the late upload: %d %s", r.Status, r.Body)
	}
	if len(tracesIn(t, file+".blobs", map[string]string{"late upload": late.ID})) == 0 {
		t.Fatal("the late upload is not in the blob folder")
	}
	clock.ahead(t, 17*time.Minute)
	waitFor(t, "the erasure's last pass", func() bool { return strings.Contains(srv.logs.String(), `"account erased"`) })
	if id := signUpChatUser(t, newClient(t, srv.API), email); id == userID {
		t.Fatal("signing up again gave the deleted user's id")
	}
	_ = srv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-srv.done:
	case <-time.After(patience):
		t.Fatal("the dev server did not stop")
	}
	for _, f := range tracesIn(t, filepath.Dir(file), traces) {
		t.Error(f)
	}
}

// tracesIn lists where, in the files under dir (their paths and bytes),
// any of traces' ids appears.
func tracesIn(t *testing.T, dir string, traces map[string]string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
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
				found = append(found, what+" in "+filepath.Base(path)+": …"+string(b[max(0, i-300):min(len(b), i+300)])+"…")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestReplyStreamingDuringErasureWritesNoUsageBack: a user with a monthly
// budget (each model call reserves, then settles) deletes the account
// while a slow reply streams. Whatever the reply does once its chat is
// gone, no usage month of the user is left once the reply has ended and
// the first pass has run: a settle never writes back the counter the
// erasure removed. The reply's log events written after its chat was
// deleted (an append is a Put of its slot, not checked against the chat)
// are deleted by the last pass, which knows the chat from the first
// (Deletion.BusyChats): nothing of the user or the chat is left.
func TestReplyStreamingDuringErasureWritesNoUsageBack(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	clock := newClockFile(t)
	env := []string{"DATA_FILE=" + file, "ALLOWED_ORIGINS=" + frontendOrigin, "DEV_CLOCK_FILE=" + string(clock), "LOG_LEVEL=info",
		"USER_MONTHLY_TOKEN_BUDGET=1000000"}
	srv := durableServer(t, env...)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "erase-while-streaming@example.com")
	chatID := newChat(t, c, map[string]any{"title": "busy"}).ID
	next := slowReply(t, c, chatID, userID)
	if r := c.do("DELETE", "/api/users/"+userID, map[string]string{"password": "chat-password-1"}); r.Status != 202 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	// The stream ends (its chat erased, or its reply done).
	next.drain()
	waitFor(t, "the erasure's first pass", func() bool { return strings.Contains(srv.logs.String(), `"account erased; a last pass follows"`) })
	// The reply's job is over once its lease is: give it one lease and a
	// sweep past the first pass, then stop the server (its data file is
	// compacted on a clean stop) and look for the usage month.
	time.Sleep(3 * time.Second)
	stopServer(t, srv)
	if found := tracesIn(t, filepath.Dir(file), map[string]string{"usage month": "USAGE#" + userID}); len(found) != 0 {
		t.Fatalf("after the first pass and the reply's end: %v", found)
	}
	srv = durableServer(t, env...)
	clock.ahead(t, 17*time.Minute)
	waitFor(t, "the erasure's last pass", func() bool { return strings.Contains(srv.logs.String(), `"account erased"`) })
	stopServer(t, srv)
	for _, f := range tracesIn(t, filepath.Dir(file), map[string]string{"user id": userID, "chat": chatID}) {
		t.Error(f)
	}
}

// TestChatDeletedWhileItsReplyStreams: a chat deleted by its owner while
// a reply streams in it (204 at once) leaves nothing under its key once
// the reply has noticed and ended: the reply's log events written after
// the delete listed the chat go with the reply's end, and the end is
// logged as the user's doing, not as an error.
func TestChatDeletedWhileItsReplyStreams(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	srv := durableServer(t, "DATA_FILE="+file, "ALLOWED_ORIGINS="+frontendOrigin, "LOG_LEVEL=info", "GENERATION_LEASE=2s")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "delete-while-streaming@example.com")
	chatID := newChat(t, c, map[string]any{"title": "busy"}).ID
	next := slowReply(t, c, chatID, userID)
	if r := c.do("DELETE", "/api/chats/"+chatID, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	// The stream ends once the reply notices (its lease's renewal, a
	// third of 2 s at most, then its end).
	next.drain()
	waitFor(t, "the reply's end", func() bool {
		return strings.Contains(srv.logs.String(), `"the reply's chat was deleted while it streamed"`)
	})
	stopServer(t, srv)
	if strings.Contains(srv.logs.String(), `"save the reply"`) {
		t.Errorf("the reply's end was logged as a failure:\n%s", srv.logs.String())
	}
	for _, f := range tracesIn(t, filepath.Dir(file), map[string]string{"chat": "CHAT#" + chatID}) {
		t.Error(f)
	}
}

// TestErasureOfKnowledgeBasesWhileIndexing: a user with three knowledge
// bases (a ready document; none; a 20 MB document still indexing)
// deletes the account while the large document is indexing. The
// erasure's first pass deletes the knowledge bases under the attempt,
// which ends (its lease refused once the collection is gone, or its
// attachment gone first). Once the clock passes the purges' and the
// erasure's last passes, nothing in the data file, the blob folder or
// the vector folder names the user, a knowledge base, a document or an
// attachment.
func TestErasureOfKnowledgeBasesWhileIndexing(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	clock := newClockFile(t)
	env := []string{"DATA_FILE=" + file, "ALLOWED_ORIGINS=" + frontendOrigin, "DEV_CLOCK_FILE=" + string(clock), "LOG_LEVEL=info",
		"GENERATION_LEASE=2s", "SWEEP_INTERVAL=200ms"}
	srv := durableServer(t, env...)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "erase-while-indexing@example.com")
	chat := newChat(t, c, map[string]any{"title": "files"})
	small := readyAttachment(t, c, chat.ID, "notes.md", "text/markdown", []byte("# Notes\n\nThe refund policy allows returns within thirty days.\n"))
	ready := newKnowledgeBase(t, c, "ready")
	readyDoc := addDocument(t, c, ready.ID, small.ID)
	if got := indexed(t, c, ready.ID, readyDoc.ID); got.Status != "ready" {
		t.Fatalf("small document: %+v", got)
	}
	empty := newKnowledgeBase(t, c, "empty")
	var big strings.Builder
	for i := 0; big.Len() < 20<<20; i++ {
		fmt.Fprintf(&big, "line %d of the long report mentions quarterly revenue item%d and region%d.\n", i, i%977, i%31)
	}
	large := readyAttachment(t, c, chat.ID, "report.txt", "text/plain", []byte(big.String()))
	busy := newKnowledgeBase(t, c, "busy")
	busyDoc := addDocument(t, c, busy.ID, large.ID)
	if r := c.do("DELETE", "/api/users/"+userID, map[string]string{"password": "chat-password-1"}); r.Status != 202 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	waitFor(t, "the erasure's first pass", func() bool { return strings.Contains(srv.logs.String(), `"account erased; a last pass follows"`) })
	waitFor(t, "the indexing attempt's end", func() bool {
		for _, line := range strings.Split(srv.logs.String(), "\n") {
			if strings.Contains(line, `"knowledge: indexing attempt ended"`) && strings.Contains(line, busyDoc.ID) {
				return true
			}
		}
		return false
	})
	clock.ahead(t, 17*time.Minute)
	waitFor(t, "the erasure's last pass", func() bool { return strings.Contains(srv.logs.String(), `"account erased"`) })
	stopServer(t, srv)
	traces := map[string]string{"user id": userID, "chat": chat.ID, "ready knowledge base": ready.ID, "ready document": readyDoc.ID,
		"empty knowledge base": empty.ID, "busy knowledge base": busy.ID, "busy document": busyDoc.ID, "small attachment": small.ID,
		"large attachment": large.ID}
	for _, f := range tracesIn(t, filepath.Dir(file), traces) {
		t.Error(f)
	}
}

// slowReply opens a streamed reply of "count to 200 slowly" in chat
// chatID and reads its start event; the reply's stream closes with the
// test.
func slowReply(t *testing.T, c *client, chatID, userID string) replyStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp := c.openStream(ctx, chatID, map[string]any{"content": "count to 200 slowly", "modelId": "builtin", "userId": userID})
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	next, stop := iter.Pull2(iter.Seq2[streamEvent, error](readEvents(t, resp.Body)))
	t.Cleanup(stop)
	if first, err, ok := next(); !ok || err != nil || first.Type != "start" {
		t.Fatalf("first event %+v, %v", first, err)
	}
	return replyStream(next)
}

// replyStream pulls a stream's next event.
type replyStream func() (streamEvent, error, bool)

// drain reads the stream until it ends.
func (next replyStream) drain() {
	for _, err, ok := next(); ok && err == nil; _, err, ok = next() {
	}
}
