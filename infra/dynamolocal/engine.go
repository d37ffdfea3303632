package dynamolocal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/truora/minidyn/server"
)

// Engine is a running embedded DynamoDB-compatible server on loopback.
// Create it with Start or StartWith and stop it with Close.
type Engine struct {
	URL string // e.g. http://127.0.0.1:43121, usable as the SDK BaseEndpoint
	// Backend is the minidyn server, exposed for failure emulation in
	// fault tests: change it only through WithBackend (the engine asks it
	// for emulated failures only once WithBackend has run).
	Backend *server.Server
	// Restored describes the snapshot StartWith restored from
	// Options.DataFile and the journaled writes it replayed after it; nil
	// when it restored nothing.
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
	lock *os.File // holds DataFile's lock file
	// writes counts changes that bypass the journal (WithBackend,
	// Restore), so that the next snapshot saves them.
	writes       atomic.Int64
	saveMu       sync.Mutex // serializes snapshots
	saved        int64      // writes at the last snapshot of the data file; guarded by saveMu
	savedLSN     uint64     // journal lsn the data file holds; guarded by saveMu
	stopSaver    chan struct{}
	saverDone    chan struct{}
	beforeRename func(tmp string) error // test hook, see writeAtomic
	// beforeCompact, a test hook, runs after a snapshot of the data file
	// is written and before the journal is compacted; its error stops
	// the compaction.
	beforeCompact func() error
}

// errInUse is lockFile's answer when another process holds the lock.
var errInUse = errors.New("in use by another process")

// journalAdvice tells how to get past damage err in the journal at
// jpath, knowingly.
func journalAdvice(err error, jpath, dataFile string) string {
	ce, ok := errors.AsType[*corruptError](err)
	if !ok {
		return "fix the journal"
	}
	if ce.offset >= int64(len(journalMagic)) {
		return fmt.Sprintf("to start with the writes journaled before the damaged record, losing it and those after it, cut the journal there: truncate -s %d %s", ce.offset, jpath)
	}
	return fmt.Sprintf("if only its header is damaged, restore its first %d bytes to %q; to start from %s alone, losing the writes journaled since, replace the journal by its header only: printf %q > %s",
		len(journalMagic), journalMagic, dataFile, journalMagic, jpath)
}

// journalPath is where the journal of a data file is kept.
func journalPath(dataFile string) string { return dataFile + ".journal" }

func lockPath(dataFile string) string { return dataFile + ".lock" }

// Start listens on 127.0.0.1:0 and serves the translated engine in a
// background goroutine, in memory only. It fails only if the loopback
// listener cannot be opened.
func Start() (*Engine, error) {
	return StartWith(Options{})
}

