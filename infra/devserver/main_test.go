package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// closeWithin is how long a test waits for the server to close a
// connection it should close after a short bound: generous, so that a busy
// machine cannot fail the test, yet far below "never".
const closeWithin = 5 * time.Minute

// testBounds are short bounds injected for the test.
var testBounds = timeouts{ReadHeader: 250 * time.Millisecond, Read: 250 * time.Millisecond, Idle: 250 * time.Millisecond}

// startServer serves h on a loopback port with the test bounds.
func startServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(h, testBounds)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// testHandler reads the whole body of /echo, and streams eight events
// from /stream, each after a pause of half the read bound, so the stream
// outlasts every bound; it stops early if the request's context ends.
func testHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "could not read the body", http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "read %d bytes", len(b))
	})
	mux.HandleFunc("POST /stream", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "could not read the body", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 8 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(testBounds.Read / 2):
			}
			fmt.Fprintf(w, "data: %d\n\n", i)
			http.NewResponseController(w).Flush()
		}
	})
	return mux
}

// expectClosed reads from conn until the server closes it, failing if it
// is still open after closeWithin.
func expectClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(closeWithin))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server still holds the connection after %s", closeWithin)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestServerCutsSlowClients checks that a client cannot hold a connection
// by sending its request slowly or by idling between requests.
func TestServerCutsSlowClients(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testHandler())
	tests := []struct {
		name string
		send func(t *testing.T, conn net.Conn)
	}{
		{"header never finished", func(t *testing.T, conn net.Conn) {
			_, _ = io.WriteString(conn, "POST /echo HTTP/1.1\r\nHost: x\r\n")
		}},
		{"body of 10 bytes stops after 1", func(t *testing.T, conn net.Conn) {
			_, _ = io.WriteString(conn, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nx")
		}},
		{"body dripped a byte at a time", func(t *testing.T, conn net.Conn) {
			_, _ = io.WriteString(conn, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
			go func() {
				for {
					time.Sleep(testBounds.Read / 10)
					if _, err := conn.Write([]byte("x")); err != nil {
						return
					}
				}
			}()
		}},
		{"idle keep-alive after a request", func(t *testing.T, conn net.Conn) {
			_, _ = io.WriteString(conn, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || string(b) != "read 2 bytes" || resp.Close {
				t.Fatalf("first request: %d %q (close %v), want a kept-alive 200", resp.StatusCode, b, resp.Close)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn := dial(t, addr)
			tt.send(t, conn)
			expectClosed(t, conn)
		})
	}
}

// TestServerKeepsLongStreams checks that the bounds on reading a request
// do not cut a response that outlasts them: the chat stream runs for up
// to 600 s.
func TestServerKeepsLongStreams(t *testing.T) {
	t.Parallel()
	addr := startServer(t, testHandler())
	resp, err := http.Post("http://"+addr+"/stream", "application/json", strings.NewReader(`{"content":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("stream cut after %q: %v", b, err)
	}
	if n := strings.Count(string(b), "data: "); resp.StatusCode != http.StatusOK || n != 8 {
		t.Fatalf("status %d, %d events (%q), want 200 and all 8", resp.StatusCode, n, b)
	}
}
