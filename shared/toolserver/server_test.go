package toolserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

const testKey = "test-service-key-0123456789abcdef"

// fixedNow pins datetime_now so tool output is deterministic.
// builtinCount is the number of built-in tools a server lists.
var builtinCount = len(tools.Builtin(tools.Config{}))

func fixedNow() time.Time { return time.Date(2026, 3, 12, 19, 3, 58, 0, time.UTC) }

// builtinRegistry is the ten built-in tools.
func builtinRegistry(t testing.TB) *tools.Registry {
	t.Helper()
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{Now: fixedNow})...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// slowTool never finishes on its own: it waits for its deadline.
func slowTool() *tools.Tool {
	return &tools.Tool{
		ID: "slow_tool", Name: "Slow tool", Description: "Waits until its deadline; for timeout tests.", Category: tools.CategoryUtil,
		InputSchema:  json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Timeout:      30 * time.Millisecond,
		Run: func(ctx context.Context, _ map[string]any) (map[string]any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}
}

// newServer serves Routes(reg, key) in the standard middleware over real HTTP.
func newServer(t testing.TB, reg *tools.Registry, key string) *httptest.Server {
	t.Helper()
	h := httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// post sends body to srv's /mcp with the given headers (Content-Type
// application/json unless set) and returns the status, headers and body.
func post(t testing.TB, srv *httptest.Server, headers map[string]string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+toolserver.Path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

var withKey = map[string]string{toolserver.ServiceKeyHeader: testKey}

// unsized hides a reader's length, so the request is sent chunked, without
// Content-Length.
type unsized struct{ io.Reader }

// errorBody is the standard error body, decoded strictly.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Code    string `json:"code"`
	Details []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"details"`
}

func decodeStrict(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	reg, err := tools.NewRegistry(append(tools.Builtin(tools.Config{Now: fixedNow}), slowTool())...)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, reg, testKey)
	noKeySrv := newServer(t, reg, "")
	big := `{"method":"listTools","params":{"pad":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}}`

	tests := []struct {
		name    string
		srv     *httptest.Server
		headers map[string]string
		body    io.Reader
		status  int
		code    string
		field   string // a details entry must name this field
		message string // the message must contain this
	}{
		{"missing key", srv, nil, strings.NewReader(`{"method":"listTools","params":{}}`), 401, "UNAUTHORIZED", "", "service key"},
		{"wrong key", srv, map[string]string{"X-Service-Key": "wrong-key-0123456789abcdef"}, strings.NewReader(`{"method":"listTools","params":{}}`), 401, "UNAUTHORIZED", "", ""},
		{"wrong key of the right length", srv, map[string]string{"X-Service-Key": strings.Repeat("x", len(testKey))}, strings.NewReader(`{"method":"listTools","params":{}}`), 401, "UNAUTHORIZED", "", ""},
		{"key prefix", srv, map[string]string{"X-Service-Key": testKey[:len(testKey)-1]}, strings.NewReader(`{"method":"listTools","params":{}}`), 401, "UNAUTHORIZED", "", ""},
		{"empty key header", srv, map[string]string{"X-Service-Key": ""}, strings.NewReader(`{"method":"listTools","params":{}}`), 401, "UNAUTHORIZED", "", ""},
		{"bearer wrong", srv, map[string]string{"Authorization": "Bearer wrong-key-0123456789abcdef"}, strings.NewReader(`{"method":"listTools","params":{}}`), 401, "UNAUTHORIZED", "", ""},
		{"basic scheme", srv, map[string]string{"Authorization": "Basic " + testKey}, strings.NewReader(`{"method":"listTools","params":{}}`), 401, "UNAUTHORIZED", "", ""},
		{"wrong X-Service-Key wins over right bearer", srv, map[string]string{"X-Service-Key": "wrong-key-0123456789abcdef", "Authorization": "Bearer " + testKey}, strings.NewReader(`{"method":"listTools","params":{}}`), 401, "UNAUTHORIZED", "", ""},
		{"unauthorized before body checks", srv, nil, strings.NewReader(`{not json`), 401, "UNAUTHORIZED", "", ""},
		{"unauthorized JSON-RPC", srv, map[string]string{"Accept": "application/json, text/event-stream"}, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), 401, "UNAUTHORIZED", "", ""},
		{"no configured key refuses an empty key", noKeySrv, map[string]string{"X-Service-Key": ""}, strings.NewReader(`{"method":"listTools","params":{}}`), 401, "UNAUTHORIZED", "", ""},
		{"no configured key refuses any key", noKeySrv, map[string]string{"X-Service-Key": testKey}, strings.NewReader(`{"method":"listTools","params":{}}`), 401, "UNAUTHORIZED", "", ""},
		{"no configured key refuses a bearer", noKeySrv, map[string]string{"Authorization": "Bearer "}, strings.NewReader(`{"method":"listTools","params":{}}`), 401, "UNAUTHORIZED", "", ""},

		{"malformed JSON", srv, withKey, strings.NewReader(`{"method":`), 400, "INVALID_JSON", "", ""},
		{"empty body", srv, withKey, strings.NewReader(``), 400, "INVALID_JSON", "", ""},
		{"trailing data", srv, withKey, strings.NewReader(`{"method":"listTools","params":{}} {}`), 400, "INVALID_JSON", "", ""},
		{"malformed array", srv, withKey, strings.NewReader(`[{"jsonrpc":"2.0"`), 400, "INVALID_JSON", "", ""},
		{"malformed scalar", srv, withKey, strings.NewReader(`nul`), 400, "INVALID_JSON", "", ""},
		{"not an object: array", srv, withKey, strings.NewReader(`[1,2]`), 400, "INVALID_REQUEST", "", ""},
		{"not an object: empty array", srv, withKey, strings.NewReader(`[]`), 400, "INVALID_REQUEST", "", ""},
		{"not an object: string", srv, withKey, strings.NewReader(`"listTools"`), 400, "INVALID_REQUEST", "", ""},
		{"not an object: null", srv, withKey, strings.NewReader(`null`), 400, "INVALID_REQUEST", "", ""},
		{"missing method", srv, withKey, strings.NewReader(`{"params":{}}`), 400, "INVALID_REQUEST", "method", ""},
		{"method not a string", srv, withKey, strings.NewReader(`{"method":1,"params":{}}`), 400, "INVALID_REQUEST", "method", ""},
		{"empty method", srv, withKey, strings.NewReader(`{"method":"","params":{}}`), 400, "INVALID_REQUEST", "method", ""},
		{"missing params", srv, withKey, strings.NewReader(`{"method":"listTools"}`), 400, "INVALID_REQUEST", "params", ""},
		{"null params", srv, withKey, strings.NewReader(`{"method":"listTools","params":null}`), 400, "INVALID_REQUEST", "params", ""},
		{"params not an object", srv, withKey, strings.NewReader(`{"method":"listTools","params":[]}`), 400, "INVALID_REQUEST", "params", ""},
		{"params a string", srv, withKey, strings.NewReader(`{"method":"getTool","params":"hash"}`), 400, "INVALID_REQUEST", "params", ""},

		{"unknown method", srv, withKey, strings.NewReader(`{"method":"deleteTool","params":{}}`), 400, "METHOD_NOT_FOUND", "", "deleteTool"},
		{"method names are case-sensitive", srv, withKey, strings.NewReader(`{"method":"ListTools","params":{}}`), 400, "METHOD_NOT_FOUND", "", ""},
		{"JSON-RPC method name without jsonrpc", srv, withKey, strings.NewReader(`{"method":"tools/list","params":{}}`), 400, "METHOD_NOT_FOUND", "", ""},

		{"getTool missing toolId", srv, withKey, strings.NewReader(`{"method":"getTool","params":{}}`), 400, "INVALID_PARAMS", "toolId", ""},
		{"getTool toolId not a string", srv, withKey, strings.NewReader(`{"method":"getTool","params":{"toolId":7}}`), 400, "INVALID_PARAMS", "toolId", ""},
		{"getTool blank toolId", srv, withKey, strings.NewReader(`{"method":"getTool","params":{"toolId":" "}}`), 400, "INVALID_PARAMS", "toolId", ""},
		{"searchTools missing query", srv, withKey, strings.NewReader(`{"method":"searchTools","params":{}}`), 400, "INVALID_PARAMS", "query", ""},
		{"searchTools query not a string", srv, withKey, strings.NewReader(`{"method":"searchTools","params":{"query":["json"]}}`), 400, "INVALID_PARAMS", "query", ""},
		{"searchTools empty query", srv, withKey, strings.NewReader(`{"method":"searchTools","params":{"query":""}}`), 400, "INVALID_PARAMS", "query", ""},
		{"runTool missing toolId", srv, withKey, strings.NewReader(`{"method":"runTool","params":{"input":{}}}`), 400, "INVALID_PARAMS", "toolId", ""},
		{"runTool input not an object", srv, withKey, strings.NewReader(`{"method":"runTool","params":{"toolId":"hash","input":"abc"}}`), 400, "INVALID_PARAMS", "input", ""},
		{"runTool input an array", srv, withKey, strings.NewReader(`{"method":"runTool","params":{"toolId":"hash","input":[]}}`), 400, "INVALID_PARAMS", "input", ""},
		{"runTool schema: missing required field", srv, withKey, strings.NewReader(`{"method":"runTool","params":{"toolId":"json_query","input":{"input":{}}}}`), 400, "INVALID_PARAMS", "query", "query"},
		{"runTool schema: wrong type", srv, withKey, strings.NewReader(`{"method":"runTool","params":{"toolId":"hash","input":{"text":"a","algorithm":"crc32"}}}`), 400, "INVALID_PARAMS", "algorithm", ""},
		{"runTool schema: unknown field", srv, withKey, strings.NewReader(`{"method":"runTool","params":{"toolId":"json_query","input":{"query":".","extra":1}}}`), 400, "INVALID_PARAMS", "", ""},
		{"runTool invalid jq program", srv, withKey, strings.NewReader(`{"method":"runTool","params":{"toolId":"json_query","input":{"query":".[[["}}}`), 400, "INVALID_PARAMS", "query", ""},

		{"getTool unknown tool", srv, withKey, strings.NewReader(`{"method":"getTool","params":{"toolId":"no_such_tool"}}`), 404, "TOOL_NOT_FOUND", "", "no_such_tool"},
		{"runTool unknown tool", srv, withKey, strings.NewReader(`{"method":"runTool","params":{"toolId":"no_such_tool","input":{}}}`), 404, "TOOL_NOT_FOUND", "", "no_such_tool"},

		{"body over 1 MiB with Content-Length", srv, withKey, strings.NewReader(big), 413, "PAYLOAD_TOO_LARGE", "", ""},
		{"body over 1 MiB chunked", srv, withKey, unsized{strings.NewReader(big)}, 413, "PAYLOAD_TOO_LARGE", "", ""},

		{"tool execution failure", srv, withKey, strings.NewReader(`{"method":"runTool","params":{"toolId":"json_query","input":{"input":null,"query":"error(\"boom\")"}}}`), 500, "TOOL_EXECUTION_FAILED", "", "boom"},
		{"tool timeout", srv, withKey, strings.NewReader(`{"method":"runTool","params":{"toolId":"slow_tool","input":{}}}`), 504, "TOOL_TIMEOUT", "", "slow_tool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, header, body := post(t, tc.srv, tc.headers, tc.body)
			if status != tc.status {
				t.Fatalf("status = %d, want %d; body %s", status, tc.status, body)
			}
			if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
			var e errorBody
			decodeStrict(t, body, &e)
			if e.Error != http.StatusText(tc.status) || e.Code != tc.code || e.Message == "" {
				t.Errorf("error body = %s, want error %q and code %s", body, http.StatusText(tc.status), tc.code)
			}
			if !strings.Contains(e.Message, tc.message) {
				t.Errorf("message %q does not contain %q", e.Message, tc.message)
			}
			if tc.field != "" && !slices.ContainsFunc(e.Details, func(d struct {
				Field   string `json:"field"`
				Message string `json:"message"`
			}) bool {
				return d.Field == tc.field && d.Message != ""
			}) {
				t.Errorf("details %+v do not name %q", e.Details, tc.field)
			}
			if tc.code == "INVALID_PARAMS" && len(e.Details) == 0 {
				t.Errorf("INVALID_PARAMS without details: %s", body)
			}
			if tc.status == 500 && strings.Contains(e.Message, "toolserver.") {
				t.Errorf("message leaks the operation chain: %q", e.Message)
			}
		})
	}
}

func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	srv := newServer(t, builtinRegistry(t), testKey)
	for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPut} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest(method, srv.URL+toolserver.Path, nil)
			req.Header.Set(toolserver.ServiceKeyHeader, testKey)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var e errorBody
			decodeStrict(t, b, &e)
			if resp.StatusCode != http.StatusMethodNotAllowed || e.Code != "METHOD_NOT_ALLOWED" || !strings.Contains(resp.Header.Get("Allow"), "POST") {
				t.Errorf("%s /mcp = %d %s (Allow %q)", method, resp.StatusCode, b, resp.Header.Get("Allow"))
			}
		})
	}
}

// jsonOf marshals v, for comparing shapes.
func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// canonical re-encodes JSON so that equal documents compare equal.
func canonical(t testing.TB, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return jsonOf(t, v)
}

func TestMethods(t *testing.T) {
	t.Parallel()
	reg := builtinRegistry(t)
	srv := newServer(t, reg, testKey)

	var summaries []toolserver.ToolSummary
	for _, tool := range reg.List() {
		summaries = append(summaries, toolserver.Summary(tool))
	}
	jq, err := reg.Get("json_query")
	if err != nil {
		t.Fatal(err)
	}
	summaryKeys := []string{"category", "description", "id", "inputSchema", "name"}
	detailKeys := []string{"annotations", "category", "description", "id", "inputSchema", "metered", "name", "outputSchema", "outputs"}

	tests := []struct {
		name    string
		headers map[string]string
		body    string
		want    string                          // the exact body, when set
		check   func(t *testing.T, data []byte) // checks on the "data" member
	}{
		{
			name: "listTools", body: `{"method":"listTools","params":{}}`,
			want: jsonOf(t, map[string]any{"data": map[string]any{"tools": summaries}}),
			check: func(t *testing.T, data []byte) {
				var r struct{ Tools []map[string]json.RawMessage }
				decodeStrict(t, data, &r)
				if len(r.Tools) != builtinCount {
					t.Fatalf("%d tools, want %d", len(r.Tools), builtinCount)
				}
				for _, item := range r.Tools {
					if keys := sortedKeys(item); !slices.Equal(keys, summaryKeys) {
						t.Errorf("item keys = %v, want %v", keys, summaryKeys)
					}
				}
			},
		},
		{
			name: "listTools ignores unknown params", body: `{"method":"listTools","params":{"cursor":"x"},"id":3}`,
			want: jsonOf(t, map[string]any{"data": map[string]any{"tools": summaries}}),
		},
		{
			name: "listTools with a bearer key", headers: map[string]string{"Authorization": "Bearer " + testKey}, body: `{"method":"listTools","params":{}}`,
			want: jsonOf(t, map[string]any{"data": map[string]any{"tools": summaries}}),
		},
		{
			name: "listTools with a lower-case bearer scheme", headers: map[string]string{"Authorization": "bearer " + testKey}, body: `{"method":"listTools","params":{}}`,
			want: jsonOf(t, map[string]any{"data": map[string]any{"tools": summaries}}),
		},
		{
			name: "searchTools", body: `{"method":"searchTools","params":{"query":"hash"}}`,
			want: jsonOf(t, map[string]any{"data": map[string]any{"tools": []toolserver.ToolSummary{toolserver.Summary(mustGet(t, reg, "hash"))}}}),
		},
		{
			name: "searchTools without matches", body: `{"method":"searchTools","params":{"query":"no-such-capability"}}`,
			want: `{"data":{"tools":[]}}`,
		},
		{
			name: "getTool", body: `{"method":"getTool","params":{"toolId":"json_query"}}`,
			want: jsonOf(t, map[string]any{"data": toolserver.Detail(jq)}),
			check: func(t *testing.T, data []byte) {
				var d map[string]json.RawMessage
				decodeStrict(t, data, &d)
				if keys := sortedKeys(d); !slices.Equal(keys, detailKeys) {
					t.Errorf("keys = %v, want %v", keys, detailKeys)
				}
				if got := canonical(t, d["annotations"]); got != `{"destructiveHint":false,"idempotentHint":true,"openWorldHint":false,"readOnlyHint":true}` {
					t.Errorf("annotations = %s", got)
				}
				if got := canonical(t, d["outputs"]); got != `["result"]` {
					t.Errorf("outputs = %s", got)
				}
				if canonical(t, d["inputSchema"]) != canonical(t, jq.InputSchema) || canonical(t, d["outputSchema"]) != canonical(t, jq.OutputSchema) {
					t.Errorf("schemas differ from the tool's")
				}
			},
		},
		{
			name: "runTool json_query",
			body: `{"method":"runTool","params":{"toolId":"json_query","input":{"input":{"items":[{"name":"a","price":3},{"name":"b","price":1}]},"query":"[.items[] | select(.price > 2) | .name]"}}}`,
			check: func(t *testing.T, data []byte) {
				var r struct {
					Result        json.RawMessage `json:"result"`
					ExecutionTime json.Number     `json:"executionTime"`
				}
				decodeStrict(t, data, &r)
				if got := canonical(t, r.Result); got != `{"result":["a"]}` {
					t.Errorf("result = %s", got)
				}
				if n, err := r.ExecutionTime.Int64(); err != nil || n < 0 {
					t.Errorf("executionTime %q is not a non-negative integer", r.ExecutionTime)
				}
			},
		},
		{
			name: "runTool without input uses an empty object",
			body: `{"method":"runTool","params":{"toolId":"datetime_now"}}`,
			check: func(t *testing.T, data []byte) {
				var r struct {
					Result        map[string]any `json:"result"`
					ExecutionTime json.Number    `json:"executionTime"`
				}
				decodeStrict(t, data, &r)
				if r.Result["iso"] != "2026-03-12T19:03:58Z" {
					t.Errorf("result = %v", r.Result)
				}
			},
		},
		{
			name: "runTool hash",
			body: `{"method":"runTool","params":{"toolId":"hash","input":{"text":"abc","algorithm":"sha256"}}}`,
			check: func(t *testing.T, data []byte) {
				var r struct {
					Result        map[string]any `json:"result"`
					ExecutionTime json.Number    `json:"executionTime"`
				}
				decodeStrict(t, data, &r)
				if r.Result["digest"] != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
					t.Errorf("result = %v", r.Result)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			headers := tc.headers
			if headers == nil {
				headers = withKey
			}
			status, header, body := post(t, srv, headers, strings.NewReader(tc.body))
			if status != http.StatusOK {
				t.Fatalf("status = %d; body %s", status, body)
			}
			if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
			if tc.want != "" {
				if got := canonical(t, body); got != canonical(t, []byte(tc.want)) {
					t.Errorf("body =\n%s\nwant\n%s", got, tc.want)
				}
			}
			var env map[string]json.RawMessage
			decodeStrict(t, body, &env)
			if keys := sortedKeys(env); !slices.Equal(keys, []string{"data"}) {
				t.Fatalf("top-level keys = %v, want [data]", keys)
			}
			if tc.check != nil {
				tc.check(t, env["data"])
			}
		})
	}
}

func TestSearchRanking(t *testing.T) {
	t.Parallel()
	reg := builtinRegistry(t)
	srv := newServer(t, reg, testKey)
	tests := []struct {
		query     string
		wantFirst []string // the name matches, in order
		wantMore  bool     // description-only matches follow
	}{
		{"text", []string{"hash", "llm_generate", "text_template"}, true},
		{"json", []string{"json_query"}, true},
		{"EXTRACT", []string{"html_extract", "regex_extract"}, true},
		{"html extract", []string{"html_extract"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			status, _, body := post(t, srv, withKey, strings.NewReader(jsonOf(t, map[string]any{"method": "searchTools", "params": map[string]any{"query": tc.query}})))
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			var r struct {
				Data struct{ Tools []toolserver.ToolSummary }
			}
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, s := range r.Data.Tools {
				ids = append(ids, s.ID)
			}
			// Expected independently of Registry.Search: every word in the id
			// or name first, then every word anywhere; each group by id.
			var byName, byDesc []string
			words := strings.Fields(strings.ToLower(tc.query))
			for _, tool := range reg.List() {
				title, all := strings.ToLower(tool.ID+" "+tool.Name), strings.ToLower(tool.ID+" "+tool.Name+" "+tool.Description)
				inTitle, inAll := true, true
				for _, w := range words {
					inTitle = inTitle && strings.Contains(title, w)
					inAll = inAll && strings.Contains(all, w)
				}
				if inTitle {
					byName = append(byName, tool.ID)
				} else if inAll {
					byDesc = append(byDesc, tool.ID)
				}
			}
			if want := append(slices.Clone(byName), byDesc...); !slices.Equal(ids, want) {
				t.Errorf("searchTools(%q) = %v, want %v", tc.query, ids, want)
			}
			if !slices.Equal(byName, tc.wantFirst) || (len(byDesc) > 0) != tc.wantMore {
				t.Errorf("name matches %v (want %v), description matches %v", byName, tc.wantFirst, byDesc)
			}
		})
	}
}

func mustGet(t testing.TB, reg *tools.Registry, id string) *tools.Tool {
	t.Helper()
	tool, err := reg.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestRoutesWithoutStack checks the handler alone (no middleware) still
// bounds the body and authenticates.
func TestRoutesWithoutStack(t *testing.T) {
	t.Parallel()
	h := toolserver.Routes(builtinRegistry(t), testKey)
	if got := h.Patterns(); !reflect.DeepEqual(got, []string{"POST /mcp"}) {
		t.Errorf("patterns = %v", got)
	}
	big := `{"method":"listTools","params":{"pad":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}}`
	tests := []struct {
		name   string
		key    string
		body   string
		status int
	}{
		{"no key", "", `{"method":"listTools","params":{}}`, 401},
		{"too large", testKey, big, 413},
		{"ok", testKey, `{"method":"listTools","params":{}}`, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(http.MethodPost, toolserver.Path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			if tc.key != "" {
				req.Header.Set(toolserver.ServiceKeyHeader, tc.key)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Errorf("status = %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
		})
	}
}
