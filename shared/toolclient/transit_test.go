package toolclient_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/toolserver"
)

// TestValuesByReference: with a blob store on both sides, a tool input
// larger than a request may carry reaches the tool server by reference,
// and a large result comes back the same way, whole; the references are
// deleted after the call. A result over MaxValueBytes is refused, and
// without the store on the server side a reference is an invalid param.
func TestValuesByReference(t *testing.T) {
	t.Parallel()
	store := blob.NewMemory(nil)
	srv := httptest.NewServer(httpapi.Stack(toolserver.Routes(clientTestRegistry(t), clientTestKey, toolserver.WithBlobs(store)),
		httpapi.Options{Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	c := toolclient.NewClient(srv.URL, clientTestKey, nil).WithBlobs(store)
	ctx := context.Background()

	big := strings.Repeat("x", 3<<20) // 3 MiB: over the 1 MiB request limit
	res, err := c.RunTool(ctx, "json_query", map[string]any{"input": map[string]any{"text": big}, "query": ".text | length"})
	if err != nil || res.Result["result"] != float64(len(big)) {
		t.Fatalf("a 3 MiB input: %v %v", res.Result, err)
	}
	res, err = c.RunTool(ctx, "json_query", map[string]any{"input": 1, "query": `"ab" * 600000`})
	if err != nil || len(res.Result["result"].(string)) != 1_200_000 {
		t.Fatalf("a 1.2 MB result: %v", err)
	}
	if n, err := store.DeletePrefix(ctx, blob.PrefixCalls); err != nil || n != 0 {
		t.Errorf("%d values left under %s after the calls (%v)", n, blob.PrefixCalls, err)
	}
	_, err = c.RunTool(ctx, "json_query", map[string]any{"input": 1, "query": `"ab" * 4200000`})
	wantClientError(t, err, errs.TooLarge, toolclient.CodeValueTooLarge, "more than")
	_, err = c.RunTool(ctx, "json_query", map[string]any{"input": map[string]any{"text": strings.Repeat("y", 9<<20)}, "query": "."})
	wantClientError(t, err, errs.TooLarge, toolclient.CodeValueTooLarge, "tool input")

	// A server without the store takes no reference; a client without it
	// sends values inline (and a large one is refused by the request
	// limit).
	plain := startClientTestServer(t)
	_, err = toolclient.NewClient(plain.URL, clientTestKey, nil).WithBlobs(store).RunTool(ctx, "json_query", map[string]any{"input": map[string]any{"text": big}, "query": "."})
	wantClientError(t, err, errs.Invalid, "INVALID_PARAMS", "no input by reference")
	_, err = toolclient.NewClient(srv.URL, clientTestKey, nil).RunTool(ctx, "json_query", map[string]any{"input": map[string]any{"text": big}, "query": "."})
	wantClientError(t, err, errs.TooLarge, "PAYLOAD_TOO_LARGE", "")
	// A result over InlineBytes to a client that does not take
	// references comes inline.
	res, err = toolclient.NewClient(srv.URL, clientTestKey, nil).RunTool(ctx, "json_query", map[string]any{"input": 1, "query": `"ab" * 400000`})
	if err != nil || len(res.Result["result"].(string)) != 800_000 {
		t.Fatalf("an inline 800 KB result: %v", err)
	}
}

// TestReferencesAreChecked: a reference outside calls/, a missing one, and
// a reference that is not an object are invalid params.
func TestReferencesAreChecked(t *testing.T) {
	t.Parallel()
	store := blob.NewMemory(nil)
	srv := httptest.NewServer(httpapi.Stack(toolserver.Routes(clientTestRegistry(t), clientTestKey, toolserver.WithBlobs(store)),
		httpapi.Options{Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	if _, err := blob.PutBytes(context.Background(), store, "calls/array.json", []byte(`[1,2]`), "application/json"); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.PutBytes(context.Background(), store, "runs/r/secret.json", []byte(`{"a":1}`), "application/json"); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{"runs/r/secret.json": "inputRef", "calls/none.json": "no stored input", "calls/array.json": "not a JSON object"} {
		body, _ := json.Marshal(map[string]any{"method": "runTool", "params": map[string]any{"toolId": "json_query", "inputRef": ref}})
		resp := post(t, srv.URL, string(body))
		if resp.status != 400 || !strings.Contains(resp.body, want) {
			t.Errorf("inputRef %s: %d %s", ref, resp.status, resp.body)
		}
	}
	// An input by reference over MaxValueBytes is refused as an inline
	// one is: 413 TOOL_VALUE_TOO_LARGE, not the blob store's own code.
	huge := `{"text":"` + strings.Repeat("z", toolclient.MaxValueBytes) + `"}`
	if _, err := blob.PutBytes(context.Background(), store, "calls/huge.json", []byte(huge), "application/json"); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"method": "runTool", "params": map[string]any{"toolId": "json_query", "inputRef": "calls/huge.json"}})
	if resp := post(t, srv.URL, string(body)); resp.status != 413 || !strings.Contains(resp.body, toolclient.CodeValueTooLarge) {
		t.Errorf("an 8 MiB input by reference: %d %.200s", resp.status, resp.body)
	}
}

type posted struct {
	status int
	body   string
}

// post sends body to the tool server at base with the service key.
func post(t *testing.T, base, body string) posted {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(toolclient.ServiceKeyHeader, clientTestKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return posted{resp.StatusCode, string(b)}
}