// StartWith is Start with options: with Options.DataFile, the data is
// restored from that file and its journal before the first request is
// served, and every write is journaled (see Options). It fails if the
// listener cannot be opened; if another engine uses the data file; if the
// data file or the journal cannot be read or is damaged (a changed or cut
// snapshot, a journal record that fails its checksum, an empty or
// headerless journal, a journal missing beside a snapshot saved with
// one; a record cut short at the end of the journal, left by a crash
// while appending, is not: it is dropped); if they cannot be restored or
// replayed; or if the directory is not writable. The error names the
// file, the byte offset of damage and the reason, and the files are
// never modified then. A data file of an earlier format (no checksum) is
// rewritten in the current one before serving.
func StartWith(o Options) (e *Engine, err error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	var (
		snap      *snapshotFile
		recs      []journalRecord
		end       int64
		torn      *tornTail
		jexists   = true
		lock      *os.File
		jpath     = journalPath(o.DataFile)
		untouched = "the files are left untouched"
	)
	if o.DataFile != "" {
		if err := os.MkdirAll(filepath.Dir(o.DataFile), 0o755); err != nil {
			return nil, fmt.Errorf("dynamolocal: data file %s: %w", o.DataFile, err)
		}
		if lock, err = lockFile(lockPath(o.DataFile)); err != nil {
			return nil, fmt.Errorf("dynamolocal: data file %s: %w (lock %s)", o.DataFile, err, lockPath(o.DataFile))
		}
		defer func() {
			if err != nil {
				lock.Close()
				os.Remove(lockPath(o.DataFile))
			}
		}()
		if snap, err = openDataFile(o.DataFile); err != nil {
			return nil, err
		}
		recs, end, torn, err = readJournal(jpath)
		switch {
		case errors.Is(err, fs.ErrNotExist) && snap != nil && snap.Journal:
			return nil, fmt.Errorf("dynamolocal: journal %s is missing, but %s was saved with one (holding the writes after write %d): the writes journaled since the snapshot would be lost (%s; if it was removed on purpose, start from %s alone by recreating the journal with its header only: printf %q > %s)",
				jpath, o.DataFile, snap.JournalLSN, untouched, o.DataFile, journalMagic, jpath)
		case errors.Is(err, fs.ErrNotExist):
			jexists, err = false, nil // first start, or a snapshot saved without a journal
		case err != nil:
			return nil, fmt.Errorf("dynamolocal: journal %s: %w (%s: %s)", jpath, err, untouched, journalAdvice(err, jpath, o.DataFile))
		}
	}
	var snapLSN uint64
	if snap != nil {
		snapLSN = snap.JournalLSN
	}
	// The records the snapshot does not hold must follow it.
	first := 0
	for first < len(recs) && recs[first].lsn <= snapLSN {
		first++
	}
	if first < len(recs) && recs[first].lsn != snapLSN+1 {
		return nil, fmt.Errorf("dynamolocal: journal %s: the record at offset %d continues from write %d but %s holds writes up to %d: writes are missing (%s)",
			jpath, recs[first].offset, recs[first].lsn-1, o.DataFile, snapLSN, untouched)
	}
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dynamolocal: listen on %s: %w", addr, err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	backend := server.NewServer()
	h := newHandler(backend)
	var served http.Handler = h
	if o.Wrap != nil {
		served = o.Wrap(h)
	}
	e = &Engine{
		URL:     "http://" + ln.Addr().String(),
		Backend: backend,
		h:       h,
		srv: &http.Server{
			Handler:           served,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
		},
		done:     make(chan struct{}),
		active:   map[net.Conn]bool{},
		opts:     o,
		lock:     lock,
		savedLSN: snapLSN,
	}
	e.idle = sync.NewCond(&e.mu)
	e.srv.ConnState = e.track
	ctx := context.Background()
	if snap != nil {
		if err := h.restore(ctx, snap); err != nil {
			return nil, fmt.Errorf("dynamolocal: data file %s: restore: %w (%s)", o.DataFile, err, untouched)
		}
		e.Restored = snap.info(o.DataFile)
	}
	last := snapLSN
	for _, r := range recs[first:] {
		rep, err := h.dispatch(ctx, r.Op, r.Body, "us-east-1")
		if err == nil && rep.status != http.StatusOK {
			err = errors.New(string(rep.body))
		}
		if err != nil {
			return nil, fmt.Errorf("dynamolocal: journal %s: the record at offset %d (write %d, %s) cannot be replayed: %v (%s)",
				jpath, r.offset, r.lsn, r.Op, err, untouched)
		}
		last = r.lsn
	}
	if replayed := len(recs) - first; replayed > 0 {
		if e.Restored == nil {
			e.Restored = &SnapshotInfo{Path: o.DataFile}
		}
		e.Restored.Replayed = replayed
	}
	if r := e.Restored; r != nil {
		o.Logger.Info("dynamolocal: restored data", "file", o.DataFile, "saved_at", r.SavedAt,
			"tables", r.Tables, "items", r.Items, "journaled_writes", r.Replayed)
	}
	if o.DataFile != "" {
		j, err := openJournal(jpath, jexists, end, last)
		if err != nil {
			return nil, fmt.Errorf("dynamolocal: journal %s: %w", jpath, err)
		}
		h.journal = j
		if torn != nil {
			o.Logger.Warn("dynamolocal: dropped a torn last journal record (a write cut short by a crash, never answered)",
				"journal", jpath, "offset", torn.offset, "bytes", torn.bytes)
		}
		// A journal that ends before its snapshot (a crash after the
		// snapshot was written, before the last write it holds reached
		// the journal) is emptied of those records, so that the next
		// write's record follows the journal's last one.
		if n := len(recs); n > 0 && recs[n-1].lsn < snapLSN {
			if err := j.compact(j.mark()); err != nil {
				j.close()
				return nil, fmt.Errorf("dynamolocal: %w", err)
			}
		}
		// A snapshot of an earlier format (no checksum), or one saved
		// without a journal, is rewritten now, bound to its journal.
		if snap != nil && (snap.Version != snapshotVersion || !snap.Journal) {
			e.saveMu.Lock()
			_, err := e.compactLocked()
			e.saveMu.Unlock()
			if err != nil {
				j.close()
				return nil, fmt.Errorf("dynamolocal: data file %s: rewrite in the current format: %w", o.DataFile, err)
			}
			o.Logger.Info("dynamolocal: rewrote the data file in the current, checksummed format", "file", o.DataFile, "from_version", snap.Version)
		}
	}
	if e.Restored != nil {
		// The restore read the whole snapshot and journal and decoded
		// them: garbage of several times the items' size, which the
		// runtime would hand back to the system only slowly (the
		// process started at about 7.6 times its snapshot's bytes, 2.8
		// of them live). Given back now, once: the process starts at
		// about what its items hold.
		snap, recs = nil, nil
		debug.FreeOSMemory()
	}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			slog.Error("dynamolocal: serve failed", "url", e.URL, "err", err)
		}
	}()
	if o.DataFile != "" {
		e.stopSaver, e.saverDone = make(chan struct{}), make(chan struct{})
		go e.saveEvery(o.Interval)
	}
	return e, nil
}

