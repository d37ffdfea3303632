package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseInitTrace(t *testing.T) {
	t.Parallel()
	trace := []byte("init internal/bytealg @0.008 ms, 0 ms clock, 0 bytes, 0 allocs\n" +
		"init net/http @1.2 ms, 0.35 ms clock, 1234 bytes, 12 allocs\n" +
		"some other line\n" +
		"init github.com/x/y @2.0 ms, 0.05 ms clock, 10 bytes, 1 allocs\n")
	total, top := parseInitTrace(trace)
	if total != 400*time.Microsecond || top != "net/http (0.35 ms)" {
		t.Errorf("got %v %q", total, top)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	rs := parse([]byte("goos: linux\nBenchmarkX/y-2  1000  1234 ns/op  3.00 ddbcalls/op  456 B/op  7 allocs/op\nPASS\n"))
	if len(rs) != 1 || rs[0].name != "BenchmarkX/y" || rs[0].nsPerOp != 1234 || rs[0].metrics["ddbcalls/op"] != "3.00" {
		t.Errorf("got %+v", rs)
	}
}

// TestSections: every section has a title of its own and something to run.
func TestSections(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, s := range sections {
		if s.title == "" || s.run == nil || seen[s.title] || strings.Contains(s.title, "\n") {
			t.Errorf("section %q: empty, duplicate or without run", s.title)
		}
		// The title is written in its markers: it must read back as itself.
		if kind, title, ok := parseMarker(beginMarker(s.title)); !ok || kind != "begin" || title != s.title {
			t.Errorf("section %q: its marker reads back as %q %q %v", s.title, kind, title, ok)
		}
		seen[s.title] = true
		for _, n := range s.notes {
			if n.date == "" || n.command == "" || n.text == "" {
				t.Errorf("section %q: a hand note without its date, command or text: %+v", s.title, n)
			}
		}
	}
}
