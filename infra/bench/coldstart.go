package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/workflowchat/service/functions/assembly/signingkeys/signingkeystest"
	"github.com/workflowchat/service/infra/cost/costmodel"
	"github.com/workflowchat/service/shared/oauth/accesstoken"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workflowchat/service/infra/dynamolocal"
)

// Cold start: each functions/<name> is built with the production flags,
// for linux/arm64 (the size that is deployed) and for this machine (to run
// it). Init time is process start to the first GET of the Lambda Runtime
// API's /runtime/invocation/next: aws-lambda-go's lambda.Start reads
// AWS_LAMBDA_RUNTIME_API and its loop's first act is that GET, so it marks
// the moment the function is ready for its first event, after every
// package init and everything main does before lambda.Start.

// floorFunction is the cold start floor: the function with no storage and
// no clients (config, middleware, lambda.Start).
const floorFunction = "health"

// buildFlags are the production flags (Makefile LAMBDA_FLAGS).
var buildFlags = []string{"-trimpath", "-ldflags=-s -w", "-tags", "lambda.norpc"}

type coldResult struct {
	name     string
	size     int64         // linux/arm64 binary
	hostSize int64         // this machine's binary
	init     time.Duration // median
	spread   [2]time.Duration
	pkgInit  time.Duration // sum of GODEBUG=inittrace clock times
	topInit  string        // the slowest package init
	ddb, mcp int64         // calls to DynamoDB and the tool server before ready (max over runs)
	err      error
}

// functionNames lists functions/<name> directories with a main.go.
func functionNames() ([]string, error) {
	entries, err := os.ReadDir("functions")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join("functions", e.Name(), "main.go")); e.IsDir() && err == nil {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func goBuild(goos, goarch, out, pkg string) error {
	args := append([]string{"build"}, buildFlags...)
	cmd := exec.Command("go", append(args, "-o", out, pkg)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %v\n%s", pkg, goos, goarch, err, b)
	}
	return nil
}

// goBuildAll builds every package of pkgs into the directory outDir.
func goBuildAll(goos, goarch, outDir string, pkgs []string) error {
	args := append([]string{"build"}, buildFlags...)
	cmd := exec.Command("go", append(append(args, "-o", outDir), pkgs...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s/%s: %v\n%s", goos, goarch, err, b)
	}
	return nil
}

// counting is a reverse proxy that counts the requests it forwards.
func counting(target string, n *atomic.Int64) *httptest.Server {
	u, _ := url.Parse(target)
	p := httputil.NewSingleHostReverseProxy(u)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		p.ServeHTTP(w, r)
	}))
}

// coldStart measures every function.
func coldStart(runs int) ([]coldResult, error) {
	names, err := functionNames()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-cold")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	eng, err := dynamolocal.Start()
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	var ddbCalls, mcpCalls atomic.Int64
	ddb := counting(eng.URL, &ddbCalls)
	defer ddb.Close()
	mcp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mcpCalls.Add(1)
		http.Error(w, `{"error":"Service Unavailable","message":"bench","code":"BENCH"}`, http.StatusServiceUnavailable)
	}))
	defer mcp.Close()
	secrets := httptest.NewServer(signingkeystest.New(benchSigningSecret, accesstoken.GenerateKeySet("k1")))
	defer secrets.Close()

	// One go build per platform for all functions (shared work, one
	// process); per function only if that fails, to name the broken one.
	var pkgs []string
	for _, name := range names {
		pkgs = append(pkgs, "./functions/"+name)
	}
	for _, p := range [][2]string{{"linux", "arm64"}, {runtime.GOOS, runtime.GOARCH}} {
		fmt.Fprintf(os.Stderr, "bench: building %d functions for %s/%s\n", len(names), p[0], p[1])
		_ = goBuildAll(p[0], p[1], filepath.Join(dir, p[1]+"-"+p[0])+string(filepath.Separator), pkgs)
	}
	var results []coldResult
	for _, name := range names {
		r := coldResult{name: name}
		pkg := "./functions/" + name
		arm := filepath.Join(dir, "arm64-linux", name)
		host := filepath.Join(dir, runtime.GOARCH+"-"+runtime.GOOS, name)
		if fileSize(arm) == 0 {
			r.err = goBuild("linux", "arm64", arm, pkg)
		}
		if r.err == nil && fileSize(host) == 0 {
			r.err = goBuild(runtime.GOOS, runtime.GOARCH, host, pkg)
		}
		fmt.Fprintf(os.Stderr, "bench: cold start %s\n", name)
		if r.err == nil {
			r.size, r.hostSize = fileSize(arm), fileSize(host)
			env := lambdaEnv(name, dir, ddb.URL, mcp.URL, secrets.URL)
			var times []time.Duration
			for i := 0; i < runs && r.err == nil; i++ {
				ddbCalls.Store(0)
				mcpCalls.Store(0)
				var d time.Duration
				d, _, r.err = initTime(host, env)
				times = append(times, d)
				r.ddb, r.mcp = max(r.ddb, ddbCalls.Load()), max(r.mcp, mcpCalls.Load())
			}
			if r.err == nil {
				slices.Sort(times)
				r.init = times[len(times)/2]
				r.spread = [2]time.Duration{times[0], times[len(times)-1]}
				// One more run, untimed, tracing package init.
				var trace []byte
				if _, trace, r.err = initTime(host, append(env, "GODEBUG=inittrace=1")); r.err == nil {
					r.pkgInit, r.topInit = parseInitTrace(trace)
				}
			}
		}
		if r.err != nil {
			fmt.Fprintf(os.Stderr, "bench: cold start %s: %v\n", name, r.err)
		}
		results = append(results, r)
	}
	return results, nil
}

