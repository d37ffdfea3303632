package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKnowledgeBenchmark measures, on the dev server binary, what
// docs/benchmarks.md reports of knowledge bases: the indexing throughput
// of a 10,000-chunk document, the query p50 on that knowledge base
// against a floor measured in the same run (GET of the knowledge base:
// the session check and one read), and the server's peak memory while it
// indexes a 25 MiB document. Figures, not assertions: it runs with
// KNOWLEDGE_BENCH=1 and logs them.
func TestKnowledgeBenchmark(t *testing.T) {
	if os.Getenv("KNOWLEDGE_BENCH") == "" {
		t.Skip("KNOWLEDGE_BENCH=1 runs the knowledge base measurements")
	}
	srv := startServer(t, "ALLOWED_ORIGINS="+frontendOrigin)
	c := newClient(t, srv.API)
	signUpChatUser(t, c, "bench-knowledge@example.com")
	chat := newChat(t, c, map[string]any{"title": "bench"})
	kb := newKnowledgeBase(t, c, "bench")

	// 10,000 chunks: a chunk starts every 160 words.
	var doc strings.Builder
	words := 0
	for i := 0; words < 160*10000; i++ {
		line := fmt.Sprintf("Record %d covers topic%d in region%d with product%d and a note about item%d.\n", i, i%1009, i%37, i%211, i%4999)
		words += len(strings.Fields(line))
		doc.WriteString(line)
	}
	a := readyAttachment(t, c, chat.ID, "records.txt", "text/plain", []byte(doc.String()))
	began := time.Now()
	d := addDocument(t, c, kb.ID, a.ID)
	got := indexed(t, c, kb.ID, d.ID)
	took := time.Since(began)
	if got.Status != "ready" || got.ChunkCount == nil {
		t.Fatalf("indexing: %+v", got)
	}
	t.Logf("indexing: %d chunks (%.1f MiB) in %s: %.0f chunks/s", *got.ChunkCount, float64(doc.Len())/(1<<20), took.Round(time.Millisecond), float64(*got.ChunkCount)/took.Seconds())

	const n = 200
	query, floor := make([]time.Duration, n), make([]time.Duration, n)
	queryKnowledge(t, c, kb.ID, map[string]any{"query": "warm up"})
	for i := range n {
		start := time.Now()
		if r := c.do("GET", "/api/knowledge-bases/"+kb.ID, nil); r.Status != 200 {
			t.Fatalf("get: %d", r.Status)
		}
		floor[i] = time.Since(start)
		start = time.Now()
		res := queryKnowledge(t, c, kb.ID, map[string]any{"query": fmt.Sprintf("which records cover topic%d in region%d?", i*7%1009, i%37)})
		query[i] = time.Since(start)
		if len(res) == 0 {
			t.Fatal("no results")
		}
	}
	slices.Sort(query)
	slices.Sort(floor)
	t.Logf("query p50 %s (p90 %s) on %d chunks; floor (GET of the knowledge base) p50 %s; ratio %.1f",
		query[n/2].Round(10*time.Microsecond), query[n*9/10].Round(10*time.Microsecond), *got.ChunkCount, floor[n/2].Round(10*time.Microsecond),
		float64(query[n/2])/float64(floor[n/2]))

	// Peak memory for a 25 MiB document, on a fresh server with
	// DATA_FILE (blobs and vectors in files, as they are in S3 and S3
	// Vectors in AWS, not in the process).
	srv2 := startServer(t, "ALLOWED_ORIGINS="+frontendOrigin, "DATA_FILE="+filepath.Join(t.TempDir(), "bench.json"))
	c2 := newClient(t, srv2.API)
	signUpChatUser(t, c2, "bench-knowledge-mem@example.com")
	chat2 := newChat(t, c2, map[string]any{"title": "mem"})
	kb2 := newKnowledgeBase(t, c2, "mem")
	var big strings.Builder
	for i := 0; big.Len() < 25<<20-200; i++ {
		fmt.Fprintf(&big, "Entry %d of the archive concerns case%d and party%d.\n", i, i%7919, i%101)
	}
	a2 := readyAttachment(t, c2, chat2.ID, "archive.txt", "text/plain", []byte(big.String()))
	before := peakRSS(t, srv2.cmd.Process.Pid)
	began = time.Now()
	d2 := addDocument(t, c2, kb2.ID, a2.ID)
	got2 := indexed(t, c2, kb2.ID, d2.ID)
	took = time.Since(began)
	after := peakRSS(t, srv2.cmd.Process.Pid)
	t.Logf("25 MiB document: %s with %v chunks in %s (%.0f chunks/s); dev server peak RSS %d MiB before, %d MiB after",
		got2.Status, *got2.ChunkCount, took.Round(time.Millisecond), float64(*got2.ChunkCount)/took.Seconds(), before>>10, after>>10)
}

// peakRSS reads a process's peak resident set (VmHWM, KiB).
func peakRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
