package lambdart_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReport measures, per function, the linux/arm64 bootstrap (the
// deployed size) and its zip, and the first invocation under the
// emulator: from the emulator listening to the first response, which
// includes the bootstrap's start and init (the emulator starts it on the
// first event), median of 5 runs, against health in the same run. It
// needs LAMBDART_REPORT=1 (it builds every function twice) and prints the
// table for docs/benchmarks.md.
func TestReport(t *testing.T) {
	if os.Getenv("LAMBDART_REPORT") == "" {
		t.Skip("set LAMBDART_REPORT=1 to measure the bootstraps")
	}
	b := newBackend(t)
	names := []string{"health", "auth", "models", "tools", "chats", "stream", "workflows", "mcp"}
	// A first event each function answers without storage: a route it does
	// not serve, or one refused before any read.
	first := map[string]func() any{
		"health": func() any { return request("GET", "/api/liveness", "") },
		"mcp":    func() any { return request("POST", "/mcp", `{"method":"listTools","params":{}}`) },
	}
	type row struct {
		name         string
		arm, zipped  int64
		medianMs     float64
		minMs, maxMs float64
	}
	var rows []row
	for _, name := range names {
		arm := filepath.Join(binDir, "arm64", name, "bootstrap")
		if err := goBuildArch(arm, "./functions/"+name); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(arm)
		r := row{name: name, arm: st.Size(), zipped: zippedSize(t, arm)}
		ev := request("GET", "/api/unrouted", "")
		var event any = ev
		if f, ok := first[name]; ok {
			event = f()
		}
		var ms []float64
		for range 5 {
			var extra []string
			if name == "workflows" || name == "stream" {
				extra = append(extra, "RUNNER_FUNCTION=RunnerFunction")
			}
			f := start(t, name, b.env(extra...))
			t0 := time.Now()
			f.invoke(event)
			ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
		}
		slices.Sort(ms)
		r.medianMs, r.minMs, r.maxMs = ms[2], ms[0], ms[4]
		rows = append(rows, r)
	}
	floor := rows[0]
	var out strings.Builder
	fmt.Fprintf(&out, "| function | arm64 size | zipped | x floor (zipped) | first invoke ms, median of 5 (min-max) | x floor |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&out, "| %s | %.1f MiB | %.1f MiB | %.2f | %.1f (%.1f-%.1f) | %.2f |\n", r.name,
			float64(r.arm)/(1<<20), float64(r.zipped)/(1<<20), float64(r.zipped)/float64(floor.zipped),
			r.medianMs, r.minMs, r.maxMs, r.medianMs/floor.medianMs)
	}
	t.Log("\n" + out.String())
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
