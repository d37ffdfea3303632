package e2e_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/dynamolocal"
)

// The dev servers of these tests inherit the environment: a DATA_FILE a
// developer exported for `make run` must not be restored, and overwritten,
// by every test server. The tests that want one set their own.
func init() {
	os.Unsetenv("DATA_FILE")
	os.Unsetenv("SNAPSHOT_INTERVAL")
}

// stopServer sends SIGTERM and waits for a clean exit; it returns what the
// server printed on stdout (safe to read once it has exited).
func stopServer(t *testing.T, srv *server) string {
	t.Helper()
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.done:
		if srv.err != nil {
			t.Fatalf("exit after SIGTERM: %v", srv.err)
		}
	case <-time.After(patience):
		t.Fatalf("no exit within %s of SIGTERM", patience)
	}
	return srv.stdout.String()
}

// withCookie returns a client of base that sends the given session cookie.
func withCookie(t *testing.T, base, token string) *client {
	t.Helper()
	c := newClient(t, base)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	c.http.Jar.SetCookies(u, []*http.Cookie{{Name: "session_token", Value: token, Path: "/"}})
	return c
}

func sessionToken(t *testing.T, r response) string {
	t.Helper()
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "session_token" && c.Value != "" {
			return c.Value
		}
	}
	t.Fatalf("no session cookie in %v", r.Header)
	return ""
}

// TestRestartKeepsData signs up, sets a preference, creates a chat and
// posts a message on a dev server with DATA_FILE, stops it with SIGTERM,
// starts it again on the same file, and reads everything back identical,
// with the old session cookie and with a new sign-in.
func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data", "devserver.json")
	// The deployment default is a model that cannot answer: replies from
	// the built-in model show that the user's preference was used.
	env := []string{"DATA_FILE=" + file, "OPENAI_BASE_URL=http://127.0.0.1:1", "OPENAI_MODELS=offline-model", "DEFAULT_MODEL_ID=offline-model"}
	srv := startServer(t, env...)
	c := newClient(t, srv.API)
	r := c.do("POST", "/api/auth/sign-up/email", map[string]string{"email": "kept@example.com", "password": "kept-password-1", "name": "Kept"})
	if r.Status != 200 {
		t.Fatalf("sign-up: %d %s", r.Status, r.Body)
	}
	token := sessionToken(t, r)
	var up sessionBody
	r.decode(t, &up)
	userID := up.Data.User.ID
	if r := c.do("POST", "/api/users/"+userID+"/model-preference", map[string]string{"modelId": "builtin"}); r.Status != 200 {
		t.Fatalf("preference: %d %s", r.Status, r.Body)
	}
	r = c.do("POST", "/api/chats", map[string]any{"title": "Kept chat"})
	if r.Status != 201 {
		t.Fatalf("create chat: %d %s", r.Status, r.Body)
	}
	var chat struct {
		Data struct {
			ID string `json:"id"`
		}
	}
	r.decode(t, &chat)
	chatID := chat.Data.ID
	r = c.do("POST", "/api/chats/"+chatID+"/messages", map[string]any{"content": "Remember this, please."})
	var ex struct {
		Data struct {
			Response struct {
				ModelID string `json:"modelId"`
			} `json:"response"`
		}
	}
	r.decode(t, &ex)
	if r.Status != 201 || ex.Data.Response.ModelID != "builtin" {
		t.Fatalf("send: %d %s, want a reply by the preferred model builtin", r.Status, r.Body)
	}

	reads := []string{"/api/auth/session", "/api/users/" + userID + "/chats", "/api/chats/" + chatID, "/api/chats/" + chatID + "/messages"}
	read := func(c *client) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, path := range reads {
			r := c.do("GET", path, nil)
			if r.Status != 200 {
				t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
			}
			out[path] = string(r.Body)
		}
		return out
	}
	before := read(c)
	var page struct {
		Data struct {
			Total int `json:"total"`
		}
	}
	if err := json.Unmarshal([]byte(before[reads[1]]), &page); err != nil || page.Data.Total != 1 {
		t.Fatalf("chat list before restart: %s", before[reads[1]])
	}
	if n := strings.Count(before[reads[3]], `"role":`); n != 2 {
		t.Fatalf("messages before restart: %s", before[reads[3]])
	}

	out := stopServer(t, srv)
	if !strings.Contains(out, "Storage      embedded DynamoDB, kept in "+file+" (new file") || !strings.Contains(out, "data kept in "+file) {
		t.Errorf("stdout of the first run:\n%s", out)
	}
	info, err := os.Stat(file)
	if err != nil {
		t.Fatalf("no data file after SIGTERM: %v", err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("data file mode %v, want 0600", info.Mode().Perm())
	}

	srv2 := startServer(t, env...)
	old := withCookie(t, srv2.API, token)
	after := read(old)
	for _, path := range reads {
		if after[path] != before[path] {
			t.Errorf("GET %s after restart:\n%s\nwant\n%s", path, after[path], before[path])
		}
	}
	fresh := newClient(t, srv2.API)
	r = fresh.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "kept@example.com", "password": "kept-password-1"})
	var in sessionBody
	r.decode(t, &in)
	if r.Status != 200 || in.Data.User.ID != userID {
		t.Fatalf("sign-in after restart: %d %s", r.Status, r.Body)
	}
	if r := fresh.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "kept@example.com", "password": "wrong-password-1"}); r.Status != 401 {
		t.Errorf("wrong password after restart: %d", r.Status)
	}
	r = old.do("POST", "/api/chats/"+chatID+"/messages", map[string]any{"content": "Still there?"})
	r.decode(t, &ex)
	if r.Status != 201 || ex.Data.Response.ModelID != "builtin" {
		t.Errorf("send after restart: %d %s, want a reply by the preferred model builtin", r.Status, r.Body)
	}
	if out := stopServer(t, srv2); !strings.Contains(out, "kept in "+file+" (restored ") {
		t.Errorf("stdout of the second run:\n%s", out)
	}
}

