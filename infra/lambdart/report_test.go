package lambdart_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// maxFirstInvokeRatio bounds every function's first invoke against
// health's, measured in the same run.
const maxFirstInvokeRatio = 2.0

// overTwice are the functions whose first invoke is known to cost more
// than maxFirstInvokeRatio times health's, each with the reason and the
// ratio it is held to until the reason is gone (then delete its entry).
var overTwice = map[string]struct {
	bound float64
	why   string
}{
	"sweeper": {4.0, "unlike the others' first events (a request answered 404), its first event is the work itself: a sweep, " +
		"16 Queries of the lease index (about 6 ms of the bootstrap's CPU on this machine), then the queues of account erasures " +
		"and of data exports (2 Queries) and the first run of their code: 3.6 times health's measured on 2026-12-02 " +
		"(was 2.2 before those queues; bring it back down)"},
}

// firstInvokeRounds is how many fresh starts of each function the
// measurement takes: enough that each function's least CPU time stays put
// on a loaded 2-core machine.
const firstInvokeRounds = 11

// functionNames lists the functions: every functions/<name>/main.go.
func functionNames(t *testing.T) []string {
	t.Helper()
	mains, err := filepath.Glob("../../functions/*/main.go")
	if err != nil || len(mains) == 0 {
		t.Fatalf("no functions found: %v", err)
	}
	var names []string
	for _, m := range mains {
		names = append(names, filepath.Base(filepath.Dir(m)))
	}
	slices.Sort(names)
	// health first: the floor.
	i := slices.Index(names, "health")
	if i < 0 {
		t.Fatal("no health function: the floor of the first-invoke ratios")
	}
	return append([]string{"health"}, slices.Delete(names, i, i+1)...)
}

// firstEvent is the event a function's first invocation answers: a route
// it does not serve (the HTTP functions), one refused before any read
// (the tool server without its key), or the event of a function that
// serves no route: a run that does not exist (the runner), an indexing
// job whose document does not exist (the knowledge indexer) and a schedule
// tick (the sweeper, over empty tables). Either of the last two reads the
// embedded DynamoDB engine once or twice.
func firstEvent(name string) any {
	switch name {
	case "health":
		return request("GET", "/api/liveness", "")
	case "mcp":
		return request("POST", "/mcp", `{"method":"listTools","params":{}}`)
	case "runner":
		return map[string]any{"chatId": "first-invoke", "runId": "first-invoke", "attempt": 1}
	case "knowledgeindex":
		return map[string]any{"knowledgeBaseId": "first-invoke", "documentId": "first-invoke", "attempt": 1}
	case "sweeper":
		return events.EventBridgeEvent{Version: "0", ID: "first-invoke", DetailType: "Scheduled Event", Source: "aws.events",
			Region: "us-east-1", Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Detail: json.RawMessage(`{}`)}
	}
	return request("GET", "/api/unrouted", "")
}

// firstInvoke is one function's first invocations, one per round.
type firstInvoke struct {
	name   string
	wallMs []float64 // from the emulator listening to the answer
	cpuMs  []float64 // CPU time of the invocation: the bootstrap's (and its children's) and the emulator's
	// rounds tags each sample with its round, so that a function's samples
	// pair with health's of the same round.
	rounds []int
	floor  *firstInvoke
}

func (f firstInvoke) wall() float64 { return median(f.wallMs) }

// cpu is the least CPU time over the rounds: the machine's other work can
// only add to a process's CPU time (cache and scheduler interference), so
// the least is the closest to the invocation's own cost.
func (f firstInvoke) cpu() float64 { return slices.Min(f.cpuMs) }

