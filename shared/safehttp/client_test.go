package safehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/safehttp"
)

// countingServer starts a loopback test server that counts the requests it
// receives and answers "ok".
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func port(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

func get(ctx context.Context, c *http.Client, rawURL string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestClientRefusesLoopback proves, against a live loopback server that
// counts requests, that the dial check refuses loopback destinations however
// they are spelled.
func TestClientRefusesLoopback(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t)
	p := port(t, srv)
	c := safehttp.NewClient(safehttp.Options{Timeout: 5 * time.Second})

	tests := []struct{ name, url string }{
		{"ipv4 literal", "http://127.0.0.1:" + p + "/"},
		{"ipv4 loopback range", "http://127.0.0.2:" + p + "/"},
		{"hostname resolving to loopback", "http://localhost:" + p + "/"},
		{"ipv6 loopback", "http://[::1]:" + p + "/"},
		{"ipv4-mapped ipv6 loopback", "http://[::ffff:127.0.0.1]:" + p + "/"},
		{"unspecified", "http://0.0.0.0:" + p + "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := get(t.Context(), c, tt.url)
			if !errors.Is(err, safehttp.ErrForbiddenAddress) {
				t.Fatalf("GET %s: err = %v, want ErrForbiddenAddress", tt.url, err)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("server received %d requests, want 0", n)
	}
}

// TestClientRefusesNonLoopback checks that private and metadata destinations
// are refused by the dial check before any packet is sent: the check runs in
// ControlContext, before connect(2). The client has the guard on; no test
// ever dials these addresses with it off.
func TestClientRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	c := safehttp.NewClient(safehttp.Options{Timeout: 5 * time.Second})

	// Preflight: the guard must demonstrably refuse a live loopback server
	// with this very client before any non-loopback address is tried.
	srv, hits := countingServer(t)
	if _, err := get(t.Context(), c, srv.URL); !errors.Is(err, safehttp.ErrForbiddenAddress) || hits.Load() != 0 {
		t.Fatalf("guard not active (err %v, hits %d); not trying non-loopback addresses", err, hits.Load())
	}

	tests := []struct {
		url    string
		addr   string
		reason string
	}{
		{"http://10.0.0.1/", "10.0.0.1", "private"},
		{"http://169.254.169.254/latest/meta-data", "169.254.169.254", "link-local"},
		{"http://[fd00:ec2::254]/latest/meta-data", "fd00:ec2::254", "private"},
		{"https://192.168.0.1/", "192.168.0.1", "private"},
		{"http://100.64.0.1/", "100.64.0.1", "CGNAT"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			// Precondition: never attempt a request the classifier would let through.
			if safehttp.CheckAddr(netip.MustParseAddr(tt.addr)) == nil {
				t.Fatalf("classifier allows %s; refusing to send a request", tt.addr)
			}
			// A refusal comes before any connection: these addresses are not
			// routed here, so a connection attempt would end in the client's
			// timeout, an error other than ErrForbiddenAddress (no timing
			// asserted: on a loaded machine an immediate refusal can take
			// seconds).
			_, err := get(t.Context(), c, tt.url)
			if !errors.Is(err, safehttp.ErrForbiddenAddress) {
				t.Fatalf("GET %s: err = %v, want ErrForbiddenAddress", tt.url, err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("GET %s: err = %q, want reason %q", tt.url, err, tt.reason)
			}
		})
	}
}

func TestClientAllowPrivate(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t)
	c := safehttp.NewClient(safehttp.Options{AllowPrivate: true, Timeout: 5 * time.Second})
	body, err := get(t.Context(), c, srv.URL)
	if err != nil {
		t.Fatalf("GET with AllowPrivate: %v", err)
	}
	if body != "ok" || hits.Load() != 1 {
		t.Fatalf("body %q hits %d, want \"ok\" and 1", body, hits.Load())
	}
}

// TestClientRedirectHopIsChecked follows a redirect from an allowed loopback
// server to a refused one: a custom Check allows only 127.0.0.1, and the
// second server listens on 127.0.0.2.
func TestClientRedirectHopIsChecked(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	var targetHits atomic.Int64
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
	}))
	target.Listener.Close()
	target.Listener = ln
	target.Start()
	t.Cleanup(target.Close)

	origin := httptest.NewServer(http.RedirectHandler(target.URL+"/secret", http.StatusFound))
	t.Cleanup(origin.Close)

	onlyOne := func(a netip.Addr) error {
		if a == netip.MustParseAddr("127.0.0.1") {
			return nil
		}
		return fmt.Errorf("%s is not on the allow list", a)
	}
	c := safehttp.NewClient(safehttp.Options{Check: onlyOne, Timeout: 5 * time.Second})

	_, err = get(t.Context(), c, origin.URL)
	if !errors.Is(err, safehttp.ErrForbiddenAddress) {
		t.Fatalf("redirect to 127.0.0.2: err = %v, want ErrForbiddenAddress", err)
	}
	if n := targetHits.Load(); n != 0 {
		t.Fatalf("redirect target received %d requests, want 0", n)
	}
	// The same client reaches the allowed origin when it does not redirect.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "fine") }))
	t.Cleanup(plain.Close)
	if body, err := get(t.Context(), c, plain.URL); err != nil || body != "fine" {
		t.Fatalf("GET allowed origin: %q, %v", body, err)
	}
}

func TestClientRedirectLimits(t *testing.T) {
	t.Parallel()
	// /hop/N redirects to /hop/N-1; /hop/0 answers "done".
	mux := http.NewServeMux()
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.PathValue("n"), &n)
		if n == 0 {
			io.WriteString(w, "done")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
	})
	mux.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	mux.HandleFunc("/gopher", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "gopher://127.0.0.1:70/", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	tests := []struct {
		name         string
		maxRedirects int
		path         string
		wantBody     string
		wantErr      error
		wantStatus   int
	}{
		{"within default cap", 0, "/hop/5", "done", nil, 200},
		{"over default cap", 0, "/hop/6", "", safehttp.ErrTooManyRedirects, 0},
		{"within custom cap", 2, "/hop/2", "done", nil, 200},
		{"over custom cap", 2, "/hop/3", "", safehttp.ErrTooManyRedirects, 0},
		{"no redirects followed", -1, "/hop/1", "", nil, http.StatusFound},
		{"redirect to file scheme", 0, "/file", "", safehttp.ErrScheme, 0},
		{"redirect to gopher scheme", 0, "/gopher", "", safehttp.ErrScheme, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := safehttp.NewClient(safehttp.Options{AllowPrivate: true, MaxRedirects: tt.maxRedirects, Timeout: 5 * time.Second})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+tt.path, nil)
			resp, err := c.Do(req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus || string(b) != tt.wantBody && tt.wantBody != "" {
				t.Fatalf("status %d body %q, want %d %q", resp.StatusCode, b, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

func TestClientRefusesSchemes(t *testing.T) {
	t.Parallel()
	c := safehttp.NewClient(safehttp.Options{AllowPrivate: true})
	for _, u := range []string{"file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1/"} {
		t.Run(u, func(t *testing.T) {
			t.Parallel()
			_, err := get(t.Context(), c, u)
			if !errors.Is(err, safehttp.ErrScheme) {
				t.Fatalf("GET %s: err = %v, want ErrScheme", u, err)
			}
		})
	}
}

func TestClientTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	c := safehttp.NewClient(safehttp.Options{AllowPrivate: true, Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := get(t.Context(), c, srv.URL)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a timeout", err)
	}
	// The server holds the request until the test ends: a minute tells
	// the client's 100 ms timeout from none, whatever the machine's speed.
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("timeout took %v", d)
	}
}
