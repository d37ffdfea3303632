// Command bench runs the project's Go benchmarks, measures each Lambda
// function's cold start (binary size and init time), runs a short load test
// against a spawned dev server (infra/load), and writes docs/benchmarks.md:
// the machine, the date, and every figure, each timing also given as a
// ratio against the floor measured in the same run (the bare handler with
// no storage, the bare tool call, the storage-free function), so the
// numbers mean something on a noisy shared machine.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// suites are the benchmark packages, each with the benchmark used as its floor.
// A suite whose setup grows the data it measures pins its iteration count
// (benchtime), since the embedded engine's Query reads its whole table.
var suites = []struct {
	pkg, pattern, floor, title, note string
	benchtime                        string
}{
	{"./infra/local/", "BenchmarkEndpoints", "BenchmarkEndpoints/liveness_(no_storage)", "REST endpoints, in process, embedded DynamoDB over loopback HTTP",
		"Floor: GET /api/liveness, the full middleware stack with no storage. `ddbcalls/op` counts DynamoDB API calls per request with an aws-sdk middleware: an authenticated read costs exactly one read for the session plus one for the endpoint; a write costs the session read plus one write (a transaction where several items change).", ""},
	{"./infra/local/", "BenchmarkStreamFirstByte|BenchmarkListMessages1000|BenchmarkEndpoints/liveness", "BenchmarkEndpoints/liveness_(no_storage)", "Chat stream and long conversations",
		"Stream: time to the first byte and to the `start` event over loopback HTTP with the built-in model (the user message is stored before `start`, so this includes the session read, the conversation Query and one transaction). ListMessages1000: GET messages of a chat with 1,000 messages; one Query of the chat's item collection (paged by DynamoDB's 1 MB limit). Floor: liveness.", ""},
	{"./infra/local/", "BenchmarkResumeFirstEvent", "BenchmarkResumeFirstEvent/liveness_over_http", "Resumable replies: resume to the first event",
		"ResumeFirstEvent: GET .../messages/stream with Last-Event-ID on a finished reply of 50 events, over loopback HTTP, to the first replayed event (session read, rate limit, chat read, one Query of the log). Floor: GET /api/liveness over the same loopback HTTP; compare the p50s.", ""},
	{"./infra/local/", "BenchmarkReplyWrites|BenchmarkEndpoints/liveness", "BenchmarkEndpoints/liveness_(no_storage)", "Resumable replies: DynamoDB calls per streamed reply",
		"ReplyWrites: whole streamed replies of the built-in model's `count to N slowly` (N content events, 100 ms apart), all DynamoDB calls of the request: 4 to start (session, rate limit, conversation, the start transaction), then the event log's writes (at most one per 100 ms or 20 events, one a second while silent) and the end. `ddbcalls/streamed-s` falls towards 10 a second as the reply grows: the cost follows the reply's duration, not its events.", "1x"},
	{"./shared/store/", "BenchmarkLogWrites", "", "Resumable replies: log writes against the event rate",
		"LogWrites: an eventlog.Writer over the real store fed 2 s of events at three rates. Writes stay near 10 a second (one per 100 ms) until events come faster than 200 a second, when the 20-event cap makes it one write per 20 events.", "1x"},
	{"./shared/toolserver/", "BenchmarkRunToolOverhead|BenchmarkBareJSONQuery", "BenchmarkBareJSONQuery", "Tool server: runTool overhead for json_query",
		"Floor: the json_query tool's bare function call. RunToolOverhead is the whole POST /mcp handler in process: middleware, constant-time key check, dispatch, decoding, schema validation, the run under the tool's timeout, encoding. RunToolOverheadSandboxed is the same with json_query run in a sandbox worker process, as McpFunction and the dev server run it: the difference is the price of the isolation.", ""},
	{"./shared/tools/", "BenchmarkJSONQuery|BenchmarkRegistryRunJSONQuery", "BenchmarkJSONQuery", "Tool isolation: json_query in process and in a sandbox worker",
		"Floor: the json_query tool's bare function call. RegistryRunJSONQuery adds schema validation and the timeout; Sandboxed runs the same call in one of the tool server's worker processes (memory and CPU bounded by the kernel), as the tool server and the dev server do: the difference is the price of the isolation.", ""},
	{"./infra/local/", "BenchmarkApplyProposal|BenchmarkEndpoints/liveness", "BenchmarkEndpoints/liveness_(no_storage)", "Workflows: applying a proposal",
		"ApplyProposal: POST .../messages/apply in process; `ddbcalls/op` = the session read, one consistent read of the workflow and the proposal (TransactGetItems), one transaction writing both. Making each proposal is outside the timing. Floor: liveness.", "200x"},
	{"./infra/local/", "BenchmarkListChatsAtStoreSize", "BenchmarkListChatsAtStoreSize/empty_store", "Embedded engine: a Query at store size",
		"ListChatsAtStoreSize: GET /api/users/{id}/chats?limit=10 on the embedded engine holding only the user's chats (the floor) and holding 10,000 more items of other users (chats, counters, messages). The engine answers a Query from its ordered key index, so the cost follows the page, not the store; `p50-ns` is the figure to compare.", "300x"},
	{"./shared/workflow/", "BenchmarkEngineStep|BenchmarkEngineBareTool", "BenchmarkEngineBareTool", "Workflows: engine overhead per step",
		"EngineStep: a ten-step json_query workflow, each step reading the previous step's result through a template, every step's start and result written to the embedded DynamoDB (plus the run's create, start and finish); `ns/step` is the figure to set against the floor, the bare json_query call through the registry.", ""},
}

