package lambdart_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/workflowchat/service/infra/cost/costmodel"
	"github.com/workflowchat/service/infra/cost/measure"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/knowledge/knowledgetest"
)

// TestCostWorkload runs make cost's workload (infra/cost/measure) on the
// functions' real bootstraps, each under its own emulator, as Lambda
// would run them: the client's requests as API Gateway and function URL
// events, the runs and the indexing jobs queued through a stand-in of
// Lambda's Invoke API (AWS_ENDPOINT_URL_LAMBDA) and run by the runner's
// and the knowledge indexer's emulators, the tool
// calls through McpFunction's emulator behind MCP_URL, S3 through a
// counting proxy, the stand-in model at a model's pace. It measures, per
// unit of work, each function's invocations and their wall time, the
// client's requests and bytes, S3 requests and log bytes (measure.Tally),
// and each function's peak resident memory, its bootstrap's and its
// children's (/proc). With LAMBDART_COST_OUT it runs measure.Default and
// writes the measurement there as JSON, for make cost (infra/cost); else
// (or with LAMBDART_COST_WORKLOAD=tiny, which wrote infra/cost's test
// fixture) it runs measure.Tiny in seconds. Either way it checks the
// measurement.
func TestCostWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the bootstraps under the emulator")
	}
	w, out := measure.Tiny, os.Getenv("LAMBDART_COST_OUT")
	if out != "" && os.Getenv("LAMBDART_COST_WORKLOAD") != "tiny" {
		w = measure.Default
	}
	ctx := t.Context()
	b := newBackend(t)
	model := measure.StartModel(w)
	t.Cleanup(model.Close)
	h := newCostHost(t, b, model.URL, w.Coverage)
	if err := measure.Run(ctx, h, w, h.tally); err != nil {
		t.Fatalf("the workload: %v\n%s", err, h.logsOf())
	}
	h.finish()
	res := h.tally.Result(fmt.Sprintf("%s on %s/%s, %d logical CPUs, %s", time.Now().UTC().Format("2006-01-02 15:04 MST"),
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()))

	checkCostMeasurement(t, w, res)
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("measured: %s", js)
	if out != "" {
		if err := os.WriteFile(out, js, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkCostMeasurement checks what every priced unit measured: the
// functions it must invoke, the client's requests, durations at least the
// model's time, logs, and a peak for every function invoked.
func checkCostMeasurement(t *testing.T, w measure.Workload, res measure.Emulated) {
	t.Helper()
	inv := func(u costmodel.Usage, fn string) costmodel.Invocations {
		for _, i := range u.Lambda {
			if i.Function == fn {
				return i
			}
		}
		return costmodel.Invocations{}
	}
	for _, c := range []struct {
		kind    string
		samples int
		// calls are the functions each unit invokes, with how many times
		// at least.
		calls    map[string]float64
		requests float64 // the client's requests (CloudFront)
		api      bool    // through the HTTP API
		model    int     // the reply's tokens: the stream lasts at least the model's time
	}{
		{measure.KindShort, w.Samples.Short, map[string]float64{"StreamFunction": 1}, 1, false, w.Short},
		{measure.KindLong, w.Samples.Long, map[string]float64{"StreamFunction": 1}, 1, false, w.Long},
		{measure.KindRun, w.Samples.Runs, map[string]float64{"WorkflowsFunction": 1, "RunnerFunction": 1, "McpFunction": float64(w.Steps)}, 1, true, 0},
		{measure.KindSweep, w.Samples.Sweeps, map[string]float64{"SweeperFunction": 1}, 0, false, 0},
		{measure.KindFire, w.Samples.Fires, map[string]float64{"TriggerFireFunction": 1, "RunnerFunction": 1, "McpFunction": 1}, 0, false, 0},
	} {
		got, ok := res.Units[c.kind]
		if !ok || got.Samples != c.samples {
			t.Errorf("%s: %d units measured, want %d", c.kind, got.Samples, c.samples)
			continue
		}
		u := got.Usage
		for fn, n := range c.calls {
			i := inv(u, fn)
			if i.Count < n || i.Seconds <= 0 {
				t.Errorf("%s: %s invoked %v times for %v s, want at least %v times", c.kind, fn, i.Count, i.Seconds, n)
			}
		}
		if c.model > 0 {
			if s, m := inv(u, "StreamFunction").Seconds, w.Pace.Seconds(c.model); s < m {
				t.Errorf("%s: the stream took %.3f s, less than the model's %.3f s", c.kind, s, m)
			}
		}
		if u.CloudFront.Requests != c.requests || (u.HTTPAPI.Count > 0) != c.api || (c.requests > 0 && u.CloudFront.BytesOut <= 0) {
			t.Errorf("%s: CloudFront %+v, HTTP API %+v; want %v requests, through the HTTP API %v", c.kind, u.CloudFront, u.HTTPAPI, c.requests, c.api)
		}
		if u.LogBytes <= 0 {
			t.Errorf("%s: no log bytes", c.kind)
		}
	}
	invoked := map[string]bool{}
	for _, u := range res.Units {
		for _, i := range u.Usage.Lambda {
			invoked[i.Function] = true
		}
	}
	for _, p := range res.Peaks {
		if p.PeakMiB <= 0 || p.Invocations == 0 {
			t.Errorf("%s: peak %.1f MiB over %d invocations", p.Function, p.PeakMiB, p.Invocations)
		}
		delete(invoked, p.Function)
	}
	for fn := range invoked {
		t.Errorf("%s: invoked, but no peak measured", fn)
	}
}

// costHost is measure.Host on bootstraps under the emulator.
type costHost struct {
	t     *testing.T
	tally *measure.Tally
	fns   map[string]*emulatedFn
	// runs are the invocations in flight queued through the stand-in
	// Lambda API (the runner's, the knowledge indexer's); runErrs their
	// failures.
	runs      sync.WaitGroup
	mu        sync.Mutex
	runErrs   []error
	stopPeaks func()
}

// emulatedFn is one function's emulator, invoked once at a time as the
// emulator serves invocations.
type emulatedFn struct {
	name string
	f    *function
	mu   sync.Mutex
	// kinds is the unit kind of each invocation, in order: its log lines
	// are counted to that unit.
	kinds []string
}

// costFunctions are the functions the priced work invokes; coverage adds
// the rest.
var costFunctions = []string{"auth", "chats", "stream", "workflows", "runner", "mcp", "sweeper"}

// queued are the functions the stand-in Lambda API runs an asynchronous
// invoke of (InvocationType Event), by the name the callers are given
// (RUNNER_FUNCTION, KNOWLEDGE_INDEX_FUNCTION), with their emulators.
var queued = map[string]string{"RunnerFunction": "runner", "KnowledgeIndexFunction": "knowledgeindex"}

// withEnv is env with each of kv ("KEY=value") set, replacing the key's
// value where env has it.
func withEnv(env []string, kv ...string) []string {
	out := slices.Clone(env)
	for _, e := range kv {
		k, _, _ := strings.Cut(e, "=")
		out = slices.DeleteFunc(out, func(x string) bool { return strings.HasPrefix(x, k+"=") })
		out = append(out, e)
	}
	return out
}

func newCostHost(t *testing.T, b backend, modelURL string, coverage bool) *costHost {
	t.Helper()
	h := &costHost{t: t, tally: measure.NewTally(), fns: map[string]*emulatedFn{}}
	// The tool server (McpFunction), the runner's invoke and S3 are
	// reached at these, which forward to the emulators and the fake S3.
	mcpURL := httptest.NewServer(http.HandlerFunc(h.serveMCP))
	t.Cleanup(mcpURL.Close)
	lambdaAPI := httptest.NewServer(http.HandlerFunc(h.serveInvoke))
	t.Cleanup(lambdaAPI.Close)
	s3, err := url.Parse(b.s3URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(s3)
	s3Proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bucketOnly := strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 0
		h.tally.S3Request(r.Method, bucketOnly && r.Method == http.MethodGet)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(s3Proxy.Close)
	// The knowledge bases' S3 Vectors index (a stand-in of the service,
	// named by its ARN as the stack names it), which KnowledgeFunction
	// and KnowledgeIndexFunction reach at AWS_ENDPOINT_URL_S3VECTORS.
	vectors := knowledgetest.NewFakeS3Vectors("cost-vectors", "chunks", knowledge.Dimensions)
	vectorsURL := httptest.NewServer(vectors)
	t.Cleanup(vectorsURL.Close)
	// KnowledgeFunction and the sweeper hand indexing jobs to
	// KnowledgeIndexFunction through the Lambda API, as the stack
	// configures them; both the function and the indexer embed with the
	// built-in embedder (no stand-in of Bedrock) and write the vectors to
	// S3 Vectors.
	knowledgeEnv := []string{"KNOWLEDGE_INDEX_FUNCTION=KnowledgeIndexFunction", "KNOWLEDGE_EMBEDDER=builtin",
		"KNOWLEDGE_VECTOR_BUCKET=arn:aws:s3vectors:us-east-1:123456789012:bucket/cost-vectors", "KNOWLEDGE_VECTOR_INDEX=" + vectors.ARN(),
		"AWS_ENDPOINT_URL_S3VECTORS=" + vectorsURL.URL}

	names := costFunctions
	if coverage {
		names = functionNames(t)
	}
	extra := []string{"LOG_LEVEL=info", "MCP_URL=" + mcpURL.URL, "AWS_ENDPOINT_URL_LAMBDA=" + lambdaAPI.URL, "BLOB_ENDPOINT=" + s3Proxy.URL}
	for k, v := range measure.Env(modelURL) {
		extra = append(extra, k+"="+v)
	}
	for _, name := range names {
		binary(t, name)
	}
	for _, name := range names {
		env := append(functionEnv(b, name), extra...)
		if mb, ok := costmodel.MemoryOf(measure.LogicalIDs[name]); ok {
			env = append(env, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+strconv.Itoa(mb))
		}
		if name == "runner" {
			env = append(env, "RUNNER_FUNCTION=RunnerFunction")
		}
		if name == "knowledge" || name == "knowledgeindex" || name == "sweeper" {
			env = withEnv(env, knowledgeEnv...)
		}
		h.fns[name] = &emulatedFn{name: name, f: start(t, name, env)}
	}
	h.stopPeaks = h.samplePeaks()
	t.Cleanup(h.stopPeaks)
	return h
}

// invoke sends one event to function name's emulator and returns its
// answer, counting the invocation and its wall time.
func (h *costHost) invoke(ctx context.Context, name string, event any) ([]byte, error) {
	fe := h.fns[name]
	if fe == nil {
		return nil, fmt.Errorf("no emulator runs %s", name)
	}
	payload, err := json.Marshal(event)
	if err != nil {
		return nil, err
	}
	fe.mu.Lock()
	defer fe.mu.Unlock()
	fe.kinds = append(fe.kinds, h.tally.Kind())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fe.f.url, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", name, err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	h.tally.Invocation(name, time.Since(t0))
	if err != nil {
		return nil, err
	}
	if bytes.Contains(raw, []byte(`"errorType":`)) && bytes.Contains(raw, []byte(`"errorMessage":`)) {
		return nil, fmt.Errorf("%s failed: %s", name, raw)
	}
	return raw, nil
}

// event is r as API Gateway (payload 2.0) or a function URL gives it.
func event(r *http.Request, body []byte) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: "$default", RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery,
		Headers: map[string]string{"host": "api.example.com"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{DomainName: "api.example.com", RequestID: "cost", Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.9"}}}
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			for _, v := range vs {
				ev.Cookies = append(ev.Cookies, strings.Split(v, "; ")...)
			}
			continue
		}
		ev.Headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	ev.Body = string(body)
	return ev
}

// response decodes an invocation's answer: a function URL's streamed
// response (a JSON prelude, eight zero bytes, the body) or a proxy
// response.
func response(raw []byte) (*measure.Response, error) {
	out := &measure.Response{Header: http.Header{}}
	if prelude, body, ok := bytes.Cut(raw, make([]byte, 8)); ok {
		var head struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
			Cookies    []string          `json:"cookies"`
		}
		if json.Unmarshal(prelude, &head) == nil && head.StatusCode != 0 {
			out.Status, out.Body = head.StatusCode, body
			for k, v := range head.Headers {
				out.Header.Set(k, v)
			}
			for _, c := range head.Cookies {
				out.Header.Add("Set-Cookie", c)
			}
			return out, nil
		}
	}
	var p events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(raw, &p); err != nil || p.StatusCode == 0 {
		return nil, fmt.Errorf("not a proxy response: %.300s (%v)", raw, err)
	}
	out.Status, out.Body = p.StatusCode, []byte(p.Body)
	if p.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(p.Body)
		if err != nil {
			return nil, err
		}
		out.Body = b
	}
	for k, v := range p.Headers {
		out.Header.Set(k, v)
	}
	for k, vs := range p.MultiValueHeaders {
		for _, v := range vs {
			out.Header.Add(k, v)
		}
	}
	for _, c := range p.Cookies {
		out.Header.Add("Set-Cookie", c)
	}
	return out, nil
}

// Do sends r to function fn as the client's request through CloudFront.
func (h *costHost) Do(ctx context.Context, fn string, r *http.Request) (*measure.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
	}
	raw, err := h.invoke(ctx, fn, event(r, body))
	if err != nil {
		return nil, err
	}
	resp, err := response(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	h.tally.ClientRequest(fn, measure.RequestBytes(r, body), measure.ResponseBytes(resp))
	return resp, nil
}

// Invoke sends event to a function that serves no HTTP.
func (h *costHost) Invoke(ctx context.Context, fn string, event any) error {
	_, err := h.invoke(ctx, fn, event)
	return err
}

// Settle waits for the invocations queued through the Lambda API in
// flight (the runner's, the knowledge indexer's).
func (h *costHost) Settle(context.Context) error {
	h.runs.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	err := errors.Join(h.runErrs...)
	h.runErrs = nil
	return err
}

// serveInvoke is Lambda's Invoke API for InvocationType Event: it queues
// the payload for the emulator of the function named (queued: the
// runner's, the knowledge indexer's) and answers 202.
func (h *costHost) serveInvoke(w http.ResponseWriter, r *http.Request) {
	fn, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
	fn, _ = strings.CutSuffix(fn, "/invocations")
	payload, err := io.ReadAll(r.Body)
	name, known := queued[fn]
	if !ok || err != nil || !known || r.Header.Get("X-Amz-Invocation-Type") != "Event" {
		http.Error(w, fmt.Sprintf(`{"message":"unexpected invoke of %q"}`, fn), http.StatusBadRequest)
		return
	}
	h.runs.Add(1)
	go func() {
		defer h.runs.Done()
		if _, err := h.invoke(context.Background(), name, json.RawMessage(payload)); err != nil {
			h.mu.Lock()
			h.runErrs = append(h.runErrs, err)
			h.mu.Unlock()
		}
	}()
	w.WriteHeader(http.StatusAccepted)
}

// serveMCP is McpFunction's function URL: each request an invocation of
// its emulator.
func (h *costHost) serveMCP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	raw, err := h.invoke(r.Context(), "mcp", event(r, body))
	var resp *measure.Response
	if err == nil {
		resp, err = response(raw)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// samplePeaks samples, every 200 ms, the resident memory of each
// function's processes (its bootstrap and the processes it started) and
// keeps the largest sum; the returned func stops it.
func (h *costHost) samplePeaks() func() {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			h.recordPeaks(false)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return sync.OnceFunc(func() { close(done); <-stopped })
}

// recordPeaks records each function's memory now: the sum of its
// processes' resident memory (VmRSS), or with highWater the sum of their
// peaks (VmHWM), an upper bound of their peak together.
func (h *costHost) recordPeaks(highWater bool) {
	field := "VmRSS:"
	if highWater {
		field = "VmHWM:"
	}
	children := procChildren()
	for name, fe := range h.fns {
		var kb int64
		for _, p := range tree(children, fe.f.pid) {
			kb += procStatusKB(p, field)
		}
		if kb > 0 {
			h.tally.Peak(name, float64(kb)/1024)
		}
	}
}

// finish stops the sampling, records the peaks of the processes as they
// end, and counts each function's log lines to the units of their
// invocations.
func (h *costHost) finish() {
	h.stopPeaks()
	h.recordPeaks(true)
	for _, fe := range h.fns {
		fe.mu.Lock()
		kinds := fe.kinds
		fe.mu.Unlock()
		for i, n := range logBytesPerInvocation(fe.f.logs.String()) {
			if i < len(kinds) {
				h.tally.LogBytes(kinds[i], n)
			}
		}
	}
}

// logsOf is every function's output, for a failure's message.
func (h *costHost) logsOf() string {
	var b strings.Builder
	for name, fe := range h.fns {
		fmt.Fprintf(&b, "--- %s\n%s\n", name, tail(fe.f.logs.String(), 3000))
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// logBytesPerInvocation splits an emulator's output into its invocations
// (each begins with Lambda's START line) and returns, for each, the bytes
// CloudWatch Logs would ingest: the function's own lines (JSON, as
// LOG_FORMAT json writes them) and Lambda's START, END and REPORT lines;
// the emulator's own lines are not the function's.
func logBytesPerInvocation(out string) []int {
	var per []int
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "START RequestId:") {
			per = append(per, 0)
		}
		counted := strings.HasPrefix(line, "{") || strings.HasPrefix(line, "START RequestId:") ||
			strings.HasPrefix(line, "END RequestId:") || strings.HasPrefix(line, "REPORT RequestId:")
		if counted && len(per) > 0 {
			per[len(per)-1] += len(line) + 1
		}
	}
	return per
}

// procChildren maps each process to its children (/proc).
func procChildren() map[int][]int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 1 {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				children[pp] = append(children[pp], p)
			}
		}
	}
	return children
}

// tree lists the processes under pid, not pid itself.
func tree(children map[int][]int, pid int) []int {
	var out []int
	for _, c := range children[pid] {
		out = append(out, c)
		out = append(out, tree(children, c)...)
	}
	return out
}

// procStatusKB reads a "kB" field of /proc/<pid>/status (0 if gone).
func procStatusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
