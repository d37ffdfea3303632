package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// heapSampler reads, every 500µs until stop, the bytes of the heap's
// spans in use (live objects and the free room of their spans:
// HeapInuse) and the memory the runtime holds from the OS, and keeps the
// largest of each. The runtime's total (heap, stacks, metadata) is what
// a process's resident size follows, as the OS does not take back what
// the runtime keeps between GCs.
type heapSampler struct {
	done      chan struct{}
	wg        sync.WaitGroup
	peakInuse uint64
	peakTotal uint64
	// profile, when set, receives a heap profile (in-use at the last
	// GC) each time the peak grows past the last one written by 16 MiB.
	profile string
}

func sampleHeap(profile string) *heapSampler {
	runtime.GC()
	s := &heapSampler{done: make(chan struct{}), profile: profile}
	ms := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	var written uint64
	s.wg.Go(func() {
		t := time.NewTicker(500 * time.Microsecond)
		defer t.Stop()
		for {
			metrics.Read(ms)
			inuse := ms[0].Value.Uint64() + ms[1].Value.Uint64()
			total := ms[2].Value.Uint64() - ms[3].Value.Uint64()
			s.peakInuse = max(s.peakInuse, inuse)
			s.peakTotal = max(s.peakTotal, total)
			if s.profile != "" && inuse > written+16<<20 {
				written = inuse
				if f, err := os.Create(s.profile); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					_ = f.Close()
				}
			}
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	})
	return s
}

func (s *heapSampler) stop() (inuse, total uint64) {
	close(s.done)
	s.wg.Wait()
	return s.peakInuse, s.peakTotal
}

// clientTools runs the steps' tools through a toolclient.Client, as the
// runner does (the dev server: to the tool server in the same process).
type clientTools struct{ c *toolclient.Client }

func (t clientTools) Run(ctx context.Context, id string, input map[string]any) (map[string]any, error) {
	r, err := t.c.RunToolAs(ctx, id, input, toolclient.Identity{})
	return r.Result, err
}

// forEachOfLarge is the workflow of the memory finding: gen returns
// [0..79]; fe, a forEach over it (16 at once), returns a string of size
// bytes per element (80 × 100 KB: 8 MB of results, under MaxValueBytes);
// fe2, a forEach over fe's results (16 at once), reads all of them in
// every element's input ({"x": "{{fe.results}}"}) and returns its length.
func forEachOfLarge(userID string, size int) workflow.Workflow {
	code := func(src string, input any) map[string]any {
		m := map[string]any{"language": "javascript", "source": src}
		if input != nil {
			m["input"] = input
		}
		return m
	}
	sixteen := 16
	return workflow.Workflow{ID: uuid.NewString(), UserID: userID, Name: "memory", Version: 1, Steps: []workflow.Step{
		{ID: "gen", ToolID: "code", Inputs: code("var a=[];for(var i=0;i<80;i++)a.push(i);return a", nil)},
		{ID: "fe", ToolID: "code", ForEach: "{{gen.result}}", Concurrency: &sixteen, Inputs: code(fmt.Sprintf("return 'z'.repeat(%d)", size), nil)},
		{ID: "fe2", ToolID: "code", ForEach: "{{fe.results}}", Concurrency: &sixteen, Inputs: code("return input.x.length", map[string]any{"x": "{{fe.results}}"})},
	}}
}