// TestPeriodicSnapshotSurvivesKill: with SNAPSHOT_INTERVAL, data written
// before a SIGKILL (no graceful shutdown) is there after a restart.
func TestPeriodicSnapshotSurvivesKill(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	srv := startServer(t, "DATA_FILE="+file, "SNAPSHOT_INTERVAL=50ms")
	if r := newClient(t, srv.API).do("POST", "/api/auth/sign-up/email", map[string]string{"email": "killed@example.com", "password": "killed-pass-1", "name": "K"}); r.Status != 200 {
		t.Fatalf("sign-up: %d %s", r.Status, r.Body)
	}
	for deadline := time.Now().Add(patience); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(file); bytes.Contains(b, []byte("killed@example.com")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no periodic snapshot with the new user within %s", patience)
		}
	}
	_ = srv.cmd.Process.Kill()
	<-srv.done
	srv2 := startServer(t, "DATA_FILE="+file, "SNAPSHOT_INTERVAL=50ms")
	if r := newClient(t, srv2.API).do("POST", "/api/auth/sign-in/email", map[string]string{"email": "killed@example.com", "password": "killed-pass-1"}); r.Status != 200 {
		t.Errorf("sign-in after kill and restart: %d %s", r.Status, r.Body)
	}
}

// TestDataFileStartupErrors: a corrupt DATA_FILE or a bad SNAPSHOT_INTERVAL
// stops the dev server at start with the reason; the file is kept as is.
func TestDataFileStartupErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	corrupt := []byte(`{"format":"dynamolocal-snapshot","version":1,"tables":[{"name":`)
	if err := os.WriteFile(file, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		env  []string
		want []string
	}{
		{"corrupt data file", []string{"DATA_FILE=" + file}, []string{file, "invalid JSON", "left untouched"}},
		{"bad interval", []string{"DATA_FILE=" + file, "SNAPSHOT_INTERVAL=-1s"}, []string{"SNAPSHOT_INTERVAL"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			cmd := exec.CommandContext(ctx, devserverBin)
			cmd.Env = append(os.Environ(), append([]string{"PORT=0", "MCP_PORT=0", "DYNAMODB_ENDPOINT=", "SNAPSHOT_INTERVAL="}, tt.env...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1\n%s", err, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if b, _ := os.ReadFile(file); !bytes.Equal(b, corrupt) {
				t.Errorf("the data file was modified: %s", b)
			}
		})
	}
}

