package dynamolocal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/truora/minidyn/server"
)

// Engine is a running embedded DynamoDB-compatible server on loopback.
// Create it with Start or StartWith and stop it with Close.
type Engine struct {
	URL     string         // e.g. http://127.0.0.1:43121, usable as the SDK BaseEndpoint
	Backend *server.Server // the minidyn server, exposed for failure emulation in fault tests
	// Restored describes the snapshot StartWith restored from
	// Options.DataFile; nil when it restored none.
	Restored *SnapshotInfo

	h         *handler
	srv       *http.Server
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu     sync.Mutex
	active map[net.Conn]bool // connections with a request in progress
	idle   *sync.Cond        // signalled when active shrinks

	opts Options
	// writes counts completed requests that may have changed data (and
	// WithBackend calls), so that unchanged data is not saved again.
	writes       atomic.Int64
	saveMu       sync.Mutex // serializes snapshots
	saved        int64      // writes at the last save to opts.DataFile; guarded by saveMu
	stopSaver    chan struct{}
	saverDone    chan struct{}
	beforeRename func(tmp string) error // test hook, see writeAtomic
}

// readOnlyOps are the operations that never change data.
var readOnlyOps = map[string]bool{"GetItem": true, "BatchGetItem": true, "TransactGetItems": true, "Query": true,
	"Scan": true, "DescribeTable": true, "DescribeTimeToLive": true, "ListTables": true}

// Start listens on 127.0.0.1:0 and serves the translated engine in a
// background goroutine, in memory only. It fails only if the loopback
// listener cannot be opened.
func Start() (*Engine, error) {
	return StartWith(Options{})
}

// StartWith is Start with options: with Options.DataFile, the data is
// restored from that file before the first request is served and saved to
// it periodically and by Close (see Options). It fails if the listener
// cannot be opened, or if the data file exists but cannot be read, is not a
// valid snapshot, or cannot be restored, or if its directory is not
// writable; the error names the file and the reason, and the file is never
// modified then.
func StartWith(o Options) (*Engine, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	var snap *snapshotFile
	if o.DataFile != "" {
		var err error
		if snap, err = openDataFile(o.DataFile); err != nil {
			return nil, err
		}
	}
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
		opts:   o,
	}
	e.idle = sync.NewCond(&e.mu)
	e.srv.ConnState = e.track
	e.srv.Handler = e.countWrites(h)
	if snap != nil {
		if err := h.restore(context.Background(), snap); err != nil {
			ln.Close()
			return nil, fmt.Errorf("dynamolocal: data file %s: restore: %w (the file is left untouched)", o.DataFile, err)
		}
		e.Restored = snap.info(o.DataFile)
		o.Logger.Info("dynamolocal: restored data", "file", o.DataFile, "saved_at", snap.SavedAt,
			"tables", e.Restored.Tables, "items", e.Restored.Items)
	}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			slog.Error("dynamolocal: serve failed", "url", e.URL, "err", err)
		}
	}()
	if o.DataFile != "" && o.Interval > 0 {
		e.stopSaver, e.saverDone = make(chan struct{}), make(chan struct{})
		go e.saveEvery(o.Interval)
	}
	return e, nil
}

// countWrites counts the completed requests that may have changed data.
func (e *Engine) countWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if op, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), targetPrefix); !readOnlyOps[op] {
			e.writes.Add(1)
		}
	})
}

// Close stops the listener and waits for in-flight requests to finish and
// their responses to be sent; requests arriving meanwhile are refused. With
// Options.DataFile it then saves a final snapshot (unless nothing changed
// since the last one). It is safe to call more than once; later calls return
// the first result. It fails if the final snapshot or closing the HTTP
// server fails.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.stopSaving()
		// Not http.Server.Shutdown: it counts connections a client opened
		// but never used as busy for 5 seconds.
		e.h.stop()
		e.mu.Lock()
		for len(e.active) > 0 {
			e.idle.Wait()
		}
		e.mu.Unlock()
		saveErr := e.saveDataFile()
		if err := e.srv.Close(); err != nil {
			e.closeErr = fmt.Errorf("dynamolocal: close %s: %w", e.URL, err)
		}
		<-e.done
		e.closeErr = errors.Join(saveErr, e.closeErr)
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
	defer e.writes.Add(1)
	e.h.lock.Lock()
	defer e.h.lock.Unlock()
	defer e.h.forgetSchemas()
	fn(e.Backend)
}
