package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/gobuild"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/sandbox"
	"github.com/workflowchat/service/shared/tools"
)

// workerBin is internal/toolworker, built without the race detector (see
// that command's comment); sandboxPool is started from it on first use.
var (
	workerDir    string
	removeWorker func()
	sandboxOnce  sync.Once
	sandboxPool  *sandbox.Pool
	sandboxErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sandboxPool != nil {
		sandboxPool.Close()
	}
	if removeWorker != nil {
		removeWorker()
	}
	os.Exit(code)
}

// testSandbox returns the package's pool of real tool workers, sized as
// McpFunction's (3 workers, 2 per caller), building the worker binary on
// first use.
func testSandbox(t testing.TB) *sandbox.Pool {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("worker limits are enforced on Linux only")
	}
	sandboxOnce.Do(func() {
		var bin string
		if bin, removeWorker, sandboxErr = gobuild.ForMain("toolworker", "./internal/toolworker"); sandboxErr != nil {
			return
		}
		workerDir = filepath.Dir(bin)
		sandboxPool, sandboxErr = tools.NewSandbox(bin, tools.SandboxSize{Workers: 3, PerUser: 2}, slog.New(slog.DiscardHandler))
	})
	if sandboxErr != nil {
		t.Fatal(sandboxErr)
	}
	return sandboxPool
}

// TestIsolatedTools: exactly the tools that evaluate a program or a
// document from their input are isolated; the others need the service's
// configuration (network, models, clock) or cost a fixed amount.
func TestIsolatedTools(t *testing.T) {
	t.Parallel()
	var got []string
	for _, tool := range tools.Builtin(tools.Config{}) {
		if tool.Isolated {
			got = append(got, tool.ID)
		}
	}
	want := []string{"code", "csv_parse", "html_extract", "json_query", "math_evaluate", "regex_extract", "text_template"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("isolated tools %v, want %v", got, want)
	}
}

// recordingSandbox counts the requests that reach the real sandbox.
type recordingSandbox struct {
	tools.Sandbox
	mu   sync.Mutex
	seen []string
	keys []string
}

func (s *recordingSandbox) Do(ctx context.Context, key string, req []byte) ([]byte, error) {
	s.mu.Lock()
	s.seen = append(s.seen, string(req))
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return s.Sandbox.Do(ctx, key, req)
}

// lateSandbox answers as a worker does that finds no time left before
// the caller's context timer has fired.
type lateSandbox struct{}

func (lateSandbox) Do(context.Context, string, []byte) ([]byte, error) {
	return nil, sandbox.ErrNoTimeLeft
}

// slowStartSandbox answers as a pool whose worker did not start within
// its own start timeout, the caller's deadline still ahead.
type slowStartSandbox struct{}

func (slowStartSandbox) Do(context.Context, string, []byte) ([]byte, error) {
	return nil, fmt.Errorf("sandbox: worker w did not start: %w", context.DeadlineExceeded)
}

// TestSandboxOutOfTimeIsATimeout: a sandbox that saw the deadline pass
// before the caller's context did fails the call TOOL_TIMEOUT, not
// TOOL_EXECUTION_FAILED (the worker was there; the time was not), while
// a worker that did not start in its own time stays
// TOOL_EXECUTION_FAILED.
func TestSandboxOutOfTimeIsATimeout(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{}).WithSandbox(lateSandbox{})
	_, err := r.Run(t.Context(), "json_query", map[string]any{"input": map[string]any{"a": 1}, "query": ".a"})
	if code := errs.CodeOf(err); code != tools.CodeToolTimeout || errs.KindOf(err) != errs.Timeout {
		t.Fatalf("error %v (code %s), want %s", err, code, tools.CodeToolTimeout)
	}
	// A worker that did not start in its own time is the service's
	// failure, not the call's deadline.
	r = newRegistry(t, tools.Config{}).WithSandbox(slowStartSandbox{})
	_, err = r.Run(t.Context(), "json_query", map[string]any{"input": map[string]any{"a": 1}, "query": ".a"})
	if code := errs.CodeOf(err); code != tools.CodeToolExecutionFailed {
		t.Fatalf("a worker that did not start: %v (code %s), want %s", err, code, tools.CodeToolExecutionFailed)
	}
}