// TestDamagedJournalStopsTheDevServer: the journal of a dev server killed
// after answered writes, damaged in ways no crash leaves (emptied, a
// flipped byte in its last record), stops the next start with the file
// and the offset, leaves both files as they were, and once the journal
// is put back every answered write is there.
func TestDamagedJournalStopsTheDevServer(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	jpath := file + ".journal"
	env := []string{"DATA_FILE=" + file, "SNAPSHOT_INTERVAL=1h"}
	signUp := func(srv *server, email string) {
		t.Helper()
		if r := newClient(t, srv.API).do("POST", "/api/auth/sign-up/email", map[string]string{"email": email, "password": "damaged-pass-1", "name": "D"}); r.Status != 200 {
			t.Fatalf("sign-up: %d %s", r.Status, r.Body)
		}
	}
	srv := startServer(t, env...)
	signUp(srv, "before@example.com")
	stopServer(t, srv) // a snapshot, and the journal reduced to its header
	srv = startServer(t, env...)
	signUp(srv, "after@example.com") // answered: in the journal only
	_ = srv.cmd.Process.Kill()
	<-srv.done
	os.Remove(file + ".lock")
	snapshot, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(jpath)
	if err != nil {
		t.Fatal(err)
	}
	// The offset of the journal's last record: records follow the
	// 22-byte header, each a 20-byte frame header (the payload length
	// first) and its payload.
	last := 0
	for off := len("dynamolocal-journal 1\n"); off < len(journal); off += 20 + int(binary.LittleEndian.Uint32(journal[off:])) {
		last = off
	}
	if last == 0 {
		t.Fatalf("the journal holds no record: %q", journal)
	}
	for _, tt := range []struct {
		name    string
		damaged func() []byte
		offset  int
	}{
		{"emptied", func() []byte { return []byte{} }, 0},
		{"flipped byte in the last record", func() []byte {
			b := bytes.Clone(journal)
			b[len(b)-2] ^= 0x20
			return b
		}, last},
	} {
		t.Run(tt.name, func(t *testing.T) {
			damaged := tt.damaged()
			if err := os.WriteFile(jpath, damaged, 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			cmd := exec.CommandContext(ctx, devserverBin)
			cmd.Env = append(os.Environ(), append([]string{"PORT=0", "MCP_PORT=0", "DYNAMODB_ENDPOINT="}, env...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1\n%s", err, stderr.String())
			}
			for _, w := range []string{jpath, fmt.Sprintf("at offset %d:", tt.offset), "left untouched"} {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if b, _ := os.ReadFile(jpath); !bytes.Equal(b, damaged) {
				t.Error("the journal was modified")
			}
			if b, _ := os.ReadFile(file); !bytes.Equal(b, snapshot) {
				t.Error("the data file was modified")
			}
		})
	}
	if err := os.WriteFile(jpath, journal, 0o600); err != nil {
		t.Fatal(err)
	}
	srv = startServer(t, env...)
	for _, email := range []string{"before@example.com", "after@example.com"} {
		if r := newClient(t, srv.API).do("POST", "/api/auth/sign-in/email", map[string]string{"email": email, "password": "damaged-pass-1"}); r.Status != 200 {
			t.Errorf("sign-in of %s with the journal put back: %d %s", email, r.Status, r.Body)
		}
	}
	stopServer(t, srv)
}

// TestDataFileIgnoredWithEndpoint: with DYNAMODB_ENDPOINT, DATA_FILE is
// ignored with a note, and the dev server restarts on the endpoint's
// existing tables (TTL already enabled) with the data they keep.
func TestDataFileIgnoredWithEndpoint(t *testing.T) {
	t.Parallel()
	eng, err := dynamolocal.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	file := filepath.Join(t.TempDir(), "devserver.json")
	env := []string{"DYNAMODB_ENDPOINT=" + eng.URL, "DATA_FILE=" + file}
	srv := startServer(t, env...)
	if r := newClient(t, srv.API).do("POST", "/api/auth/sign-up/email", map[string]string{"email": "ext@example.com", "password": "external-pass-1", "name": "E"}); r.Status != 200 {
		t.Fatalf("sign-up: %d %s", r.Status, r.Body)
	}
	out := stopServer(t, srv)
	if !strings.Contains(out, "DATA_FILE is ignored: DYNAMODB_ENDPOINT is set") || !strings.Contains(out, "Storage      DynamoDB at "+eng.URL) {
		t.Errorf("stdout:\n%s", out)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("DATA_FILE written with DYNAMODB_ENDPOINT set: %v", err)
	}
	srv2 := startServer(t, env...)
	if r := newClient(t, srv2.API).do("POST", "/api/auth/sign-in/email", map[string]string{"email": "ext@example.com", "password": "external-pass-1"}); r.Status != 200 {
		t.Errorf("sign-in after restart on the same endpoint: %d %s", r.Status, r.Body)
	}
}