// benchSigningSecret names the OAuth signing keys' secret.
const benchSigningSecret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:signing-keys-AbCdEf"

// lambdaEnv is the environment Lambda gives function name (the variables
// the stack sets, fake credentials), with the store at ddbURL and the tool
// server at mcpURL. AWS_LAMBDA_RUNTIME_API is added per run. The AWS
// endpoints nothing reads at init (the blob store, EventBridge Scheduler)
// point at a closed port: an init that called one would fail the
// measurement. The OAuth functions read their signing keys at init, from
// the Secrets Manager stand-in at secretsURL.
func lambdaEnv(name, home, ddbURL, mcpURL, secretsURL string) []string {
	const nowhere = "http://127.0.0.1:9"
	memory := 512
	if name == "mcp" { // its sandbox is sized from its memory
		memory, _ = costmodel.MemoryOf("McpFunction")
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TZ=UTC",
		"AWS_LAMBDA_FUNCTION_NAME=" + name, "AWS_LAMBDA_FUNCTION_VERSION=$LATEST", fmt.Sprintf("AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%d", memory),
		"AWS_EXECUTION_ENV=AWS_Lambda_provided.al2023", "_HANDLER=bootstrap", "LAMBDA_TASK_ROOT=" + home,
		"AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=bench", "AWS_SESSION_TOKEN=bench",
		"USERS_TABLE=users", "SESSIONS_TABLE=sessions", "DATA_TABLE=data", "RATE_LIMITS_TABLE=rate_limits", "OAUTH_TABLE=oauth",
		"DYNAMODB_ENDPOINT=" + ddbURL, "MCP_URL=" + mcpURL, "MCP_SERVICE_KEY=bench-service-key-0123456789",
		"RUNNER_FUNCTION=RunnerFunction", "BLOB_BUCKET=blobs", "BLOB_ENDPOINT=" + nowhere,
	}
	switch name {
	case "oauth", "mcpgateway":
		env = append(env, "OAUTH_SIGNING_SECRET="+benchSigningSecret, "AWS_ENDPOINT_URL_SECRETS_MANAGER="+secretsURL)
	case "workflows", "sweeper":
		env = append(env, "SCHEDULE_GROUP=bench-triggers", "SCHEDULER_ENDPOINT="+nowhere)
	case "triggers":
		env = append(env, "WEBHOOK_SIGNING_KEY=0123456789abcdef0123456789abcdef", "SCHEDULE_GROUP=bench-triggers",
			"SCHEDULE_TARGET_ARN=arn:aws:lambda:us-east-1:123456789012:function:fire", "SCHEDULE_ROLE_ARN=arn:aws:iam::123456789012:role/scheduler",
			"SCHEDULE_DLQ_ARN=arn:aws:sqs:us-east-1:123456789012:fire-dlq", "SCHEDULER_ENDPOINT="+nowhere)
	}
	return env
}

