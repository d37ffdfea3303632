package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// maxErrorSamples is how many error messages are kept per route.
const maxErrorSamples = 5

// Recorder collects the outcome of every request, per route. It is safe for
// concurrent use by the virtual users.
type Recorder struct {
	mu     sync.Mutex
	routes map[string]*routeStats
}

type routeStats struct {
	durations []time.Duration
	errors    int
	samples   []string
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{routes: map[string]*routeStats{}} }

// Record adds one request of route that took d; err non-nil marks it
// incorrect (wrong status, malformed body, broken stream, transport error).
func (r *Recorder) Record(route string, d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.routes[route]
	if s == nil {
		s = &routeStats{}
		r.routes[route] = s
	}
	s.durations = append(s.durations, d)
	if err != nil {
		s.errors++
		if len(s.samples) < maxErrorSamples {
			s.samples = append(s.samples, err.Error())
		}
	}
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 1) of
// sorted, an ascending slice: the smallest value with at least p of the
// values at or below it. With fewer than 1/(1-p) values the high
// percentiles are the maximum.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// The epsilon keeps 0.99*100 = 98.99999... from ranking 99 as 100.
	i := int(math.Ceil(p*float64(n)-1e-9)) - 1
	return sorted[max(0, min(n-1, i))]
}

// RouteResult is one row of the report.
type RouteResult struct {
	Route      string   `json:"route"`
	Count      int      `json:"count"`
	Errors     int      `json:"errors"`
	Throughput float64  `json:"throughputPerSec"`
	P50        Millis   `json:"p50Ms"`
	P99        Millis   `json:"p99Ms"`
	P999       Millis   `json:"p999Ms"`
	FloorRatio float64  `json:"p50xFloor,omitempty"`
	Samples    []string `json:"errorSamples,omitempty"`
}

// Millis is a duration that encodes as fractional milliseconds in JSON.
type Millis time.Duration

// MarshalJSON encodes m as milliseconds with microsecond precision.
func (m Millis) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", float64(m)/float64(time.Millisecond))), nil
}

func (m Millis) String() string {
	return fmt.Sprintf("%.2f", float64(m)/float64(time.Millisecond))
}

// Report is the outcome of one run.
type Report struct {
	Started     time.Time     `json:"started"`
	Duration    Millis        `json:"durationMs"`
	Concurrency int           `json:"concurrency"`
	Floor       string        `json:"floorRoute"`
	Workflows   bool          `json:"workflows"`
	Routes      []RouteResult `json:"routes"`
	Total       RouteResult   `json:"total"`
	Memory      *MemoryReport `json:"memory,omitempty"`
	Notes       []string      `json:"notes,omitempty"`
}

// Errors is the number of incorrect responses over all routes.
func (r Report) Errors() int { return r.Total.Errors }

// Report summarises what was recorded over elapsed. Routes appear in the
// order of order (routes never recorded are left out), then any others by
// name. Each p50 is also given as a ratio to floor's p50.
func (r *Recorder) Report(elapsed time.Duration, floor string, order []string) Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.routes))
	for name := range r.routes {
		names = append(names, name)
	}
	rank := func(name string) int {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
		return len(order)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := rank(names[i]), rank(names[j])
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	secs := elapsed.Seconds()
	rep := Report{Duration: Millis(elapsed), Floor: floor}
	var all []time.Duration
	var floorP50 time.Duration
	if s := r.routes[floor]; s != nil && len(s.durations) > 0 {
		floorP50 = Percentile(sortedCopy(s.durations), 0.5)
	}
	for _, name := range names {
		s := r.routes[name]
		d := sortedCopy(s.durations)
		all = append(all, d...)
		row := summarize(name, d, s.errors, secs)
		row.Samples = slices.Clone(s.samples)
		if floorP50 > 0 {
			row.FloorRatio = float64(row.P50) / float64(floorP50)
		}
		rep.Routes = append(rep.Routes, row)
		rep.Total.Errors += s.errors
	}
	slices.Sort(all)
	errors := rep.Total.Errors
	rep.Total = summarize("all", all, errors, secs)
	return rep
}

func summarize(name string, sorted []time.Duration, errors int, secs float64) RouteResult {
	row := RouteResult{
		Route: name, Count: len(sorted), Errors: errors,
		P50: Millis(Percentile(sorted, 0.50)), P99: Millis(Percentile(sorted, 0.99)), P999: Millis(Percentile(sorted, 0.999)),
	}
	if secs > 0 {
		row.Throughput = float64(len(sorted)) / secs
	}
	return row
}

func sortedCopy(d []time.Duration) []time.Duration {
	c := slices.Clone(d)
	slices.Sort(c)
	return c
}

// WriteMarkdown writes the report as a markdown fragment: a summary line,
// the per-route table, the memory figures if any, and error samples.
func (rep Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	wf := "without workflows"
	if rep.Workflows {
		wf = "with workflows"
	}
	fmt.Fprintf(&b, "%d virtual users for %.1f s (%s); %d requests, %.1f req/s, %d incorrect responses. Floor: `%s`.\n\n",
		rep.Concurrency, time.Duration(rep.Duration).Seconds(), wf, rep.Total.Count, rep.Total.Throughput, rep.Total.Errors, rep.Floor)
	b.WriteString("| route | count | errors | req/s | p50 ms | p99 ms | p999 ms | p50 x floor |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range append(slices.Clone(rep.Routes), rep.Total) {
		ratio := "-"
		if r.FloorRatio > 0 {
			ratio = fmt.Sprintf("%.1f", r.FloorRatio)
		}
		name := "`" + r.Route + "`"
		if r.Route == "all" {
			name = "**all**"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %s | %s | %s | %s |\n", name, r.Count, r.Errors, r.Throughput, r.P50, r.P99, r.P999, ratio)
	}
	if m := rep.Memory; m != nil {
		fmt.Fprintf(&b, "\n%s\n", m.Summary())
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	for _, r := range rep.Routes {
		for _, s := range r.Samples {
			fmt.Fprintf(&b, "\n- error on `%s`: %s", r.Route, s)
		}
	}
	if rep.Total.Errors > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as indented JSON.
func (rep Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
