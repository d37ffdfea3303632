package measure

import (
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/workflowchat/service/infra/cost/costmodel"
)

// LogicalIDs maps each function's folder under functions/ to its logical
// id in template.yaml.
var LogicalIDs = map[string]string{
	"auth": "AuthFunction", "chats": "ChatsFunction", "health": "HealthFunction", "mcp": "McpFunction",
	"mcpgateway": "McpGatewayFunction", "models": "ModelsFunction", "oauth": "OAuthFunction", "runner": "RunnerFunction",
	"stream": "StreamFunction", "sweeper": "SweeperFunction", "tools": "ToolsFunction", "triggerfire": "TriggerFireFunction",
	"triggers": "TriggersFunction", "workflows": "WorkflowsFunction", "mcpservers": "McpServersFunction", "knowledge": "KnowledgeFunction",
	"knowledgeindex": "KnowledgeIndexFunction",
}

// FunctionURLs are the functions a client reaches through their own
// function URL (behind CloudFront), not through the HTTP API.
var FunctionURLs = map[string]bool{"stream": true, "mcpgateway": true}

// httpAPIIncrement is the size by which API Gateway meters an HTTP API
// request: one request per 512 KB.
const httpAPIIncrement = 512 << 10

// Emulated is what a run of the workload under the emulator measured
// (infra/lambdart's TestCostWorkload writes it as JSON): per kind of unit,
// one unit's usage on average (its DynamoDB part is measured in process,
// MeasureCapacity), and each function's peak memory.
type Emulated struct {
	// Measured says when and on what machine.
	Measured string
	// Units are keyed by kind (KindShort...).
	Units map[string]UnitUsage
	// Peaks are by logical id.
	Peaks []costmodel.FunctionPeak
}

// UnitUsage is one unit's usage, averaged over Samples units.
type UnitUsage struct {
	Samples int
	Usage   costmodel.Usage
}

// Tally sums what a host sees the workload use, per kind of unit: each
// function's invocations and their billed durations, the client's
// requests through CloudFront and the HTTP API with their bytes, S3
// requests and log bytes. It is the Recorder of the run: what happens
// between units (or in KindSetup, KindWarmUp, KindCoverage) is not
// priced. Its methods are safe for concurrent use.
type Tally struct {
	mu    sync.Mutex
	kind  string
	sums  map[string]*costmodel.Usage
	units map[string]int
	peaks map[string]*costmodel.FunctionPeak
}

// NewTally returns an empty Tally.
func NewTally() *Tally {
	return &Tally{sums: map[string]*costmodel.Usage{}, units: map[string]int{}, peaks: map[string]*costmodel.FunctionPeak{}}
}

// Begin starts a unit of kind.
func (t *Tally) Begin(kind string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kind = kind
	if t.sums[kind] == nil {
		t.sums[kind] = &costmodel.Usage{}
	}
}

// End ends the unit of kind.
func (t *Tally) End(kind string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.units[kind]++
	t.kind = ""
}

// current is the usage of the unit in progress (nil between units);
// callers hold t.mu.
func (t *Tally) current() *costmodel.Usage { return t.sums[t.kind] }

// Invocation counts an invocation of function fn (a folder) that took d,
// billed rounded up to the millisecond.
func (t *Tally) Invocation(fn string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := LogicalIDs[fn]
	p := t.peaks[id]
	if p == nil {
		p = &costmodel.FunctionPeak{Function: id}
		t.peaks[id] = p
	}
	p.Invocations++
	u := t.current()
	if u == nil {
		return
	}
	i := slices.IndexFunc(u.Lambda, func(inv costmodel.Invocations) bool { return inv.Function == id })
	if i < 0 {
		u.Lambda = append(u.Lambda, costmodel.Invocations{Function: id})
		i = len(u.Lambda) - 1
	}
	u.Lambda[i].Count++
	u.Lambda[i].Seconds += math.Ceil(float64(d)/float64(time.Millisecond)) / 1000
}

