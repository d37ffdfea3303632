package toolclient_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

// TestIdentityVerify: a signed identity verifies under the same service
// key until it expires; any change to it, another key, another version, a
// lifetime beyond MaxIdentityTTL or a malformed value is refused.
func TestIdentityVerify(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	key := toolclient.NewIdentityKey(clientTestKey)
	good := toolclient.Identity{UserID: "u-1", MaxOutput: 250, Expires: now.Add(time.Minute)}
	signed := key.Sign(good)
	version, rest, _ := strings.Cut(signed, ".")
	payload, sig, _ := strings.Cut(rest, ".")
	claims := func(v string) string { return base64.RawURLEncoding.EncodeToString([]byte(v)) }
	tests := []struct {
		name  string
		key   toolclient.IdentityKey
		value string
		at    time.Time
		want  error
	}{
		{"valid", key, signed, now, nil},
		{"valid until its expiry", key, signed, now.Add(59 * time.Second), nil},
		{"expired", key, signed, now.Add(time.Minute), toolclient.ErrIdentityExpired},
		{"expires too far ahead", key, key.Sign(toolclient.Identity{UserID: "u-1", Expires: now.Add(toolclient.MaxIdentityTTL + time.Second)}), now, toolclient.ErrIdentityExpired},
		{"another service key", toolclient.NewIdentityKey("another-key-0123456789"), signed, now, toolclient.ErrIdentityInvalid},
		{"payload changed", key, version + "." + claims(`{"sub":"u-2","cap":250,"exp":`+jsonInt(good.Expires.Unix())+`}`) + "." + sig, now, toolclient.ErrIdentityInvalid},
		{"signature changed", key, version + "." + payload + "." + claims("not the signature"), now, toolclient.ErrIdentityInvalid},
		{"signature missing", key, version + "." + payload, now, toolclient.ErrIdentityInvalid},
		{"another version", key, "v2." + payload + "." + sig, now, toolclient.ErrIdentityInvalid},
		{"not base64", key, version + ".%%%." + sig, now, toolclient.ErrIdentityInvalid},
		{"no user", key, key.Sign(toolclient.Identity{Expires: now.Add(time.Minute)}), now, toolclient.ErrIdentityInvalid},
		{"too long", key, key.Sign(toolclient.Identity{UserID: strings.Repeat("u", 3000), Expires: now.Add(time.Minute)}), now, toolclient.ErrIdentityInvalid},
		{"empty", key, "", now, toolclient.ErrIdentityInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.key.Verify(tt.value, tt.at)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %+v, %v; want %v", got, err, tt.want)
			}
			if err == nil && (got.UserID != good.UserID || got.MaxOutput != good.MaxOutput || !got.Expires.Equal(good.Expires)) {
				t.Errorf("Verify = %+v, want %+v", got, good)
			}
		})
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// whoamiTool answers with the caller and output cap the tool server put in
// its context, and reports a model usage when its input asks.
func whoamiTool() *tools.Tool {
	return &tools.Tool{
		ID: "client_test_whoami", Name: "Who am I", Description: "Returns its caller.", Category: tools.CategoryUtil,
		InputSchema:  json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Metered:      true,
		Run: func(ctx context.Context, in map[string]any) (map[string]any, error) {
			if in["spend"] == true {
				tools.ReportModelUsage(ctx, tools.ModelUsage{ModelID: "builtin", InputTokens: 7, OutputTokens: 3})
			}
			return map[string]any{"caller": tools.Caller(ctx), "maxOutput": tools.MaxOutput(ctx)}, nil
		},
	}
}

// TestRunToolAs: the tool server runs a call for the user its signed
// identity names, with the identity's output cap, and returns a metered
// tool's usage beside its result; a call without an identity is
// anonymous; getTool declares the metered tools. A forged, expired or
// malformed identity is 401 UNAUTHORIZED, like a bad key, and the client
// reports it as its own misconfiguration.
func TestRunToolAs(t *testing.T) {
	t.Parallel()
	reg, err := tools.NewRegistry(append(tools.Builtin(tools.Config{}), whoamiTool())...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, clientTestKey), httpapi.Options{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	c := toolclient.NewClient(srv.URL, clientTestKey, nil)
	ctx := context.Background()

	res, err := c.RunToolAs(ctx, "client_test_whoami", map[string]any{"spend": true}, toolclient.Identity{UserID: "user-7", MaxOutput: 42})
	if err != nil {
		t.Fatal(err)
	}
	if res.Result["caller"] != "user-7" || res.Result["maxOutput"] != float64(42) {
		t.Errorf("result = %v, want caller user-7 and maxOutput 42", res.Result)
	}
	if res.Usage == nil || *res.Usage != (toolclient.Usage{ModelID: "builtin", InputTokens: 7, OutputTokens: 3}) {
		t.Errorf("usage = %+v", res.Usage)
	}
	res, err = c.RunTool(ctx, "client_test_whoami", nil)
	if err != nil || res.Result["caller"] != "" || res.Result["maxOutput"] != float64(0) || res.Usage != nil {
		t.Errorf("anonymous run = %+v, %v", res, err)
	}
	for id, metered := range map[string]bool{"client_test_whoami": true, "llm_generate": true, "json_query": false} {
		if d, err := c.GetTool(ctx, id); err != nil || d.Metered != metered {
			t.Errorf("GetTool(%s).Metered = %v, %v; want %v", id, d.Metered, err, metered)
		}
	}

	key := toolclient.NewIdentityKey(clientTestKey)
	for name, ident := range map[string]string{
		"forged":    toolclient.NewIdentityKey("not-the-service-key-0123").Sign(toolclient.Identity{UserID: "user-7", Expires: time.Now().Add(time.Minute)}),
		"expired":   key.Sign(toolclient.Identity{UserID: "user-7", Expires: time.Now().Add(-time.Second)}),
		"malformed": "v1.x",
		"empty":     "",
	} {
		body := `{"method":"runTool","params":{"toolId":"client_test_whoami","input":{}}}`
		req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(toolclient.ServiceKeyHeader, clientTestKey)
		req.Header[toolclient.IdentityHeader] = []string{ident}
		resp, err := testHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e httpapi.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 401 || e.Code != "UNAUTHORIZED" {
			t.Errorf("%s identity: %d %+v, want 401 UNAUTHORIZED", name, resp.StatusCode, e)
		}
	}
	// An identity the tool server refuses (here, one that expired) is the
	// client's Internal error, never the user's 401.
	_, err = c.RunToolAs(ctx, "client_test_whoami", nil, toolclient.Identity{UserID: "u", Expires: time.Now().Add(-time.Minute)})
	wantClientError(t, err, errs.Internal, "INTERNAL_ERROR", "caller identity")
}

var testHTTP = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
