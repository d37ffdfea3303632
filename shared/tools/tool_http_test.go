package tools_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/tools"
)

// echoServer answers on a few paths:
//
//	/json      a JSON document
//	/echo      JSON describing the request (method, body, headers, host)
//	/text      plain text
//	/problem   application/problem+json with status 404
//	/badjson   a JSON content type with a body that is not JSON
//	/binary    invalid UTF-8
//	/size/N    N bytes with a Content-Length
//	/chunked/N N bytes streamed without a Content-Length
//	/redirect  a redirect to /json
//	/loop      a redirect to itself
//	/slow      waits until the client gives up
func echoServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		io.WriteString(w, `{"id":1,"name":"Ada","tags":["x"]}`)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method, "body": string(b), "contentType": r.Header.Get("Content-Type"),
			"auth": r.Header.Get("Authorization"), "userAgent": r.Header.Get("User-Agent"), "host": r.Host,
		})
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello")
	})
	mux.HandleFunc("/problem", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"title":"missing"}`)
	})
	mux.HandleFunc("/badjson", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"truncated":`)
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{'o', 'k', 0xff, 0xfe})
	})
	mux.HandleFunc("/size/{n}", func(w http.ResponseWriter, r *http.Request) {
		n := atoi(r.PathValue("n"))
		w.Header().Set("Content-Length", r.PathValue("n"))
		io.WriteString(w, strings.Repeat("a", n))
	})
	mux.HandleFunc("/chunked/{n}", func(w http.ResponseWriter, r *http.Request) {
		n := atoi(r.PathValue("n"))
		for i := 0; i < n; i += 10 {
			io.WriteString(w, strings.Repeat("a", min(10, n-i)))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/json", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestHTTPRequest(t *testing.T) {
	t.Parallel()
	srv, _ := echoServer(t)
	// A minute for every call but the one that waits for the timeout:
	// on a loaded machine a local answer may take longer than 200 ms.
	r := newRegistry(t, tools.Config{AllowPrivateNetworks: true, MaxResponseBytes: 300, HTTPTimeout: time.Minute})
	u := srv.URL
	echo := func(t *testing.T, out map[string]any) map[string]any {
		t.Helper()
		j, ok := out["json"].(map[string]any)
		if !ok {
			t.Fatalf("no parsed json in %v", out)
		}
		return j
	}
	runToolCases(t, r, "http_request", []toolCase{
		{name: "GET JSON", input: map[string]any{"url": u + "/json"},
			check: func(t *testing.T, out map[string]any) {
				if out["status"] != 200 || out["body"] != `{"id":1,"name":"Ada","tags":["x"]}` {
					t.Fatalf("status/body %v %q", out["status"], out["body"])
				}
				h := out["headers"].(map[string]any)
				if h["content-type"] != "application/json; charset=utf-8" || h["x-multi"] != "a, b" {
					t.Fatalf("headers %v", h)
				}
				if got := jsonOf(t, out["json"]); got != `{"id":1,"name":"Ada","tags":["x"]}` {
					t.Fatalf("json %s", got)
				}
			}},
		{name: "POST with body and headers", input: map[string]any{"url": u + "/echo", "method": "POST", "body": `{"a":1}`},
			check: func(t *testing.T, out map[string]any) {
				j := echo(t, out)
				if j["method"] != "POST" || j["body"] != `{"a":1}` {
					t.Fatalf("server saw %v", j)
				}
				if !strings.HasPrefix(j["userAgent"].(string), "workflowchat-tools/") {
					t.Fatalf("default user agent %v", j["userAgent"])
				}
			}},
		{name: "custom headers", input: map[string]any{"url": u + "/echo", "method": "PUT", "body": "x=1",
			"headers": map[string]any{"Content-Type": "application/x-www-form-urlencoded", "authorization": "Bearer t", "User-Agent": "mine", "Host": "api.example"}},
			check: func(t *testing.T, out map[string]any) {
				j := echo(t, out)
				want := map[string]any{"method": "PUT", "body": "x=1", "contentType": "application/x-www-form-urlencoded",
					"auth": "Bearer t", "userAgent": "mine", "host": "api.example"}
				if jsonOf(t, j) != jsonOf(t, want) {
					t.Fatalf("server saw %v, want %v", j, want)
				}
			}},
		{name: "PATCH", input: map[string]any{"url": u + "/echo", "method": "PATCH", "body": "p"},
			check: func(t *testing.T, out map[string]any) {
				if j := echo(t, out); j["method"] != "PATCH" || j["body"] != "p" {
					t.Fatalf("server saw %v", j)
				}
			}},
		{name: "DELETE", input: map[string]any{"url": u + "/echo", "method": "DELETE"},
			check: func(t *testing.T, out map[string]any) {
				if j := echo(t, out); j["method"] != "DELETE" || j["body"] != "" {
					t.Fatalf("server saw %v", j)
				}
			}},
		{name: "HEAD has no body", input: map[string]any{"url": u + "/json", "method": "HEAD"},
			check: func(t *testing.T, out map[string]any) {
				if out["status"] != 200 || out["body"] != "" || out["json"] != nil {
					t.Fatalf("HEAD output %v", out)
				}
			}},
		{name: "error status is a result", input: map[string]any{"url": u + "/problem"},
			check: func(t *testing.T, out map[string]any) {
				if out["status"] != 404 || jsonOf(t, out["json"]) != `{"title":"missing"}` {
					t.Fatalf("output %v", out)
				}
			}},
		{name: "unparsable JSON is left as body", input: map[string]any{"url": u + "/badjson"},
			check: func(t *testing.T, out map[string]any) {
				if _, ok := out["json"]; ok || out["body"] != `{"truncated":` {
					t.Fatalf("output %v", out)
				}
			}},
		{name: "invalid UTF-8 replaced", input: map[string]any{"url": u + "/binary"},
			check: func(t *testing.T, out map[string]any) {
				if out["body"] != "ok\uFFFD" {
					t.Fatalf("body %q", out["body"])
				}
			}},
		{name: "redirect followed", input: map[string]any{"url": u + "/redirect"},
			check: func(t *testing.T, out map[string]any) {
				if out["status"] != 200 || echo(t, out)["name"] != "Ada" {
					t.Fatalf("output %v", out)
				}
			}},
		{name: "body at the limit", input: map[string]any{"url": u + "/size/300"},
			check: func(t *testing.T, out map[string]any) {
				if len(out["body"].(string)) != 300 {
					t.Fatalf("body length %d", len(out["body"].(string)))
				}
			}},
		{name: "streamed body at the limit", input: map[string]any{"url": u + "/chunked/300"},
			check: func(t *testing.T, out map[string]any) {
				if len(out["body"].(string)) != 300 {
					t.Fatalf("body length %d", len(out["body"].(string)))
				}
			}},
		{name: "body over the limit", input: map[string]any{"url": u + "/size/301"},
			code: tools.CodeToolExecutionFailed, msg: "is 301 bytes, over the 300-byte limit"},
		{name: "streamed body over the limit", input: map[string]any{"url": u + "/chunked/450"},
			code: tools.CodeToolExecutionFailed, msg: "over the 300-byte limit"},
		{name: "too many redirects", input: map[string]any{"url": u + "/loop"},
			code: tools.CodeToolExecutionFailed, msg: "too many redirects from 127.0.0.1"},
		{name: "connection refused", input: map[string]any{"url": closedURL(t)},
			code: tools.CodeToolExecutionFailed, msg: "cannot connect to 127.0.0.1"},
		{name: "scheme refused by schema", input: map[string]any{"url": "file:///etc/passwd"},
			code: tools.CodeInvalidParams, msg: "does not match pattern", field: "url"},
		{name: "relative url", input: map[string]any{"url": "/json"},
			code: tools.CodeInvalidParams, msg: "does not match pattern", field: "url"},
		{name: "unknown method", input: map[string]any{"url": u, "method": "TRACE"},
			code: tools.CodeInvalidParams, msg: "value must be one of", field: "method"},
		{name: "header injection", input: map[string]any{"url": u, "headers": map[string]any{"X-A": "v\r\nX-Evil: 1"}},
			code: tools.CodeInvalidParams, msg: "does not match pattern", field: "headers/X-A"},
		{name: "bad header name", input: map[string]any{"url": u, "headers": map[string]any{"X A": "v"}},
			code: tools.CodeInvalidParams, msg: "does not match pattern", field: "headers/X A"},
	})
	quick := newRegistry(t, tools.Config{AllowPrivateNetworks: true, MaxResponseBytes: 300, HTTPTimeout: 200 * time.Millisecond})
	runToolCases(t, quick, "http_request", []toolCase{
		{name: "timeout", input: map[string]any{"url": u + "/slow"},
			code: tools.CodeToolTimeout, msg: "request to 127.0.0.1 timed out after 200ms"},
	})
}

// closedURL returns the URL of a loopback port with nothing listening.
func closedURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
}

func TestHTTPRequestPlainTextHeaders(t *testing.T) {
	t.Parallel()
	srv, _ := echoServer(t)
	r := newRegistry(t, tools.Config{AllowPrivateNetworks: true})
	out, err := r.Run(t.Context(), "http_request", map[string]any{"url": srv.URL + "/text"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ValidateOutput("http_request", out); err != nil {
		t.Fatal(err)
	}
	h := out["headers"].(map[string]any)
	if out["status"] != 200 || out["body"] != "hello" || h["content-type"] != "text/plain" || h["content-length"] != "5" {
		t.Fatalf("output %v", out)
	}
	if _, ok := out["json"]; ok {
		t.Fatalf("json present for text/plain: %v", out)
	}
}

func TestHTTPRequestDefaultSizeCap(t *testing.T) {
	t.Parallel()
	srv, _ := echoServer(t)
	r := newRegistry(t, tools.Config{AllowPrivateNetworks: true})
	if _, err := r.Run(t.Context(), "http_request", map[string]any{"url": srv.URL + "/size/1048576"}); err != nil {
		t.Fatalf("1 MiB body refused: %v", err)
	}
	_, err := r.Run(t.Context(), "http_request", map[string]any{"url": srv.URL + "/size/1048577"})
	assertErr(t, err, tools.CodeToolExecutionFailed, "over the 1048576-byte limit", "")
}

// TestHTTPRequestRefusesPrivateDestinations runs with the guard on
// (AllowPrivateNetworks false). Loopback cases hit a live server that
// counts requests and must see none; the non-loopback addresses are refused
// at dial time, before any packet is sent, and are tried only after the
// guard has demonstrably refused loopback.
func TestHTTPRequestRefusesPrivateDestinations(t *testing.T) {
	t.Parallel()
	srv, hits := echoServer(t)
	port := mustPort(t, srv.URL)
	r := newRegistry(t, tools.Config{})

	run := func(t *testing.T, rawURL, wantMsg string) {
		t.Helper()
		_, err := r.Run(t.Context(), "http_request", map[string]any{"url": rawURL})
		assertErr(t, err, tools.CodeToolExecutionFailed, "destination not allowed", "")
		var e *errs.Error
		if errors.As(err, &e); !strings.Contains(e.Message, wantMsg) {
			t.Errorf("message %q, want it to contain %q", e.Message, wantMsg)
		}
		for _, secret := range []string{"hunter2", "tok3n", "meta-data", "/json"} {
			if strings.Contains(e.Message, secret) {
				t.Errorf("message %q leaks %q from the URL", e.Message, secret)
			}
		}
	}

	loopback := []struct{ name, url, msg string }{
		{"ipv4 loopback", "http://127.0.0.1:" + port + "/json", "destination not allowed: 127.0.0.1 is a loopback address"},
		{"localhost", "http://localhost:" + port + "/json", "destination not allowed: localhost resolves to 127.0.0.1, a loopback address"},
		{"ipv6 loopback", "http://[::1]:" + port + "/json", "destination not allowed: ::1 is a loopback address"},
		{"credentials and query are not echoed", "http://admin:hunter2@127.0.0.1:" + port + "/json?token=tok3n", "loopback"},
		{"ipv4-mapped loopback", "http://[::ffff:127.0.0.1]:" + port + "/json", "::ffff:127.0.0.1 resolves to 127.0.0.1, a loopback address"},
	}
	for _, tt := range loopback {
		t.Run(tt.name, func(t *testing.T) { run(t, tt.url, tt.msg) })
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("loopback server received %d requests with the guard on", n)
	}
	if t.Failed() {
		t.Fatal("guard did not refuse loopback; not trying non-loopback addresses")
	}

	for _, tt := range []struct{ name, url, msg string }{
		{"private", "http://10.0.0.1/", "10.0.0.1 is a private address"},
		{"metadata", "http://169.254.169.254/latest/meta-data", "169.254.169.254 is a link-local address"},
		{"ipv6 metadata", "http://[fd00:ec2::254]/latest/meta-data", "private address"},
		{"cgnat", "http://100.64.0.1:8080/", "CGNAT"},
	} {
		// The guard's message says the address was refused before a
		// connection was tried (a connection would fail otherwise).
		t.Run(tt.name, func(t *testing.T) { run(t, tt.url, tt.msg) })
	}
}

func mustPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}
