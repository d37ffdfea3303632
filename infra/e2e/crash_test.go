package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ackedWrites records the writes the dev server acknowledged (2xx) before
// it was killed.
type ackedWrites struct {
	mu       sync.Mutex
	users    map[string]string   // userID -> session token
	chats    map[string][]string // userID -> chat IDs
	messages map[string][]string // chatID -> contents
	titles   map[string]string   // chatID -> last acknowledged title
}

// crashWorker is one user writing as fast as the server answers: it
// creates chats, posts messages and renames chats until the server dies,
// recording every acknowledged write. Errors after the kill are expected
// and end the worker.
func crashWorker(base, userID, token string, n int, acked *ackedWrites, count *atomic.Int64) {
	hc := &http.Client{Timeout: patience}
	call := func(method, path string, body any) (int, []byte, bool) {
		j, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(j))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", "session_token="+token)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, nil, false
		}
		return resp.StatusCode, b, true
	}
	var chats []string
	for i := 0; ; i++ {
		if i%4 == 0 || len(chats) == 0 {
			status, b, ok := call("POST", "/api/chats", map[string]string{"title": fmt.Sprintf("chat %d of worker %d", i, n)})
			if !ok {
				return
			}
			var c struct{ Data struct{ ID string } }
			if status != 201 || json.Unmarshal(b, &c) != nil || c.Data.ID == "" {
				continue
			}
			acked.mu.Lock()
			acked.chats[userID] = append(acked.chats[userID], c.Data.ID)
			acked.mu.Unlock()
			count.Add(1)
			chats = append(chats, c.Data.ID)
			continue
		}
		chatID := chats[i%len(chats)]
		if i%5 == 0 {
			title := fmt.Sprintf("renamed %d by worker %d", i, n)
			status, _, ok := call("PATCH", "/api/chats/"+chatID, map[string]string{"title": title})
			if !ok {
				return
			}
			if status == 200 {
				acked.mu.Lock()
				acked.titles[chatID] = title
				acked.mu.Unlock()
				count.Add(1)
			}
			continue
		}
		content := fmt.Sprintf("message %d of worker %d", i, n)
		status, _, ok := call("POST", "/api/chats/"+chatID+"/messages", map[string]string{"content": content, "modelId": "builtin"})
		if !ok {
			return
		}
		if status == 201 {
			acked.mu.Lock()
			acked.messages[chatID] = append(acked.messages[chatID], content)
			acked.mu.Unlock()
			count.Add(1)
		}
	}
}

// renameNumber is the loop index in a title set by crashWorker's rename,
// -1 for any other title.
func renameNumber(title string) int {
	var i, n int
	if _, err := fmt.Sscanf(title, "renamed %d by worker %d", &i, &n); err != nil {
		return -1
	}
	return i
}

// TestJournalSurvivesKill drives concurrent sign-ups, chats, messages and
// renames against a dev server with DATA_FILE, kills it with SIGKILL in
// the middle, restarts it on the same file, and checks that every write
// that got a 2xx answer is there, read through the old session cookies.
// The snapshots run every 200ms meanwhile, so the kill also lands around
// compactions.
func TestJournalSurvivesKill(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	env := []string{"DATA_FILE=" + file, "SNAPSHOT_INTERVAL=200ms", "RATE_LIMIT_MESSAGES=1000000/m"}
	srv := startServer(t, env...)
	acked := &ackedWrites{users: map[string]string{}, chats: map[string][]string{}, messages: map[string][]string{}, titles: map[string]string{}}
	var count atomic.Int64
	const workers = 6
	var wg sync.WaitGroup
	for n := range workers {
		c := newClient(t, srv.API)
		email := fmt.Sprintf("crash%d@example.com", n)
		r := c.do("POST", "/api/auth/sign-up/email", map[string]string{"email": email, "password": "crash-password-1", "name": "Crash"})
		if r.Status != 200 {
			t.Fatalf("sign-up: %d %s", r.Status, r.Body)
		}
		var s sessionBody
		r.decode(t, &s)
		token := sessionToken(t, r)
		acked.users[s.Data.User.ID] = token
		count.Add(1)
		wg.Go(func() { crashWorker(srv.API, s.Data.User.ID, token, n, acked, &count) })
	}
	// Kill once enough writes were acknowledged (more keep arriving).
	for count.Load() < 300 {
		select {
		case <-srv.done:
			t.Fatalf("dev server exited: %v", srv.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	_ = srv.cmd.Process.Kill()
	<-srv.done
	wg.Wait()
	acked.mu.Lock()
	defer acked.mu.Unlock()
	nChats, nMessages := 0, 0
	for _, cs := range acked.chats {
		nChats += len(cs)
	}
	for _, ms := range acked.messages {
		nMessages += len(ms)
	}
	t.Logf("acknowledged before the kill: %d users, %d chats, %d messages, %d renames", len(acked.users), nChats, nMessages, len(acked.titles))

	srv2 := startServer(t, env...)
	missing := 0
	for userID, token := range acked.users {
		c := withCookie(t, srv2.API, token)
		if r := c.do("GET", "/api/auth/session", nil); r.Status != 200 {
			t.Errorf("session of user %s after the restart: %d %s", userID, r.Status, r.Body)
			continue
		}
		titles := map[string]string{}
		for offset := 0; ; offset += 100 {
			r := c.do("GET", fmt.Sprintf("/api/users/%s/chats?limit=100&offset=%d", userID, offset), nil)
			if r.Status != 200 {
				t.Fatalf("list chats: %d %s", r.Status, r.Body)
			}
			var page struct{ Data chatPageJSON }
			r.decode(t, &page)
			for _, ch := range page.Data.Chats {
				titles[ch.ID] = ch.Title
			}
			if len(page.Data.Chats) < 100 {
				break
			}
		}
		for _, chatID := range acked.chats[userID] {
			title, ok := titles[chatID]
			if !ok {
				missing++
				t.Errorf("acknowledged chat %s of user %s is missing", chatID, userID)
				continue
			}
			// The last acknowledged rename, or a later one applied
			// without its answer arriving before the kill.
			if want, renamed := acked.titles[chatID]; renamed && renameNumber(title) < renameNumber(want) {
				missing++
				t.Errorf("chat %s lost its acknowledged rename to %q (title %q)", chatID, want, title)
			}
			want := acked.messages[chatID]
			if len(want) == 0 {
				continue
			}
			r := c.do("GET", "/api/chats/"+chatID+"/messages", nil)
			if r.Status != 200 {
				t.Errorf("messages of %s: %d %s", chatID, r.Status, r.Body)
				continue
			}
			for _, content := range want {
				if !bytes.Contains(r.Body, []byte(`"content":"`+content+`"`)) {
					missing++
					t.Errorf("acknowledged message %q of chat %s is missing", content, chatID)
				}
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d acknowledged writes lost", missing)
	}
	out := stopServer(t, srv2)
	if !strings.Contains(out, "replayed ") || !strings.Contains(out, "every write journaled to devserver.json.journal before it is answered") {
		t.Errorf("the restarted server's banner does not tell the journal:\n%s", out)
	}
}