// ratio is f's CPU time over health's: the median, over the rounds both
// were measured in, of f's over health's in that round (each round starts
// every function once, in a random order). The machine's other work
// inflates a round's samples together, and a median of paired ratios does
// not hang on one sample, as a ratio of minimums does (on a loaded
// machine health's least of 33 rounds was half its median).
func (f firstInvoke) ratio() float64 {
	if f.floor == nil {
		return 1
	}
	byRound := map[int]float64{}
	for k, r := range f.floor.rounds {
		byRound[r] = f.floor.cpuMs[k]
	}
	var ratios []float64
	for k, r := range f.rounds {
		if h, ok := byRound[r]; ok && h > 0 {
			ratios = append(ratios, f.cpuMs[k]/h)
		}
	}
	return median(ratios)
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// measureFirstInvokes starts every function's bootstrap rounds times under
// the emulator, each time fresh, and measures its first invocation, which
// holds the bootstrap's start (the emulator starts it on the first event),
// its package init and main's setup, and one request: the wall time from
// the emulator listening to the answer, and the CPU time it took, of the
// bootstrap (with any child process it started) and of the emulator
// during the invocation. The CPU time is what the invocation costs on an
// idle machine; unlike the wall time it grows little with the other work
// on a loaded one (and never shrinks), so the ratios are taken of CPU
// times, paired by round (firstInvoke.ratio). Each round starts
// every function once, in a new random order.
func measureFirstInvokes(t *testing.T, b backend, names []string, rounds int) []firstInvoke {
	return measureFirstInvokesFrom(t, b, names, rounds, 0)
}

// measureFirstInvokesFrom is measureFirstInvokes with its rounds numbered
// from first.
func measureFirstInvokesFrom(t *testing.T, b backend, names []string, rounds, first int) []firstInvoke {
	t.Helper()
	for _, name := range names {
		binary(t, name) // build before measuring anything
	}
	res := make([]firstInvoke, len(names))
	for i, name := range names {
		res[i].name, res[i].floor = name, &res[0]
	}
	for round := range rounds {
		wall, cpu := make([]float64, len(names)), make([]float64, len(names))
		for _, i := range rand.Perm(len(names)) {
			f := start(t, names[i], functionEnv(b, names[i]))
			rie0 := cpuTime(f.pid)
			t0 := time.Now()
			out := f.invoke(firstEvent(names[i]))
			wall[i] = float64(time.Since(t0).Microseconds()) / 1000
			if bytes.Contains(out, []byte(`"errorType":"Runtime.`)) {
				// The bootstrap died (an init failure): what was measured
				// is not a first invoke.
				t.Fatalf("%s: the first invoke failed: %s\n%s", names[i], out, f.logs)
			}
			used := cpuTime(f.pid) - rie0
			for _, p := range descendants(f.pid) {
				used += cpuTime(p)
			}
			cpu[i] = float64(used.Microseconds()) / 1000
			f.stop()
		}
		for i := range names {
			res[i].wallMs = append(res[i].wallMs, wall[i])
			res[i].cpuMs = append(res[i].cpuMs, cpu[i])
			res[i].rounds = append(res[i].rounds, first+round)
		}
	}
	return res
}

// cpuTime is the CPU time process pid has run, all its threads together
// (/proc/<pid>/task/*/schedstat: nanoseconds on a CPU, first field).
func cpuTime(pid int) time.Duration {
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var ns int64
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			ns += n
		}
	}
	return time.Duration(ns)
}

// descendants lists the processes under pid (children, their children...).
func descendants(pid int) []int {
	parent := map[int]int{}
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
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	var walk func(int)
	walk = func(q int) {
		for p, pp := range parent {
			if pp == q {
				out = append(out, p)
				walk(p)
			}
		}
	}
	walk(pid)
	return out
}