// BenchmarkRunMemory runs forEachOfLarge as durable runs (one, and two
// users' at once) on the embedded store with a blob store on disk, and
// reports the peak of the heap in use (peak-heap-MB) and of the memory
// the runtime holds (peak-sys-MB, about what a process's resident size
// reaches), above what the process held before, against the same
// workflow with 1 KB values (floor-heap-MB, heap-x-floor). Two shapes:
// engine runs the code tool in process, as the engine's own tests do;
// toolserver calls it through a toolclient.Client with blobs and a tool
// server in the same process, as the dev server does (in AWS the tool
// server is another function: the runner holds the client's half).
// MEMPROFILE=path writes a heap profile near the peak.
func BenchmarkRunMemory(b *testing.B) {
	for _, shape := range []string{"runner", "engine", "toolserver"} {
		for _, users := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/users=%d", shape, users), func(b *testing.B) {
				f := newMemoryFixture(b, shape)
				var peak, sys, floor uint64
				for b.Loop() {
					fl, _ := f.measure(b, users, 1000, "")
					p, s := f.measure(b, users, 100_000, os.Getenv("MEMPROFILE"))
					floor, peak, sys = max(floor, fl), max(peak, p), max(sys, s)
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
				b.ReportMetric(float64(sys)/(1<<20), "peak-sys-MB")
				b.ReportMetric(float64(floor)/(1<<20), "floor-heap-MB")
				b.ReportMetric(float64(peak)/float64(floor), "heap-x-floor")
			})
		}
	}
}

// remoteTools serves the tool server's protocol for the runner shape of
// BenchmarkRunMemory: the tool server is another process there (its own
// function in AWS), so its copies of an input are not this process's.
// An input by reference is read only for its size (the code tool's
// answer for fe2, whose input x is the array fe returned, is its length);
// other calls go to reg.
func remoteTools(b *testing.B, reg *tools.Registry, blobs blob.Backend) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Params toolclient.RunParams `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var res map[string]any
		if req.Params.InputRef != "" {
			info, err := blobs.Stat(r.Context(), req.Params.InputRef)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			res = map[string]any{"result": 80.0, "bytes": float64(info.Size)}
		} else {
			var err error
			if res, err = reg.Run(r.Context(), req.Params.ToolID, req.Params.Input); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": toolclient.RunResult{Result: res}})
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

type memoryFixture struct {
	runs   *store.Runs
	runner *runs.Runner
	chatID string
}

func newMemoryFixture(b *testing.B, shape string) *memoryFixture {
	db, _, jobs, reg, chatID, _ := benchDurable(b)
	blobs, err := blob.NewFolder(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	rs := store.NewRuns(db.DB, db.Data()).WithBlobs(blobs)
	var steps runs.ToolRunner = reg
	switch shape {
	case "toolserver":
		srv := httptest.NewServer(toolserver.Routes(reg, "k", toolserver.WithBlobs(blobs)))
		b.Cleanup(srv.Close)
		steps = clientTools{toolclient.NewClient(srv.URL, "k", nil).WithBlobs(blobs)}
	case "runner":
		steps = clientTools{toolclient.NewClient(remoteTools(b, reg, blobs), "k", nil).WithBlobs(blobs)}
	}
	o := runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: steps, Values: blobs, ComputeOnly: reg.ComputeOnly}
	return &memoryFixture{runs: rs, runner: runs.NewRunner(o), chatID: chatID}
}

// measure runs users runs of forEachOfLarge(size) at once, each its own
// user's, and returns the peaks above the heap in use before.
func (f *memoryFixture) measure(b *testing.B, users, size int, profile string) (inuse, total uint64) {
	ctx := context.Background()
	var ids []string
	for range users {
		userID := uuid.NewString()
		run := runs.NewRun(forEachOfLarge(userID, size), f.chatID, userID, time.Now())
		if err := f.runs.CreateRun(ctx, run, job.Lease{Until: time.Now().Add(time.Hour)}); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	// Twice: what a finalizer kept through the first goes with the
	// second; and what the runtime holds free goes back to the OS.
	runtime.GC()
	debug.FreeOSMemory()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	s := sampleHeap(profile)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if err := f.runner.Run(ctx, workflow.RunRef{RunID: id, Attempt: 1}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	inuse, total = s.stop()
	for _, id := range ids {
		got, err := f.runs.Run(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if got.Status != workflow.RunCompleted {
			b.Fatalf("run %s: %s %q", id, got.Status, got.Error)
		}
	}
	return inuse - min(inuse, before.HeapInuse), total - min(total, before.Sys-before.HeapReleased)
}
