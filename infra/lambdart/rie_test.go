// Package lambdart_test drives the functions' bootstraps, built for this
// machine with the production flags, under the AWS Lambda Runtime
// Interface Emulator (the runtime SAM CLI runs in its containers), with
// real aws-lambda-go event payloads, against the embedded DynamoDB engine
// served over HTTP. It proves what the in-process tests cannot: that each
// binary starts as Lambda starts it, reads its configuration, and answers
// the runtime API. RIE buffers streamed responses, so the stream's
// incremental delivery stays covered by the dev server tests; here the
// stream's function URL prelude and events are checked whole.
package lambdart_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/workflowchat/service/functions/assembly/signingkeys/signingkeystest"
	"github.com/workflowchat/service/infra/dynamolocal"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/oauth/accesstoken"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

// rieModule is the emulator, pinned in go.mod as a tool.
const rieModule = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

var (
	binDir    string
	buildOnce sync.Map // function name -> *sync.Once
	buildErrs sync.Map // function name -> error
)

func TestMain(m *testing.M) {
	if runtime.GOOS != "linux" {
		fmt.Println("lambdart: the Lambda runtime tests run on Linux only")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "lambdart")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goBuild builds pkg to out as the Makefile builds a bootstrap (for this
// machine's architecture).
func goBuild(out, pkg string, flags ...string) error {
	args := append([]string{"build", "-o", out}, flags...)
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// binary returns the path of name ("rie" or a function's folder), built
// once per run.
func binary(t *testing.T, name string) string {
	t.Helper()
	once, _ := buildOnce.LoadOrStore(name, &sync.Once{})
	out := filepath.Join(binDir, name, "bootstrap")
	once.(*sync.Once).Do(func() {
		var err error
		if name == "rie" {
			err = goBuild(out, rieModule)
		} else {
			err = goBuild(out, "./functions/"+name, "-trimpath", "-ldflags=-s -w", "-tags", "lambda.norpc")
		}
		if err != nil {
			buildErrs.Store(name, err)
		}
	})
	if err, ok := buildErrs.Load(name); ok {
		t.Fatal(err)
	}
	return out
}

// backend is what the functions reach: the embedded DynamoDB engine with
// the service's tables, and a tool server.
type backend struct {
	dynamoURL string
	toolURL   string
	key       string
	// s3URL is a fake S3 (gofakes3) holding the bucket "blobs".
	s3URL string
	// secretsURL is a stand-in of Secrets Manager holding the OAuth
	// signing keys as signingSecret.
	secretsURL string
	// schedulerURL is a stand-in of EventBridge Scheduler that accepts
	// every schedule written (TriggersFunction's schedule triggers).
	schedulerURL string
}

// signingSecret names the OAuth signing key set in the backend's Secrets
// Manager.
const signingSecret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:signing-keys-AbCdEf"

func newBackend(t *testing.T) backend {
	t.Helper()
	eng, err := dynamolocal.StartWith(dynamolocal.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{Region: "us-east-1", Endpoint: eng.URL})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, tb := range store.Tables() {
		names[tb.EnvVar] = tb.LocalName
	}
	if err := store.CreateTables(ctx, db.Client(), names); err != nil {
		t.Fatal(err)
	}
	const key = "lambdart-service-key-0123456789"
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(ts.Close)
	s3 := s3mem.New()
	if err := s3.CreateBucket("blobs"); err != nil {
		t.Fatal(err)
	}
	fakeS3 := httptest.NewServer(gofakes3.New(s3, gofakes3.WithoutVersioning()).Server())
	t.Cleanup(fakeS3.Close)
	_, secrets := signingkeystest.Serve(t, signingSecret, accesstoken.GenerateKeySet("k1"))
	scheduler := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ScheduleArn":"arn:aws:scheduler:us-east-1:123456789012:schedule/rie-triggers/%s"}`, path.Base(r.URL.Path))
	}))
	t.Cleanup(scheduler.Close)
	return backend{dynamoURL: eng.URL, toolURL: ts.URL, key: key, s3URL: fakeS3.URL, secretsURL: secrets, schedulerURL: scheduler.URL}
}

// env is the configuration of a function on b, as template.yaml sets it.
func (b backend) env(extra ...string) []string {
	env := []string{"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
		"DYNAMODB_ENDPOINT=" + b.dynamoURL, "USERS_TABLE=users", "SESSIONS_TABLE=sessions", "DATA_TABLE=data",
		"RATE_LIMITS_TABLE=rate_limits", "OAUTH_TABLE=oauth", "MCP_URL=" + b.toolURL, "MCP_SERVICE_KEY=" + b.key, "LOG_LEVEL=warn",
		"BLOB_BUCKET=blobs", "BLOB_ENDPOINT=" + b.s3URL}
	return append(env, extra...)
}

