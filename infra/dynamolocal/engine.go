package dynamolocal

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/truora/minidyn/server"
)

// Engine is a running embedded DynamoDB-compatible server on loopback.
// Create it with Start and stop it with Close.
type Engine struct {
	URL     string         // e.g. http://127.0.0.1:43121, usable as the SDK BaseEndpoint
	Backend *server.Server // the minidyn server, exposed for failure emulation in fault tests

	h         *handler
	srv       *http.Server
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu     sync.Mutex
	active map[net.Conn]bool // connections with a request in progress
	idle   *sync.Cond        // signalled when active shrinks
}

// Start listens on 127.0.0.1:0 and serves the translated engine in a
// background goroutine. It fails only if the loopback listener cannot be
// opened.
func Start() (*Engine, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("dynamolocal: listen on loopback: %w", err)
	}
	backend := server.NewServer()
	h := newHandler(backend)
	e := &Engine{
		URL:     "http://" + ln.Addr().String(),
		Backend: backend,
		h:       h,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
		},
		done:   make(chan struct{}),
		active: map[net.Conn]bool{},
	}
	e.idle = sync.NewCond(&e.mu)
	e.srv.ConnState = e.track
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			slog.Error("dynamolocal: serve failed", "url", e.URL, "err", err)
		}
	}()
	return e, nil
}

// Close stops the listener and waits for in-flight requests to finish and
// their responses to be sent; requests arriving meanwhile are refused. It is
// safe to call more than once; later calls return the first result. It fails
// if closing the HTTP server fails.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		// Not http.Server.Shutdown: it counts connections a client opened
		// but never used as busy for 5 seconds.
		e.h.stop()
		e.mu.Lock()
		for len(e.active) > 0 {
			e.idle.Wait()
		}
		e.mu.Unlock()
		if err := e.srv.Close(); err != nil {
			e.closeErr = fmt.Errorf("dynamolocal: close %s: %w", e.URL, err)
		}
		<-e.done
	})
	return e.closeErr
}

// track follows connection states: a connection is active from the first
// byte of a request until its response has been flushed.
func (e *Engine) track(c net.Conn, state http.ConnState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if state == http.StateActive {
		e.active[c] = true
		return
	}
	delete(e.active, c)
	e.idle.Broadcast()
}

// WithBackend runs fn while no request is being served, so fn can call
// Backend methods (EmulateFailure, Reset, ...) without racing minidyn's
// unsynchronized state. Cached key schemas are dropped afterwards. fn must
// not send requests to the engine (that would deadlock).
func (e *Engine) WithBackend(fn func(backend *server.Server)) {
	e.h.lock.Lock()
	defer e.h.lock.Unlock()
	defer e.h.forgetSchemas()
	fn(e.Backend)
}