// initTime starts bin with env and a fake Runtime API, and returns the
// time from process start to its first GET .../runtime/invocation/next,
// and what the process wrote to stderr. The process is then killed.
func initTime(bin string, env []string) (time.Duration, []byte, error) {
	ready := make(chan time.Time, 1)
	var once sync.Once
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/2018-06-01/runtime/invocation/next" {
			now := time.Now()
			once.Do(func() { ready <- now })
			<-r.Context().Done() // no event: hold the poll until the process dies
			return
		}
		http.NotFound(w, r)
	}))
	defer api.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(slices.Clone(env), "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(api.URL, "http://"))
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	exited := make(chan error, 1)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
		api.CloseClientConnections()
	}()
	select {
	case t := <-ready:
		return t.Sub(start), stderrSnapshot(&stderr, exited), nil
	case err := <-exited:
		exited <- err
		return 0, nil, fmt.Errorf("exited before polling for an event: %v\n%s", err, stderr.String())
	case <-time.After(15 * time.Second):
		return 0, nil, errors.New("not ready after 15 s")
	}
}

// stderrSnapshot returns what the process wrote so far; inittrace lines
// are all written before main runs, so before the first poll.
func stderrSnapshot(b *bytes.Buffer, _ chan error) []byte {
	time.Sleep(10 * time.Millisecond)
	return slices.Clone(b.Bytes())
}

// parseInitTrace sums the clock times of GODEBUG=inittrace=1 lines such as
// "init net/http @1.2 ms, 0.35 ms clock, 1234 bytes, 12 allocs" and names
// the slowest package.
func parseInitTrace(b []byte) (time.Duration, string) {
	var total, top time.Duration
	var topName string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 7 || f[0] != "init" || f[5] != "ms" || f[6] != "clock," {
			continue
		}
		ms, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			continue
		}
		d := time.Duration(ms * float64(time.Millisecond))
		total += d
		if d > top {
			top, topName = d, f[1]
		}
	}
	if topName != "" {
		topName = fmt.Sprintf("%s (%.2f ms)", topName, float64(top)/float64(time.Millisecond))
	}
	return total, topName
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// coldStartSection measures and writes the cold start section. It returns
// an error when a function could not be built or never became ready (the
// section still lists the others).
func coldStartSection(doc *bytes.Buffer, runs int) error {
	results, err := coldStart(runs)
	if err != nil {
		return err
	}
	var floor coldResult
	for _, r := range results {
		if r.name == floorFunction {
			floor = r
		}
	}
	fmt.Fprintf(doc, "Each `functions/<name>` built with the production flags (`CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -tags lambda.norpc`). "+
		"Size: the linux/arm64 binary that is deployed. Init: the same code built for this machine (%s/%s) and started with the environment "+
		"a Lambda has (function name, table names, credentials; `DYNAMODB_ENDPOINT` an embedded engine, `MCP_URL` a stub) and "+
		"`AWS_LAMBDA_RUNTIME_API` pointing at a fake Runtime API; init is process start to the first `GET /2018-06-01/runtime/invocation/next` "+
		"(aws-lambda-go's first act once `lambda.Start` runs: the function is ready), the median of %d runs with the range. "+
		"Package init: the sum of `GODEBUG=inittrace=1` clock times (Go package initializers, before main). "+
		"Calls before ready: requests to DynamoDB and to the tool server during init, which should be none: init work is lazy. "+
		"In AWS, init also includes fetching and unpacking the code, so the size matters too. Floor: `%s` (config, middleware and `lambda.Start`, no clients).\n\n"+
		"| function | arm64 size | x floor | init ms (min-max) | x floor | package init ms (slowest) | DynamoDB / tool server calls before ready |\n"+
		"|---|---:|---:|---:|---:|---|---:|\n", runtime.GOOS, runtime.GOARCH, runs, floorFunction)
	var errs []error
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(doc, "| %s | %s | - | failed | - | - | - |\n", r.name, sizeMiB(r.size))
			errs = append(errs, fmt.Errorf("%s: %w", r.name, r.err))
			continue
		}
		fmt.Fprintf(doc, "| %s | %s | %s | %s (%s-%s) | %s | %s (%s) | %d / %d |\n", r.name, sizeMiB(r.size), ratio(float64(r.size), float64(floor.size)),
			ms(r.init), ms(r.spread[0]), ms(r.spread[1]), ratio(float64(r.init), float64(floor.init)), ms(r.pkgInit), r.topInit, r.ddb, r.mcp)
	}
	return errors.Join(errs...)
}

func sizeMiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func ratio(v, floor float64) string {
	if floor <= 0 {
		return "-"
	}
	return strconv.FormatFloat(v/floor, 'f', 2, 64)
}