// TestIsolatedToolsRunInWorkers: with a sandbox, every isolated tool's run
// goes to it and succeeds there; the other tools run in process.
func TestIsolatedToolsRunInWorkers(t *testing.T) {
	t.Parallel()
	rec := &recordingSandbox{Sandbox: testSandbox(t)}
	r := newRegistry(t, tools.Config{}).WithSandbox(rec)
	inputs := map[string]map[string]any{
		"csv_parse":     {"text": "a,b\n1,2"},
		"html_extract":  {"html": "<p>hi</p>", "selector": "p"},
		"json_query":    {"input": map[string]any{"a": 1}, "query": ".a"},
		"math_evaluate": {"expression": "1 + 2"},
		"regex_extract": {"text": "a1", "pattern": `\d`},
		"text_template": {"template": "{{.x}}", "values": map[string]any{"x": "y"}},
		"hash":          {"text": "a", "algorithm": "md5"},
		"datetime_now":  {},
	}
	ctx := tools.WithCaller(t.Context(), "user-1")
	for id, in := range inputs {
		if _, err := r.Run(ctx, id, in); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	for id := range inputs {
		tool, _ := r.Get(id)
		ran := slices.ContainsFunc(rec.seen, func(req string) bool { return strings.Contains(req, `"tool":"`+id+`"`) })
		if ran != tool.Isolated {
			t.Errorf("%s (isolated %v) reached the sandbox: %v", id, tool.Isolated, ran)
		}
	}
	// Each run is admitted under its caller.
	if len(rec.keys) == 0 || slices.ContainsFunc(rec.keys, func(k string) bool { return k != "user-1" }) {
		t.Errorf("sandbox keys %q, want the caller user-1 for every run", rec.keys)
	}
}

func TestCaller(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"none", context.Background(), ""},
		{"set", tools.WithCaller(context.Background(), "u1"), "u1"},
		{"anonymous", tools.WithCaller(context.Background(), ""), ""},
		{"innermost wins", tools.WithCaller(tools.WithCaller(context.Background(), "u1"), "u2"), "u2"},
	}
	for _, tc := range tests {
		if got := tools.Caller(tc.ctx); got != tc.want {
			t.Errorf("%s: Caller = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestLargeEvaluationsConcurrently: an evaluation that fits a worker
// alone fits under concurrency too. Not parallel: its 20 evaluations
// would take the workers from the package's other tests for seconds. This one's heap peaks near 64 MiB,
// one Go heap arena, and fragments: it used to need a second arena, which
// the worker's limit did not hold, in a few runs out of a hundred, and
// in binaries linked with C a thread the runtime started meanwhile took
// another 72 MiB of address space. 20 at once, from 5 callers, with a
// tool timeout long enough for the queue.
func TestLargeEvaluationsConcurrently(t *testing.T) {
	r := withTimeouts(t, 10*time.Minute).WithSandbox(testSandbox(t))
	in := map[string]any{"query": `[range(400000)] | map(tostring) | join(",")`}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			ctx := tools.WithCaller(t.Context(), fmt.Sprint("user-", i%5))
			out, err := r.Run(ctx, "json_query", in)
			if err != nil {
				t.Errorf("evaluation %d: %v", i, err)
				return
			}
			if n := len(jsonOf(t, out)); n < 2_600_000 {
				t.Errorf("evaluation %d: %d bytes of output", i, n)
			}
		})
	}
	wg.Wait()
}

// withTimeouts returns a registry of the built-in tools, in process, each
// with timeout d: copies that the worker runs under their real ids.
func withTimeouts(t *testing.T, d time.Duration) *tools.Registry {
	t.Helper()
	var ts []*tools.Tool
	for _, tool := range tools.Builtin(tools.Config{}) {
		c := *tool
		c.Timeout = d
		ts = append(ts, &c)
	}
	r, err := tools.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSandboxLimits runs inputs that exhaust memory, CPU or output room in
// real workers: each fails with TOOL_RESOURCE_LIMIT (or TOOL_TIMEOUT for a
// CPU bomb, its worker killed at the deadline), and the pool serves on.
func TestSandboxLimits(t *testing.T) {
	t.Parallel()
	pool := testSandbox(t)
	// Short timeouts for the CPU bombs; long ones for the memory bombs,
	// which take seconds to fill a worker's heap on a loaded machine.
	fastReg := withTimeouts(t, 300*time.Millisecond).WithSandbox(pool)
	roomy := withTimeouts(t, 2*time.Minute).WithSandbox(pool)
	r := newRegistry(t, tools.Config{}).WithSandbox(pool)

	tests := []struct {
		name  string
		r     *tools.Registry
		tool  string
		input map[string]any
		code  string
		msg   string
	}{
		{"jq string repeat", roomy, "json_query", map[string]any{"input": "x", "query": "(. * 2000000000) | length"},
			tools.CodeToolResourceLimit, "exceeded its memory limit (128 MiB)"},
		{"jq doubling", roomy, "json_query", map[string]any{"input": strings.Repeat("x", 64), "query": "reduce range(24) as $i (.; .+.) | length"},
			tools.CodeToolResourceLimit, "exceeded its memory limit"},
		{"jq deep recursion", roomy, "json_query", map[string]any{"query": "def f: [f]; f"},
			tools.CodeToolResourceLimit, "exceeded its memory limit"},
		{"template doubling in nested ranges", roomy, "text_template", map[string]any{
			"template": `{{$x := "xxxxxxxx"}}{{range .a}}{{range $.a}}{{$x = printf "%s%s" $x $x}}{{end}}{{end}}{{len $x}}`,
			"values":   map[string]any{"a": []any{1, 2, 3, 4, 5, 6}}},
			tools.CodeToolResourceLimit, "exceeded its memory limit"},
		{"huge CSV", roomy, "csv_parse", map[string]any{"text": strings.Repeat("a,b\n", 4<<20)},
			tools.CodeToolResourceLimit, "exceeded its memory limit"},
		{"output over the limit", roomy, "json_query", map[string]any{"input": "x", "query": ". * 9000000"},
			tools.CodeToolResourceLimit, "output limit (8 MiB)"},
		{"jq endless loop", fastReg, "json_query", map[string]any{"query": "def f: f; f"},
			tools.CodeToolTimeout, "did not finish"},
		{"expr nested count", fastReg, "math_evaluate", map[string]any{"expression": "let a = [" + strings.Repeat("1,", 2999) + "1]; count(a, count(a, count(a, true) > 0) > 0)"},
			tools.CodeToolTimeout, "did not finish"},
	}
	// One at a time, each as a caller of its own: a memory bomb takes
	// seconds to fill its worker's heap, and a run's wait for a worker
	// counts against its timeout, so bombs queued behind each other, or
	// behind the anonymous runs of the package's other tests, could time
	// out instead.
	t.Run("bombs", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := tc.r.Run(tools.WithCaller(t.Context(), "bomb "+tc.name), tc.tool, tc.input)
				assertErr(t, err, tc.code, tc.msg, "")
				if tc.code == tools.CodeToolResourceLimit && errs.KindOf(err) != errs.Internal {
					t.Errorf("kind %v, want Internal (500)", errs.KindOf(err))
				}
			})
		}
	})
	out, err := r.Run(t.Context(), "json_query", map[string]any{"input": []any{1, 2, 3}, "query": "add"})
	if err != nil || jsonOf(t, out) != `{"result":6}` {
		t.Fatalf("after the bombs: %v, %v", out, err)
	}
}

