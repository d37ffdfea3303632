package local_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// mcpClientDir holds the pinned official MCP TypeScript SDK
// (package.json and package-lock.json) and the client script.
const mcpClientDir = "../mcpclient"

var (
	npmOnce sync.Once
	npmErr  error
)

// installMCPClient runs npm ci in infra/mcpclient once per test binary:
// the exact versions of the lock file, from the npm registry alone.
func installMCPClient(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed: .ci/run installs Node and npm for the official MCP TypeScript SDK test", tool)
			}
			t.Skipf("%s is not installed: the official MCP TypeScript SDK test needs Node 20 and npm (.ci/run installs them)", tool)
		}
	}
	npmOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*patience)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = mcpClientDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			npmErr = fmt.Errorf("npm ci in infra/mcpclient: %v\n%s", err, out)
		}
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
}

// nodeClient is client.mjs running.
type nodeClient struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *syncBuffer
}

func startNodeClient(t *testing.T, env []string, args ...string) *nodeClient {
	t.Helper()
	script, err := filepath.Abs(filepath.Join(mcpClientDir, "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	c := &nodeClient{cmd: cmd, lines: make(chan string, 16), stderr: &syncBuffer{}}
	cmd.Stderr = c.stderr
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return c
}

// next returns the next stdout line starting with prefix (the prefix
// removed), failing the test when the script ends first.
func (c *nodeClient) next(t *testing.T, prefix string) string {
	t.Helper()
	for line := range c.lines {
		if rest, ok := strings.CutPrefix(line, prefix+" "); ok {
			return rest
		}
	}
	_ = c.cmd.Wait()
	t.Fatalf("client.mjs ended without %s: %v\n%s", prefix, c.cmd.ProcessState, c.stderr.String())
	return ""
}

// TestOfficialMCPClient connects the official MCP TypeScript SDK (pinned
// in infra/mcpclient) to /api/mcp: with the SDK's own OAuth client (401,
// metadata discovery, dynamic registration, PKCE, code exchange), the
// sign-in and consent pages driven over HTTP as a browser would; then as a
// script with a personal access token.
func TestOfficialMCPClient(t *testing.T) {
	installMCPClient(t)
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	e.expose(ada, "shout")
	mcpURL := e.srv.URL + "/api/mcp"

	t.Run("oauth", func(t *testing.T) {
		c := startNodeClient(t, nil, "oauth", mcpURL)
		authz, err := url.Parse(c.next(t, "AUTHORIZE"))
		if err != nil {
			t.Fatal(err)
		}
		q := authz.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("resource") != mcpURL || authz.Path != "/oauth/authorize" {
			t.Errorf("the SDK's authorization request: %s", authz)
		}
		fresh := testUser{id: ada.id, email: ada.email, password: ada.password, browser: e.browser()}
		loc := e.authorize(fresh, q)
		code := loc.Query().Get("code")
		if code == "" || loc.Query().Get("state") != q.Get("state") {
			t.Fatalf("redirect %s", loc)
		}
		if _, err := io.WriteString(c.stdin, code+"\n"); err != nil {
			t.Fatal(err)
		}
		var res struct {
			Tools     []string
			TokenType string
			Refresh   bool
		}
		if err := json.Unmarshal([]byte(c.next(t, "RESULT")), &res); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Tools, []string{"shout"}) || !strings.EqualFold(res.TokenType, "bearer") || !res.Refresh {
			t.Errorf("result = %+v", res)
		}
	})

	t.Run("personal token", func(t *testing.T) {
		token := jsonPath(t, e.do(ada.browser, "POST", "/api/users/"+ada.id+"/tokens", `{"name":"node","expiresInDays":1}`, nil).body, "data", "token")
		c := startNodeClient(t, []string{"MCP_TOKEN=" + token}, "token", mcpURL)
		var res struct {
			Tools      []string
			Structured map[string]any
			IsError    bool
		}
		if err := json.Unmarshal([]byte(c.next(t, "RESULT")), &res); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Tools, []string{"shout"}) || res.IsError || res.Structured["result"] != "FROM NODE" {
			t.Errorf("result = %+v", res)
		}
	})
}