type result struct {
	name    string
	nsPerOp float64
	metrics map[string]string
}

func main() {
	out := flag.String("out", "docs/benchmarks.md", "report to write")
	benchtime := flag.String("benchtime", "2s", "go test -benchtime")
	runs := flag.Int("runs", 5, "cold start: runs per function (the median is reported)")
	loadDur := flag.Duration("load", 15*time.Second, "load test duration (0 skips it)")
	loadC := flag.Int("load-c", 4, "load test virtual users")
	skipGo := flag.Bool("skip-go", false, "skip the Go benchmark suites")
	skipCold := flag.Bool("skip-cold", false, "skip the cold start measurement")
	flag.Parse()
	failed := false
	var doc bytes.Buffer
	fmt.Fprintf(&doc, "# Benchmarks\n\nGenerated by `make bench` (`go run ./infra/bench`) on %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&doc, "Machine: %s, %d logical CPUs, %s memory, %s/%s, %s.\n\n", cpuModel(), runtime.NumCPU(), memTotal(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	doc.WriteString("Timings vary with the machine and its load (this one is shared and noisy); ratios against a floor measured in the same run are the figures to compare.\n")
	if !*skipGo {
		for _, s := range suites {
			fmt.Fprintf(os.Stderr, "bench: go test -bench %s %s\n", s.pattern, s.pkg)
			bt := *benchtime
			if s.benchtime != "" {
				bt = s.benchtime
			}
			if err := goBench(&doc, s.pkg, s.pattern, s.floor, s.title, s.note, bt); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				failed = true
			}
		}
	}
	if !*skipCold {
		fmt.Fprintln(os.Stderr, "bench: cold start")
		if err := coldStartSection(&doc, *runs); err != nil {
			fmt.Fprintln(os.Stderr, "bench: cold start:", err)
			failed = true
		}
	}
	if *loadDur > 0 {
		fmt.Fprintf(os.Stderr, "bench: load test, %d users for %v\n", *loadC, *loadDur)
		if err := loadSection(&doc, *loadC, *loadDur); err != nil {
			fmt.Fprintln(os.Stderr, "bench: load test:", err)
			failed = true
		}
	}
	if err := os.WriteFile(*out, doc.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", *out)
	if failed {
		os.Exit(1)
	}
}

// goBench runs one suite of Go benchmarks and writes its section.
func goBench(doc *bytes.Buffer, pkg, pattern, floorName, title, note, benchtime string) error {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", pattern, "-benchmem", "-benchtime", benchtime, "-count", "1", pkg)
	cmd.Stderr = os.Stderr
	raw, runErr := cmd.Output()
	if runErr != nil {
		runErr = fmt.Errorf("%s: %v\n%s", pkg, runErr, raw)
	}
	results := parse(raw)
	floor := 0.0
	for _, r := range results {
		if r.name == floorName {
			floor = r.nsPerOp
		}
	}
	fmt.Fprintf(doc, "\n## %s\n\n%s\n\n| benchmark | ns/op | x floor | other metrics |\n|---|---:|---:|---|\n", title, note)
	for _, r := range results {
		ratio := "-"
		if floor > 0 {
			ratio = strconv.FormatFloat(r.nsPerOp/floor, 'f', 1, 64)
		}
		var keys []string
		for k := range r.metrics {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var m []string
		for _, k := range keys {
			m = append(m, r.metrics[k]+" "+k)
		}
		fmt.Fprintf(doc, "| %s | %.0f | %s | %s |\n", strings.TrimPrefix(r.name, "Benchmark"), r.nsPerOp, ratio, strings.Join(m, ", "))
	}
	if runErr != nil {
		fmt.Fprintf(doc, "\n**This suite failed** (`go test -bench '%s' %s`); the rows above are the benchmarks that completed.\n", pattern, pkg)
	}
	return runErr
}

// loadSection runs the load generator against a dev server it spawns and
// includes its report. A failed run (incorrect responses) is still
// reported, and returned as an error.
func loadSection(doc *bytes.Buffer, c int, d time.Duration) error {
	dir, err := os.MkdirTemp("", "bench-load")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	md := filepath.Join(dir, "load.md")
	cmd := exec.Command("go", "run", "./infra/load", "-spawn", "-c", strconv.Itoa(c), "-d", d.String(), "-out", md)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	runErr := cmd.Run()
	report, err := os.ReadFile(md)
	if err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprintf(doc, "\n## Load test: the dev server under a realistic mix\n\n"+
		"`go run ./infra/load -spawn -c %d -d %v` (also `make load`): each virtual user signs up, then loops over a weighted mix "+
		"(session, list chats, create and delete chats, messages to the built-in model, one in four running json_query, streamed replies "+
		"checked event by event and read back, message lists, the tool catalog, liveness, sign-out and sign-in) over real HTTP on loopback, "+
		"with the embedded store in the same process. Every response is checked. Latency is the whole exchange, the body read to its end "+
		"(for the stream: to the `end` event). Floor: GET /api/liveness in the same run; `p50 x floor` is each route's p50 over the floor's.\n\n", c, d)
	doc.Write(report)
	if runErr != nil {
		fmt.Fprintf(doc, "\n**The load run failed: %v.**\n", runErr)
	}
	return runErr
}

// parse reads `go test -bench` output lines such as
// "BenchmarkX/y-2  1000  1234 ns/op  3.00 ddbcalls/op  456 B/op  7 allocs/op".
func parse(raw []byte) []result {
	var rs []result
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		r := result{name: name, metrics: map[string]string{}}
		for i := 2; i+1 < len(f); i += 2 {
			if f[i+1] == "ns/op" {
				r.nsPerOp, _ = strconv.ParseFloat(f[i], 64)
			} else {
				r.metrics[f[i+1]] = f[i]
			}
		}
		rs = append(rs, r)
	}
	return rs
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// memTotal is the machine's memory from /proc/meminfo.
func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == "MemTotal" {
			f := strings.Fields(v)
			if kb, err := strconv.ParseFloat(f[0], 64); err == nil && len(f) == 2 {
				return fmt.Sprintf("%.1f GiB", kb/(1<<20))
			}
		}
	}
	return "unknown"
}