// functionEnv is function name's configuration on b, as template.yaml
// sets it: b.env and what the function alone needs.
func functionEnv(b backend, name string) []string {
	switch name {
	case "workflows", "sweeper":
		// They delete the schedules of a deleted workflow or account.
		return b.env("RUNNER_FUNCTION=RunnerFunction", "SCHEDULE_GROUP=rie-triggers", "SCHEDULER_ENDPOINT="+b.schedulerURL)
	case "stream", "triggerfire":
		return b.env("RUNNER_FUNCTION=RunnerFunction")
	case "triggers":
		return b.env("RUNNER_FUNCTION=RunnerFunction", "WEBHOOK_SIGNING_KEY=0123456789abcdef0123456789abcdef", "SCHEDULE_GROUP=rie-triggers",
			"SCHEDULE_TARGET_ARN=arn:aws:lambda:us-east-1:123456789012:function:fire", "SCHEDULE_ROLE_ARN=arn:aws:iam::123456789012:role/scheduler",
			"SCHEDULE_DLQ_ARN=arn:aws:sqs:us-east-1:123456789012:fire-dlq", "SCHEDULER_ENDPOINT="+b.schedulerURL)
	case "oauth":
		return b.env("OAUTH_SIGNING_SECRET="+signingSecret, "AWS_ENDPOINT_URL_SECRETS_MANAGER="+b.secretsURL)
	case "mcpgateway":
		return b.env("OAUTH_SIGNING_SECRET="+signingSecret, "AWS_ENDPOINT_URL_SECRETS_MANAGER="+b.secretsURL, "RUNNER_FUNCTION=RunnerFunction")
	case "mcpservers":
		// No KMS here: listing servers unwraps no key (a create would).
		return b.env("VAULT_KMS_KEY=alias/rie-vault", "KMS_ENDPOINT=http://127.0.0.1:9")
	case "knowledgeindex":
		// Bedrock and S3 Vectors as the stack configures them: neither
		// is called by a reference whose document does not exist.
		return b.env("KNOWLEDGE_EMBEDDER=bedrock", "KNOWLEDGE_VECTOR_BUCKET=arn:aws:s3vectors:us-east-1:123456789012:bucket/rie",
			"KNOWLEDGE_VECTOR_INDEX=arn:aws:s3vectors:us-east-1:123456789012:bucket/rie/index/chunks")
	}
	return b.env()
}

// function is one bootstrap running under the emulator.
type function struct {
	t    *testing.T
	url  string
	logs *logBuffer
	stop func() // ends the emulator (and the bootstrap); also at the test's end
	pid  int    // the emulator's process
}

// logBuffer collects the emulator's output, written by the process's
// copying goroutine while the test reads it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs function name's bootstrap under the emulator with env. The
// two ports are picked free and then handed to the emulator, so another
// process may take one in between: an emulator that exits because its
// address is in use is started again on new ports, up to three times.
func start(t *testing.T, name string, env []string) *function {
	t.Helper()
	for attempt := 1; ; attempt++ {
		f, inUse := startOnce(t, name, env)
		if f != nil {
			return f
		}
		if !inUse || attempt == 3 {
			t.Fatalf("%s: the emulator did not listen (attempt %d)", name, attempt)
		}
	}
}

// startOnce starts the emulator once; it returns nil and whether the
// emulator exited for an address already in use when it does not listen.
func startOnce(t *testing.T, name string, env []string) (*function, bool) {
	t.Helper()
	rie, boot := binary(t, "rie"), binary(t, name)
	addr := freePort(t)
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", freePort(t), boot)
	cmd.Env = env
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := sync.OnceFunc(func() { _ = cmd.Process.Kill(); <-exited })
	t.Cleanup(stop)
	f := &function{t: t, url: "http://" + addr + "/2015-03-31/functions/function/invocations", logs: logs, stop: stop, pid: cmd.Process.Pid}
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return f, false
		}
		select {
		case <-exited:
			inUse := strings.Contains(logs.String(), "address already in use")
			t.Logf("%s: the emulator exited before listening: %s", name, logs)
			return nil, inUse
		default:
		}
		if time.Now().After(deadline) {
			t.Logf("%s: the emulator did not listen in 30 s: %s", name, logs)
			stop()
			return nil, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// invoke sends event and returns the raw invocation response.
func (f *function) invoke(event any) []byte {
	f.t.Helper()
	b, err := json.Marshal(event)
	if err != nil {
		f.t.Fatal(err)
	}
	resp, err := http.Post(f.url, "application/json", bytes.NewReader(b))
	if err != nil {
		f.t.Fatalf("invoke: %v\n%s", err, f.logs)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return out
}

// http invokes an API Gateway v2 (or function URL) event and decodes the
// proxy response.
func (f *function) http(ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	f.t.Helper()
	raw := f.invoke(ev)
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(raw, &resp); err != nil || resp.StatusCode == 0 {
		f.t.Fatalf("not a proxy response: %s (%v)\n%s", raw, err, f.logs)
	}
	return resp
}

// request builds an API Gateway HTTP API (payload 2.0) event.
func request(method, path, body string, cookies ...string) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path, Cookies: cookies, Body: body,
		Headers: map[string]string{"host": "api.example.com", "content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: "api.example.com", RequestID: "rie-test", Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.9"},
		},
	}
	return ev
}

