package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	seq := func(n int) []time.Duration {
		d := make([]time.Duration, n)
		for i := range d {
			d[i] = time.Duration(i + 1)
		}
		return d
	}
	tests := []struct {
		name string
		d    []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", seq(1), 0.999, 1},
		{"p50 of 100", seq(100), 0.5, 50},
		{"p99 of 100", seq(100), 0.99, 99},
		{"p999 of 100 is the max", seq(100), 0.999, 100},
		{"p999 of 1000", seq(1000), 0.999, 999},
		{"p999 of 2000", seq(2000), 0.999, 1998},
		{"p50 of 3", seq(3), 0.5, 2},
		{"p100", seq(10), 1, 10},
		{"tiny p", seq(10), 0.001, 1},
	}
	for _, tt := range tests {
		if got := Percentile(tt.d, tt.p); got != tt.want {
			t.Errorf("%s: Percentile(p=%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestReport(t *testing.T) {
	t.Parallel()
	r := NewRecorder()
	for i := 1; i <= 100; i++ {
		r.Record("GET /b", time.Duration(i)*time.Millisecond, nil)
		r.Record(floorRoute, time.Duration(i)*time.Millisecond/10, nil)
	}
	for i := range 7 {
		r.Record("GET /a", time.Millisecond, errors.New("boom "+string(rune('0'+i))))
	}
	rep := r.Report(10*time.Second, floorRoute, []string{floorRoute, "GET /b"})
	if len(rep.Routes) != 3 || rep.Routes[0].Route != floorRoute || rep.Routes[1].Route != "GET /b" || rep.Routes[2].Route != "GET /a" {
		t.Fatalf("routes %+v: want floor, listed, then others by name", rep.Routes)
	}
	b := rep.Routes[1]
	if b.Count != 100 || b.Errors != 0 || b.Throughput != 10 || time.Duration(b.P50) != 50*time.Millisecond ||
		time.Duration(b.P99) != 99*time.Millisecond || time.Duration(b.P999) != 100*time.Millisecond {
		t.Errorf("row %+v", b)
	}
	if b.FloorRatio != 10 || rep.Routes[0].FloorRatio != 1 {
		t.Errorf("ratios %v %v, want 10 and 1", b.FloorRatio, rep.Routes[0].FloorRatio)
	}
	a := rep.Routes[2]
	if a.Errors != 7 || len(a.Samples) != maxErrorSamples {
		t.Errorf("errors %d, samples %d", a.Errors, len(a.Samples))
	}
	if rep.Total.Count != 207 || rep.Total.Errors != 7 || rep.Errors() != 7 {
		t.Errorf("total %+v", rep.Total)
	}

	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `GET /b` | 100 | 0 | 10.0 | 50.00 | 99.00 | 100.00 | 10.0 |", "| **all** | 207 | 7 |", "error on `GET /a`: boom 0"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Routes []struct {
			Route string  `json:"route"`
			P50   float64 `json:"p50Ms"`
		} `json:"routes"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Routes) != 3 || back.Routes[1].P50 != 50 {
		t.Errorf("JSON %s: %v", js.String(), err)
	}
}

func TestEvaluateMemory(t *testing.T) {
	t.Parallel()
	const mb = 1 << 20
	s := func(rss ...int64) []MemorySample {
		var out []MemorySample
		for i, r := range rss {
			out = append(out, MemorySample{At: Millis(time.Duration(i) * time.Second), RSS: r * mb})
		}
		return out
	}
	tests := []struct {
		name    string
		samples []MemorySample
		check   bool
		failed  bool
		growth  int64
	}{
		{"flat", s(50, 100, 100, 101, 100), true, false, 0},
		{"warm-up growth is not counted", s(20, 100, 110, 120, 125), true, false, 25},
		{"steady leak", s(50, 100, 120, 140, 160), true, true, 60},
		{"leak not checked outside soak", s(50, 100, 120, 140, 160), false, false, 60},
		{"big heap, proportional limit", s(100, 400, 500, 550, 590), true, false, 190},
	}
	for _, tt := range tests {
		m := evaluateMemory(tt.samples, time.Second, tt.check)
		if m.Failed != tt.failed || m.Growth != tt.growth*mb {
			t.Errorf("%s: failed %v growth %d MiB, want %v %d (%s)", tt.name, m.Failed, m.Growth/mb, tt.failed, tt.growth, m.Summary())
		}
	}
	if m := evaluateMemory(nil, time.Second, true); m.Failed {
		t.Error("no samples failed")
	}
}

func TestParseVmRSS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"Name:\tdevserver\nVmPeak:\t  1 kB\nVmRSS:\t  123456 kB\nThreads: 9\n", 123456 * 1024, true},
		{"Name:\tx\n", 0, false},
		{"VmRSS:\t12 MB\n", 0, false},
	}
	for _, tt := range tests {
		got, err := parseVmRSS([]byte(tt.in))
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("parseVmRSS(%q) = %d, %v", tt.in, got, err)
		}
	}
}

func TestCheckLoopback(t *testing.T) {
	t.Parallel()
	for u, ok := range map[string]bool{
		"http://127.0.0.1:3000": true, "http://localhost:3000": true, "http://[::1]:3000": true,
		"http://10.0.0.1:3000": false, "https://example.com": false, "ftp://127.0.0.1": false, "127.0.0.1:3000": false,
	} {
		if err := checkLoopback(u); (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v", u, err)
		}
	}
}

func TestCheckStatus(t *testing.T) {
	t.Parallel()
	if err := checkStatus(201, nil, 201); err != nil {
		t.Error(err)
	}
	err := checkStatus(400, []byte(`{"error":"Bad Request","message":"no","code":"VALIDATION_FAILED"}`), 201)
	if err == nil || !strings.Contains(err.Error(), "VALIDATION_FAILED") {
		t.Errorf("got %v", err)
	}
	var x struct{ A int }
	for _, body := range []string{`{"data":null}`, `{}`, `not json`, `{"data":{"A":"x"}}`} {
		if err := decodeData(200, []byte(body), 200, &x); err == nil {
			t.Errorf("decodeData(%s) passed", body)
		}
	}
	if err := decodeData(200, []byte(`{"data":{"A":3}}`), 200, &x); err != nil || x.A != 3 {
		t.Errorf("decodeData: %v %+v", err, x)
	}
}

const (
	uid  = "user-1"
	id1  = "0b7c7c8e-3f57-4c2e-9a55-5d7c9d3f0a11"
	id2  = "1b7c7c8e-3f57-4c2e-9a55-5d7c9d3f0a11"
	chat = "2b7c7c8e-3f57-4c2e-9a55-5d7c9d3f0a11"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestCheckSessionAndChat(t *testing.T) {
	t.Parallel()
	good := sessionResponse{User: user{ID: uid, Email: "a@example.com", CreatedAt: t0}}
	good.Session.ExpiresAt = time.Now().Add(time.Hour)
	expired := good
	expired.Session.ExpiresAt = t0
	other := good
	other.User.ID = "user-2"
	tests := []struct {
		name string
		s    sessionResponse
		ok   bool
	}{{"good", good, true}, {"expired", expired, false}, {"other user", other, false}, {"empty", sessionResponse{}, false}}
	for _, tt := range tests {
		if err := checkSession(tt.s, uid, "a@example.com"); (err == nil) != tt.ok {
			t.Errorf("session %s: %v", tt.name, err)
		}
	}

	c := chatResource{ID: chat, UserID: uid, Title: "T", CreatedAt: t0, UpdatedAt: t0}
	bad := []chatResource{{ID: "x", UserID: uid, Title: "T", CreatedAt: t0, UpdatedAt: t0}, {ID: chat, UserID: "u2", Title: "T", CreatedAt: t0, UpdatedAt: t0}, {ID: chat, UserID: uid, Title: "U", CreatedAt: t0, UpdatedAt: t0}, {ID: chat, UserID: uid, Title: "T"}}
	if err := checkChat(c, uid, "T"); err != nil {
		t.Error(err)
	}
	for _, b := range bad {
		if checkChat(b, uid, "T") == nil {
			t.Errorf("chat %+v passed", b)
		}
	}

	n := func(i int) *int { return &i }
	older := chatResource{ID: id1, UserID: uid, UpdatedAt: t0}
	newer := chatResource{ID: id2, UserID: uid, UpdatedAt: t0.Add(time.Second)}
	pages := []struct {
		name string
		p    chatPage
		want []string
		ok   bool
	}{
		{"good", chatPage{Chats: []chatResource{newer, older}, Total: n(2)}, []string{id1, id2}, true},
		{"wrong order", chatPage{Chats: []chatResource{older, newer}, Total: n(2)}, []string{id1, id2}, false},
		{"missing chat", chatPage{Chats: []chatResource{newer}, Total: n(2)}, []string{id1, id2}, false},
		{"wrong total", chatPage{Chats: []chatResource{newer, older}, Total: n(3)}, []string{id1, id2}, false},
		{"no total", chatPage{Chats: []chatResource{newer, older}}, []string{id1, id2}, false},
		{"other user's chat", chatPage{Chats: []chatResource{{ID: id1, UserID: "u2"}}, Total: n(1)}, []string{id1}, false},
	}
	for _, tt := range pages {
		if err := checkChatPage(tt.p, uid, 20, tt.want); (err == nil) != tt.ok {
			t.Errorf("page %s: %v", tt.name, err)
		}
	}
}

func TestCheckExchange(t *testing.T) {
	t.Parallel()
	reply := &message{ID: id2, ChatID: chat, Role: "assistant", Content: "Hi", CreatedAt: t0}
	withTool := *reply
	withTool.ToolCalls = []toolCall{{ToolName: "json_query", Result: json.RawMessage(`{"result":1}`)}}
	wrongResult := *reply
	wrongResult.ToolCalls = []toolCall{{ToolName: "json_query", Result: json.RawMessage(`{"result":2}`)}}
	user := message{ID: id1, ChatID: chat, Role: "user", Content: "hello", CreatedAt: t0}
	toolUser := user
	toolUser.Content = toolPrompt
	tests := []struct {
		name string
		x    exchange
		ok   bool
	}{
		{"good", exchange{user, reply}, true},
		{"no response", exchange{user, nil}, false},
		{"wrong content", exchange{message{ID: id1, ChatID: chat, Role: "user", Content: "other"}, reply}, false},
		{"same ids", exchange{message{ID: id2, ChatID: chat, Role: "user", Content: "hello"}, reply}, false},
		{"empty reply", exchange{user, &message{ID: id2, ChatID: chat, Role: "assistant"}}, false},
		{"unexpected tool call", exchange{user, &withTool}, false},
		{"tool call", exchange{toolUser, &withTool}, true},
		{"tool call missing", exchange{toolUser, reply}, false},
		{"tool result wrong", exchange{toolUser, &wrongResult}, false},
	}
	for _, tt := range tests {
		content := "hello"
		if strings.HasPrefix(tt.name, "tool") {
			content = toolPrompt
		}
		if err := checkExchange(tt.x, chat, content); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestCheckStream(t *testing.T) {
	t.Parallel()
	start := `data: {"type":"start","messageId":"` + id1 + `"}` + "\n\n"
	end := `data: {"type":"end","messageId":"` + id1 + `"}` + "\n\n"
	content := func(s string) string { return `data: {"type":"content","delta":"` + s + `"}` + "\n\n" }
	call := `data: {"type":"tool_call","toolName":"json_query","toolArgs":{"query":".a","input":{"a":1}}}` + "\n\n"
	result := `data: {"type":"tool_result","toolName":"json_query","result":{"result":1}}` + "\n\n"
	tests := []struct {
		name, body, prompt string
		ok                 bool
		content            string
	}{
		{"plain", start + content("Hel") + ": ping\n\n" + content("lo") + end, "hi", true, "Hello"},
		{"tool", start + content("Running.") + call + result + content(" 1") + end, toolPrompt, true, "Running. 1"},
		{"tool expected", start + content("Hi") + end, toolPrompt, false, ""},
		{"no start", content("Hi") + end, "hi", false, ""},
		{"no end", start + content("Hi"), "hi", false, ""},
		{"end id differs", start + content("Hi") + `data: {"type":"end","messageId":"` + id2 + `"}` + "\n\n", "hi", false, ""},
		{"error event", start + `data: {"type":"error","error":"MODEL_UNAVAILABLE","message":"x"}` + "\n\n" + end, "hi", false, ""},
		{"result without call", start + content("x") + result + end, "hi", false, ""},
		{"call without result", start + content("x") + call + end, "hi", false, ""},
		{"no content", start + end, "hi", false, ""},
		{"unknown type", start + `data: {"type":"weird"}` + "\n\n" + end, "hi", false, ""},
	}
	for _, tt := range tests {
		evs, err := readStream(strings.NewReader(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		res, err := checkStream(evs, tt.prompt)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if tt.ok && (res.MessageID != id1 || res.Content != tt.content) {
			t.Errorf("%s: %+v", tt.name, res)
		}
	}
	if _, err := readStream(strings.NewReader("data: not json\n\n")); err == nil {
		t.Error("non-JSON event passed")
	}

	h := http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}, "Cache-Control": {"no-cache, no-store"}}
	if err := checkStreamHeaders(200, h, nil); err != nil {
		t.Error(err)
	}
	if checkStreamHeaders(200, http.Header{"Content-Type": {"application/json"}}, nil) == nil {
		t.Error("JSON content type passed")
	}
}

func TestCheckMessages(t *testing.T) {
	t.Parallel()
	u := message{ID: id1, ChatID: chat, Role: "user", Content: "q", CreatedAt: t0}
	a := message{ID: id2, ChatID: chat, Role: "assistant", Content: "Hello", CreatedAt: t0.Add(time.Millisecond)}
	streamed := &streamResult{MessageID: id2, Content: "Hello"}
	tests := []struct {
		name string
		ms   []message
		n    int
		last *streamResult
		ok   bool
	}{
		{"good", []message{u, a}, 2, streamed, true},
		{"count", []message{u, a}, 4, nil, false},
		{"order of roles", []message{a, u}, 2, nil, false},
		{"other chat", []message{u, {ID: id2, ChatID: id1, Role: "assistant"}}, 2, nil, false},
		{"streamed content differs", []message{u, a}, 2, &streamResult{MessageID: id2, Content: "Hell"}, false},
		{"streamed id differs", []message{u, a}, 2, &streamResult{MessageID: id1, Content: "Hello"}, false},
		{"empty", nil, 0, nil, true},
	}
	for _, tt := range tests {
		if err := checkMessages(tt.ms, chat, tt.n, tt.last); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestCheckToolsAndLiveness(t *testing.T) {
	t.Parallel()
	var ts []tool
	for _, id := range []string{"csv_parse", "datetime_now", "hash", "html_extract", "http_request", "json_query", "llm_generate", "math_evaluate", "regex_extract", "text_template"} {
		ts = append(ts, tool{ID: id, Name: id, Category: "data", InputSchema: json.RawMessage(`{}`)})
	}
	if err := checkTools(ts); err != nil {
		t.Error(err)
	}
	if checkTools(ts[1:]) == nil {
		t.Error("missing tool passed")
	}
	if checkTools(append([]tool{ts[1]}, ts...)) == nil {
		t.Error("unordered tools passed")
	}
	if err := checkLiveness(200, []byte(`{"status":"ok","timestamp":"2025-01-01T00:00:00Z"}`)); err != nil {
		t.Error(err)
	}
	if checkLiveness(200, []byte(`{"status":"down"}`)) == nil || checkLiveness(500, nil) == nil {
		t.Error("bad liveness passed")
	}
}

// TestSmoke builds and starts the dev server, runs the mix for 2 s with two
// users, and requires every response to be correct and every route of the
// mix to be reached.
func TestSmoke(t *testing.T) {
	rep, err := run(config{Spawn: true, Concurrency: 2, Duration: 2 * time.Second, RSSInterval: 500 * time.Millisecond, Log: t.Logf})
	if rep != nil {
		var md bytes.Buffer
		_ = rep.WriteMarkdown(&md)
		t.Logf("report:\n%s", md.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Errors != 0 || rep.Total.Count == 0 {
		t.Fatalf("total %+v", rep.Total)
	}
	if missing := missingRoutes(*rep, false); len(missing) > 0 {
		t.Errorf("routes not exercised: %v", missing)
	}
	if rep.Memory == nil || len(rep.Memory.Samples) < 2 || rep.Memory.Peak <= 0 {
		t.Errorf("memory %+v", rep.Memory)
	}
}