// Close stops the listener and waits for in-flight requests to finish and
// their responses to be sent; requests arriving meanwhile are refused. With
// Options.DataFile it then saves a final snapshot (unless nothing changed
// since the last one) and compacts the journal to its header. It is safe to
// call more than once; later calls return the first result. It fails if
// the final snapshot (the journal is kept then: nothing is lost) or
// closing the HTTP server fails.
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
		if j := e.h.journal; j != nil {
			saveErr = errors.Join(saveErr, j.close())
			// The journal stays, with its header, beside the snapshot;
			// one that never held a write and has no snapshot (nothing
			// was ever saved) is removed, as if never started.
			if _, err := os.Stat(e.opts.DataFile); saveErr == nil && errors.Is(err, fs.ErrNotExist) && j.lastLSN() == 0 {
				saveErr = os.Remove(j.path)
			}
		}
		if err := e.srv.Close(); err != nil {
			e.closeErr = fmt.Errorf("dynamolocal: close %s: %w", e.URL, err)
		}
		<-e.done
		if e.lock != nil {
			os.Remove(e.lock.Name())
			e.lock.Close()
		}
		e.closeErr = errors.Join(saveErr, e.closeErr)
	})
	return e.closeErr
}

// crash stops the engine as a killed process would: no final snapshot,
// journal records not yet written are lost, the lock is released and its
// file left behind. Tests use it to check what survives a crash.
func (e *Engine) crash() {
	e.closeOnce.Do(func() {
		e.stopSaving()
		if j := e.h.journal; j != nil {
			j.crash()
		}
		e.srv.Close()
		<-e.done
		e.h.stop()
		if e.lock != nil {
			e.lock.Close()
		}
	})
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
// Backend methods (EmulateFailure, EmulateUnprocessedItems, Reset, ...)
// without racing minidyn's unsynchronized state. The items are the
// layer's, not minidyn's (its tables stay empty): afterwards the layer
// drops the tables minidyn no longer has (Reset, DeleteTable) with their
// items and re-keys a table whose indexes changed; minidyn's data methods
// (ClearTable, ClearAllTables) change nothing. Changes fn makes are not
// journaled; with Options.DataFile the next snapshot saves them. fn must
// not send requests to the engine (that would deadlock).
func (e *Engine) WithBackend(fn func(backend *server.Server)) {
	e.h.probe.Store(true) // fn may emulate failures: probeFailure asks from now on
	defer e.writes.Add(1)
	e.h.lock.Lock()
	defer e.h.lock.Unlock()
	defer func() {
		if err := e.h.reconcile(context.Background()); err != nil {
			e.opts.Logger.Error("dynamolocal: after WithBackend", "err", err)
		}
	}()
	fn(e.Backend)
}