func cookieOf(t *testing.T, resp events.APIGatewayV2HTTPResponse) string {
	t.Helper()
	for _, c := range resp.Cookies {
		if ck, err := http.ParseSetCookie(c); err == nil && ck.Name == "session_token" {
			return ck.Name + "=" + ck.Value
		}
	}
	t.Fatalf("no session cookie in %+v", resp.Cookies)
	return ""
}

// TestFunctionsUnderTheLambdaRuntime: sign-up through AuthFunction sets a
// cookie that ChatsFunction accepts, a message runs a tool through the
// tool server, StreamFunction answers a function URL event with the
// streaming prelude and the reply's events, ModelsFunction,
// ToolsFunction, WorkflowsFunction and TriggersFunction answer with that
// cookie, McpFunction
// checks its key, and HealthFunction answers.
func TestFunctionsUnderTheLambdaRuntime(t *testing.T) {
	b := newBackend(t)
	health := start(t, "health", b.env())
	if r := health.http(request("GET", "/api/liveness", "")); r.StatusCode != 200 || !strings.Contains(r.Body, `"status":"ok"`) {
		t.Errorf("liveness: %d %s", r.StatusCode, r.Body)
	}

	authFn := start(t, "auth", b.env())
	up := authFn.http(request("POST", "/api/auth/sign-up/email", `{"email":"rie@example.com","password":"rie-password-1","name":"Rie"}`))
	if up.StatusCode != 200 {
		t.Fatalf("sign-up: %d %s\n%s", up.StatusCode, up.Body, authFn.logs)
	}
	cookie := cookieOf(t, up)
	var signedUp struct {
		Data struct{ User struct{ ID string } }
	}
	if err := json.Unmarshal([]byte(up.Body), &signedUp); err != nil || signedUp.Data.User.ID == "" {
		t.Fatalf("sign-up body: %s", up.Body)
	}

	chats := start(t, "chats", b.env())
	created := chats.http(request("POST", "/api/chats", `{"title":"under RIE"}`, cookie))
	var chat struct{ Data struct{ ID string } }
	if err := json.Unmarshal([]byte(created.Body), &chat); err != nil || created.StatusCode != 201 {
		t.Fatalf("create chat: %d %s\n%s", created.StatusCode, created.Body, chats.logs)
	}
	sent := chats.http(request("POST", "/api/chats/"+chat.Data.ID+"/messages",
		`{"content":"run json_query with {\"input\": {\"a\": [1, 2, 3]}, \"query\": \".a | add\"}","modelId":"builtin"}`, cookie))
	if sent.StatusCode != 201 || !strings.Contains(sent.Body, `"toolName":"json_query"`) || !strings.Contains(sent.Body, `"result":{"result":6}`) {
		t.Errorf("message with a tool call: %d %s", sent.StatusCode, sent.Body)
	}
	if r := chats.http(request("POST", "/api/chats/"+chat.Data.ID+"/attachments", `{"name":"a.txt","contentType":"text/plain","size":3}`, cookie)); r.StatusCode != 201 ||
		!strings.Contains(r.Body, `"uploadUrl":"`+b.s3URL+`/blobs/uploads/`) {
		t.Errorf("attachment: %d %s", r.StatusCode, r.Body)
	}
	if r := chats.http(request("GET", "/api/chats/"+chat.Data.ID+"/messages", "")); r.StatusCode != 401 {
		t.Errorf("messages without a cookie: %d %s", r.StatusCode, r.Body)
	}

	stream := start(t, "stream", b.env("RUNNER_FUNCTION=RunnerFunction"))
	raw := stream.invoke(request("POST", "/api/chats/"+chat.Data.ID+"/messages/stream", `{"content":"hello","modelId":"builtin","userId":"`+signedUp.Data.User.ID+`"}`, cookie))
	// A function URL streaming response: a JSON prelude with the status
	// and headers, eight zero bytes, then the body.
	prelude, body, ok := bytes.Cut(raw, make([]byte, 8))
	var head struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
	}
	if !ok || json.Unmarshal(prelude, &head) != nil || head.StatusCode != 200 || !strings.HasPrefix(head.Headers["Content-Type"], "text/event-stream") {
		t.Fatalf("stream prelude: %q\n%s", raw[:min(len(raw), 300)], stream.logs)
	}
	if !bytes.Contains(body, []byte(`"type":"start"`)) || !bytes.Contains(body, []byte(`"type":"content"`)) || !bytes.Contains(body, []byte(`"type":"end"`)) {
		t.Errorf("stream events: %q", body)
	}

	// The other HTTP API functions answer an authenticated request with
	// the same cookie: the model list, the tool catalog (fetched from the
	// tool server), and a new workflow.
	models := start(t, "models", b.env())
	if r := models.http(request("GET", "/api/models", "", cookie)); r.StatusCode != 200 || !strings.Contains(r.Body, `"builtin"`) {
		t.Errorf("models: %d %.300s\n%s", r.StatusCode, r.Body, models.logs)
	}
	toolsFn := start(t, "tools", b.env())
	if r := toolsFn.http(request("GET", "/api/tools", "", cookie)); r.StatusCode != 200 || !strings.Contains(r.Body, `"json_query"`) {
		t.Errorf("tools: %d %.300s\n%s", r.StatusCode, r.Body, toolsFn.logs)
	}
	workflows := start(t, "workflows", functionEnv(b, "workflows"))
	wfResp := workflows.http(request("POST", "/api/workflows", `{"userId":"`+signedUp.Data.User.ID+`","name":"under RIE"}`, cookie))
	if wfResp.StatusCode != 201 || !strings.Contains(wfResp.Body, `"under RIE"`) {
		t.Errorf("create workflow: %d %.300s\n%s", wfResp.StatusCode, wfResp.Body, workflows.logs)
	}
	var wf struct{ Data struct{ ID string } }
	_ = json.Unmarshal([]byte(wfResp.Body), &wf)
	// A webhook trigger needs no scheduler call: the function's init
	// (its SCHEDULE_* and WEBHOOK_SIGNING_KEY) and routes.
	triggers := start(t, "triggers", functionEnv(b, "triggers"))
	if r := triggers.http(request("POST", "/api/workflows/"+wf.Data.ID+"/triggers", `{"type":"webhook"}`, cookie)); r.StatusCode != 201 || !strings.Contains(r.Body, `"secret":"whsec_`) {
		t.Errorf("create webhook trigger: %d %.300s\n%s", r.StatusCode, r.Body, triggers.logs)
	}

	mcp := start(t, "mcp", b.env())
	list := `{"method":"listTools","params":{}}`
	if r := mcp.http(request("POST", "/mcp", list)); r.StatusCode != 401 {
		t.Errorf("tool server without the key: %d %s", r.StatusCode, r.Body)
	}
	withKey := request("POST", "/mcp", list)
	withKey.Headers["x-service-key"] = b.key
	if r := mcp.http(withKey); r.StatusCode != 200 || !strings.Contains(r.Body, `"json_query"`) {
		t.Errorf("tool server with the key: %d %.200s\n%s", r.StatusCode, r.Body, mcp.logs)
	}
}

// TestMissingSettingFailsInit: a function without a required variable
// fails its init, and the emulator's answer and the function's output
// name the variable.
func TestMissingSettingFailsInit(t *testing.T) {
	b := newBackend(t)
	var env []string
	for _, kv := range b.env() {
		if !strings.HasPrefix(kv, "USERS_TABLE=") {
			env = append(env, kv)
		}
	}
	fn := start(t, "auth", env)
	raw := fn.invoke(request("GET", "/api/auth/session", ""))
	// The function's own output reaches the log through the emulator's
	// pipe, possibly after the answer: wait for it, not for a time.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(string(raw)+fn.logs.String(), "USERS_TABLE") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(string(raw)+fn.logs.String(), "USERS_TABLE") {
		t.Errorf("init without USERS_TABLE: %s\n%s", raw, fn.logs)
	}
	var proxy events.APIGatewayV2HTTPResponse
	if json.Unmarshal(raw, &proxy) == nil && proxy.StatusCode == 200 {
		t.Errorf("answered 200 without USERS_TABLE: %s", raw)
	}
}
