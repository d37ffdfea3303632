// Package e2e tests the service end to end: it builds the local dev server
// binary, starts it, and talks HTTP to it as a client would. Every response
// the client receives is checked against docs/openapi.yaml.
package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/contract"
	"github.com/workflowchat/service/infra/gobuild"
)

var devserverBin string

func TestMain(m *testing.M) {
	bin, remove, err := gobuild.ForMain("devserver", "../devserver")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	devserverBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// patience bounds every wait of a test for the service (a response, an
// event, a state polled for): a bound for a service that is broken or
// stuck, never a measure of its speed. A loaded machine (make test beside
// other builds, -race) is many times slower than a quiet one.
const patience = 10 * time.Minute

// server is a running dev server process.
type server struct {
	cmd    *exec.Cmd
	API    string // http://127.0.0.1:port
	MCP    string // http://127.0.0.1:port/mcp
	Key    string
	stdout *bytes.Buffer
	logs   *lockedBuffer // stderr
	done   chan struct{} // closed when the process has exited
	err    error         // the exit error, set before done is closed
}

// startServer starts the dev server binary on free ports and waits until it
// has printed its addresses. It is stopped with SIGTERM when the test ends.
func startServer(t *testing.T, env ...string) *server {
	t.Helper()
	cmd := exec.Command(devserverBin)
	// Every DynamoDB call is held to its function's IAM policy in the
	// template (the cleanup fails the test for each refusal).
	cmd.Env = append(os.Environ(), append([]string{"PORT=0", "MCP_PORT=0", "LOG_LEVEL=warn", "MCP_SERVICE_KEY=", "DYNAMODB_ENDPOINT=",
		"LOCAL_IAM_TEMPLATE=../../template.yaml"}, env...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, stdout: &bytes.Buffer{}, logs: logs, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			s.stdout.WriteString(line + "\n")
			f := strings.Fields(line)
			switch {
			case strings.HasPrefix(line, "REST API"):
				s.API = f[len(f)-1]
			case strings.HasPrefix(line, "Tool server"):
				s.MCP = f[len(f)-1]
			case strings.HasPrefix(line, "Service key") && len(f) > 2:
				s.Key = f[2]
			case strings.HasPrefix(line, "Stop with"):
				close(ready)
			}
		}
		s.err = cmd.Wait()
		close(s.done)
	}()
	select {
	case <-ready:
	case <-s.done:
		t.Fatalf("devserver exited early: %v\n%s", s.err, logs.String())
	case <-time.After(patience):
		_ = cmd.Process.Kill()
		t.Fatalf("devserver did not start\n%s", logs.String())
	}
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
			}
		}
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "iampolicy: AccessDenied") {
				t.Errorf("AccessDenied in AWS: %s", strings.TrimSpace(line))
			}
		}
		if t.Failed() {
			t.Logf("devserver stderr:\n%s", logs.String())
		}
	})
	return s
}

// client is an HTTP client with a cookie jar whose every response is
// checked against the OpenAPI document.
type client struct {
	t    *testing.T
	base string
	http *http.Client
}

var spec = func() *contract.Spec {
	s, err := contract.Load("../../docs/openapi.yaml")
	if err != nil {
		panic(err)
	}
	return s
}()

func newClient(t *testing.T, base string) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: base, http: &http.Client{Jar: jar, Transport: spec.Transport(t, nil), Timeout: patience}}
}

// response is a received response with its body read.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// errorBody is the service's error body.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Code    string `json:"code"`
	Details []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"details"`
}

func (c *client) do(method, path string, body any, header ...string) response {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// expectError checks status, code and the error body's shape.
func expectError(t *testing.T, name string, r response, status int, code string) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(r.Body, &e); err != nil {
		t.Errorf("%s: body %q is not an error body: %v", name, r.Body, err)
		return e
	}
	if r.Status != status || e.Code != code || e.Error != http.StatusText(status) || e.Message == "" {
		t.Errorf("%s: %d %+v, want %d %s", name, r.Status, e, status, code)
	}
	return e
}

// expectFieldError checks a 400 VALIDATION_FAILED whose details name
// field.
func expectFieldError(t *testing.T, name string, r response, field string) {
	t.Helper()
	e := expectError(t, name, r, 400, "VALIDATION_FAILED")
	for _, d := range e.Details {
		if d.Field == field {
			return
		}
	}
	t.Errorf("%s: details %+v do not name %s", name, e.Details, field)
}

// lockedBuffer is a bytes.Buffer safe for the process's writer and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