// ClientRequest counts a client's request to function fn (a folder) of
// reqBytes, answered with respBytes (RequestBytes, ResponseBytes): a
// CloudFront request, and an HTTP API one unless fn has its own URL.
func (t *Tally) ClientRequest(fn string, reqBytes, respBytes int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.current()
	if u == nil {
		return
	}
	u.CloudFront.Requests++
	u.CloudFront.BytesIn += float64(reqBytes)
	u.CloudFront.BytesOut += float64(respBytes)
	if !FunctionURLs[fn] {
		u.HTTPAPI.Count += math.Max(1, math.Ceil(float64(reqBytes+respBytes)/httpAPIIncrement))
		u.HTTPAPI.Bytes += float64(reqBytes + respBytes)
	}
}

// S3Request counts a request to S3 by its HTTP method: GET and HEAD of an
// object are GET-class, the others (PUT, POST, COPY, a bucket's LIST)
// PUT-class, DELETE free.
func (t *Tally) S3Request(method string, list bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.current()
	if u == nil {
		return
	}
	switch {
	case method == http.MethodDelete:
	case (method == http.MethodGet || method == http.MethodHead) && !list:
		u.S3.Gets++
	default:
		u.S3.Puts++
	}
}

// Kind is the kind of the unit in progress ("" between units).
func (t *Tally) Kind() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.kind
}

// LogBytes counts n bytes of log lines written during a unit of kind
// (nothing for "").
func (t *Tally) LogBytes(kind string, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if u := t.sums[kind]; u != nil && kind != "" {
		u.LogBytes += float64(n)
	}
}

// Peak records function fn's (a folder's) peak memory in MiB.
func (t *Tally) Peak(fn string, mib float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := LogicalIDs[fn]
	p := t.peaks[id]
	if p == nil {
		p = &costmodel.FunctionPeak{Function: id}
		t.peaks[id] = p
	}
	p.PeakMiB = math.Max(p.PeakMiB, mib)
}

// Result is the tally so far: per kind of unit one unit's usage on
// average, and the peaks.
func (t *Tally) Result(measured string) Emulated {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := Emulated{Measured: measured, Units: map[string]UnitUsage{}}
	for kind, s := range t.sums {
		n := t.units[kind]
		if n == 0 {
			continue
		}
		f := 1 / float64(n)
		u := costmodel.Usage{HTTPAPI: costmodel.Requests{Count: s.HTTPAPI.Count * f, Bytes: s.HTTPAPI.Bytes * f},
			CloudFront: costmodel.Edge{Requests: s.CloudFront.Requests * f, BytesIn: s.CloudFront.BytesIn * f, BytesOut: s.CloudFront.BytesOut * f},
			S3:         costmodel.S3{Puts: s.S3.Puts * f, Gets: s.S3.Gets * f}, LogBytes: s.LogBytes * f}
		for _, inv := range s.Lambda {
			u.Lambda = append(u.Lambda, costmodel.Invocations{Function: inv.Function, Count: inv.Count * f, Seconds: inv.Seconds * f})
		}
		slices.SortFunc(u.Lambda, func(a, b costmodel.Invocations) int { return strings.Compare(a.Function, b.Function) })
		out.Units[kind] = UnitUsage{Samples: n, Usage: u}
	}
	for _, p := range t.peaks {
		out.Peaks = append(out.Peaks, *p)
	}
	slices.SortFunc(out.Peaks, func(a, b costmodel.FunctionPeak) int { return strings.Compare(a.Function, b.Function) })
	return out
}

// RequestBytes is the size of r on the wire (HTTP/1.1): its request line,
// headers and body.
func RequestBytes(r *http.Request, body []byte) int {
	n := len(r.Method) + 1 + len(r.URL.RequestURI()) + len(" HTTP/1.1\r\n") + len("Host: \r\n") + len(r.Host)
	return n + headerBytes(r.Header) + 2 + len(body)
}

// ResponseBytes is the size of resp on the wire (HTTP/1.1): its status
// line, headers and body.
func ResponseBytes(resp *Response) int {
	return len("HTTP/1.1 200 OK\r\n") + headerBytes(resp.Header) + 2 + len(resp.Body)
}

func headerBytes(h http.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}