// TestFirstInvokeWithinTwiceHealth: every function's first invoke under
// the emulator costs at most maxFirstInvokeRatio times health's, in the
// same run (a ratio of CPU times: see measureFirstInvokes). What a cold
// start must not carry (a library's package init compiling meta-schemas,
// a registry compiling every tool's schema, regular expressions compiled
// in package init) shows here.
func TestFirstInvokeWithinTwiceHealth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts every bootstrap many times")
	}
	b := newBackend(t)
	res := measureFirstInvokes(t, b, functionNames(t), firstInvokeRounds)
	// A function over its bound on a busy machine is measured again, with
	// health in the same rounds, up to twice, before it counts as over.
	next := firstInvokeRounds
	for range 2 {
		names := []string{res[0].name}
		for _, r := range res[1:] {
			if r.ratio() > boundOf(r.name) {
				names = append(names, r.name)
			}
		}
		if len(names) == 1 {
			break
		}
		again := measureFirstInvokesFrom(t, b, names, firstInvokeRounds, next)
		next += firstInvokeRounds
		for _, a := range again {
			for i := range res {
				if res[i].name == a.name {
					res[i].cpuMs = append(res[i].cpuMs, a.cpuMs...)
					res[i].wallMs = append(res[i].wallMs, a.wallMs...)
					res[i].rounds = append(res[i].rounds, a.rounds...)
				}
			}
		}
	}
	var summary strings.Builder
	for _, r := range res {
		fmt.Fprintf(&summary, "%s %.1f ms CPU (x%.2f), %.1f ms wall; ", r.name, r.cpu(), r.ratio(), r.wall())
	}
	t.Log(summary.String())
	for _, r := range res[1:] {
		bound, why := boundOf(r.name), ""
		if o, ok := overTwice[r.name]; ok {
			why = " (held to " + strconv.FormatFloat(o.bound, 'f', 1, 64) + " meanwhile: " + o.why + ")"
		}
		ratio := r.ratio()
		switch {
		case ratio > bound:
			t.Errorf("%s: first invoke %.2f times health's CPU time (median of %d paired rounds; at most %.1f%s): least %.1f ms against %.1f ms; rounds %v, health's %v",
				r.name, ratio, len(r.cpuMs), bound, why, r.cpu(), res[0].cpu(), r.cpuMs, res[0].cpuMs)
		case why != "" && ratio <= maxFirstInvokeRatio:
			t.Logf("%s: %.2f times health's, within %.1f: its entry in overTwice may go", r.name, ratio, maxFirstInvokeRatio)
		}
	}
}

// boundOf is the most function name's first invoke may cost, as a ratio
// to health's.
func boundOf(name string) float64 {
	if o, ok := overTwice[name]; ok {
		return o.bound
	}
	return maxFirstInvokeRatio
}

// TestReport measures, per function, the linux/arm64 bootstrap (the
// deployed size) and its zip, and the first invocation under the emulator
// as TestFirstInvokeWithinTwiceHealth does, against health in the same
// run (medians of LAMBDART_ROUNDS rounds, default firstInvokeRounds). It
// needs LAMBDART_REPORT=1 (it builds every function twice) and prints
// docs/benchmarks.md's table: one row per function, the last column the
// ratio of its first invoke to health's. With LAMBDART_REPORT_OUT set it
// also writes the table (Markdown) to that file, for infra/bench.
func TestReport(t *testing.T) {
	if os.Getenv("LAMBDART_REPORT") == "" {
		t.Skip("set LAMBDART_REPORT=1 to measure the bootstraps")
	}
	b := newBackend(t)
	names := functionNames(t)
	type size struct{ arm, zipped int64 }
	sizes := map[string]size{}
	for _, name := range names {
		arm := filepath.Join(binDir, "arm64", name, "bootstrap")
		if err := goBuildArch(arm, "./functions/"+name); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(arm)
		if err != nil {
			t.Fatal(err)
		}
		sizes[name] = size{st.Size(), zippedSize(t, arm)}
	}
	rounds := firstInvokeRounds
	if n, err := strconv.Atoi(os.Getenv("LAMBDART_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	res := measureFirstInvokes(t, b, names, rounds)
	floor := sizes["health"]
	var out strings.Builder
	fmt.Fprintf(&out, "| function | arm64 size | zipped | zipped x health | first invoke, wall ms, median (min-max) | first invoke, CPU ms, least (median) | first invoke x health (CPU) |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res {
		s := sizes[r.name]
		fmt.Fprintf(&out, "| %s | %.1f MiB | %.1f MiB | %.2f | %.1f (%.1f-%.1f) | %.1f (%.1f) | %.2f |\n", r.name,
			float64(s.arm)/(1<<20), float64(s.zipped)/(1<<20), float64(s.zipped)/float64(floor.zipped),
			r.wall(), slices.Min(r.wallMs), slices.Max(r.wallMs), r.cpu(), median(r.cpuMs), r.ratio())
	}
	t.Log("\n" + out.String())
	if path := os.Getenv("LAMBDART_REPORT_OUT"); path != "" {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func goBuildArch(out, pkg string) error {
	old := os.Getenv("GOARCH")
	os.Setenv("GOARCH", "arm64")
	defer os.Setenv("GOARCH", old)
	return goBuild(out, pkg, "-trimpath", "-ldflags=-s -w", "-tags", "lambda.norpc")
}

// zippedSize is the size of the deployment zip of the bootstrap at path.
func zippedSize(t *testing.T, path string) int64 {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	w, err := z.Create("bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return int64(buf.Len())
}