// TestSandboxErrorsMatchInProcess: a tool's own errors come back from a
// worker with the code, kind, message and details they have in process.
func TestSandboxErrorsMatchInProcess(t *testing.T) {
	t.Parallel()
	plain := newRegistry(t, tools.Config{})
	isolated := plain.WithSandbox(testSandbox(t))
	inputs := []struct {
		tool  string
		input map[string]any
	}{
		{"json_query", map[string]any{"query": `error("boom")`}},
		{"json_query", map[string]any{"query": ".["}},
		{"regex_extract", map[string]any{"text": "a", "pattern": "("}},
		{"csv_parse", map[string]any{"text": "a,b\n1"}},
		{"math_evaluate", map[string]any{"expression": "1/0"}},
		{"text_template", map[string]any{"template": "{{.missing}}"}},
	}
	for _, in := range inputs {
		_, want := plain.Run(t.Context(), in.tool, in.input)
		_, got := isolated.Run(t.Context(), in.tool, in.input)
		var w, g *errs.Error
		if !errors.As(want, &w) || !errors.As(got, &g) {
			t.Fatalf("%s %v: errors %v and %v", in.tool, in.input, want, got)
		}
		if g.Kind != w.Kind || g.CodeOrDefault() != w.CodeOrDefault() || g.Message != w.Message || fmt.Sprint(g.Details) != fmt.Sprint(w.Details) {
			t.Errorf("%s %v:\n isolated   %v %s %q %v\n in process %v %s %q %v", in.tool, in.input,
				g.Kind, g.CodeOrDefault(), g.Message, g.Details, w.Kind, w.CodeOrDefault(), w.Message, w.Details)
		}
	}
}

// TestSandboxSizing: a worker retired at its CPU budget can still run the
// longest isolated tool to its timeout before the kernel's CPU limit.
func TestSandboxSizing(t *testing.T) {
	t.Parallel()
	for _, tool := range tools.Builtin(tools.Config{}) {
		timeout := tool.Timeout
		if timeout == 0 {
			timeout = tools.DefaultTimeout
		}
		if tool.Isolated && tools.SandboxCPUBudget+2*timeout > tools.SandboxCPULimit {
			t.Errorf("%s: budget %s + 2 x timeout %s exceeds the CPU limit %s", tool.ID, tools.SandboxCPUBudget, timeout, tools.SandboxCPULimit)
		}
	}
}

// TestLazySandboxStartsWorkersOnFirstUse: NewLazySandbox starts no worker
// process; the first isolated tool call starts them and runs in one.
func TestLazySandboxStartsWorkersOnFirstUse(t *testing.T) {
	t.Parallel()
	testSandbox(t) // builds the worker binary
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	script := filepath.Join(dir, "worker.sh")
	body := "#!/bin/sh\ntouch '" + marker + "'\nexec '" + filepath.Join(workerDir, "toolworker") + "' \"$@\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	lazy := tools.NewLazySandbox(script, tools.SandboxSize{Workers: 3, PerUser: 2}, slog.New(slog.DiscardHandler))
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a worker started before any call")
	}
	r, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.WithSandbox(lazy).Run(t.Context(), "json_query", map[string]any{"input": map[string]any{"a": []any{1.0, 2.0}}, "query": ".a | add"})
	if err != nil {
		t.Fatalf("isolated run through the lazy sandbox: %v", err)
	}
	if got, _ := json.Marshal(out); string(got) != `{"result":3}` {
		t.Errorf("output %s, want {\"result\":3}", got)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the call did not run in a worker started for it: %v", err)
	}
}
