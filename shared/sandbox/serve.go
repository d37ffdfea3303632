package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
)

// Handler answers one request in a worker. ctx carries the evaluation's
// deadline; a handler that ignores it is killed by the pool when it
// passes. A handler should recover its own panics: an unrecovered one ends
// the worker, and the pool reports a CrashError.
type Handler func(ctx context.Context, request []byte) []byte

// IsWorker reports whether this process was started as a worker (its first
// argument is WorkerArg). A binary that serves a Pool's workers calls
// ServeWorker at the top of main when it does.
func IsWorker() bool {
	return len(os.Args) > 1 && os.Args[1] == WorkerArg
}

// SelfPath returns the program that starts this binary again: on Linux
// /proc/self/exe, which holds even when the file has since been replaced,
// elsewhere os.Executable.
func SelfPath() (string, error) {
	return selfPath()
}

// ServeWorker runs this process as a worker of a Pool and never returns.
// It puts its limits in place (the environment the pool set says which),
// reports them, then answers requests from stdin on stdout with h, one at
// a time, until the pool closes stdin: then it exits with status 0. It
// exits with status 1 when its environment is not a pool's or its limits
// cannot be set (after reporting that to the pool).
func ServeWorker(h Handler) {
	mem, cpu, maxResp, err := workerConfig(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox worker:", err)
		os.Exit(1)
	}
	runtime.GOMAXPROCS(1)
	keep, claimed, base, err := claimHeapRemainder()
	// The soft heap limit makes the collector work hard well before the
	// kernel's limit (the claimed blocks count in the heap but are not
	// resident); a stack over a quarter of the memory is an error rather
	// than an address space exhausted by copying.
	debug.SetMemoryLimit(mem/2 + claimed)
	debug.SetMaxStack(int(min(mem/4, 1<<30)))
	hi := applyLimits(mem, cpu, base)
	hi.HeapClaimed = claimed
	if err != nil {
		hi.Error = "claim the heap's first arena: " + err.Error()
	}
	b, _ := json.Marshal(hi)
	if err := writeResponse(os.Stdout, response{status: statusHello, payload: b}); err != nil || hi.Error != "" {
		os.Exit(1)
	}
	if err := serve(os.Stdin, os.Stdout, h, maxResp); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox worker:", err)
		os.Exit(1)
	}
	runtime.KeepAlive(keep)
	os.Exit(0)
}

// workerConfig reads the limits a pool passes to its workers.
func workerConfig(getenv func(string) string) (mem int64, cpu time.Duration, maxResp int, err error) {
	num := func(name string) int64 {
		n, e := strconv.ParseInt(getenv(name), 10, 64)
		if e != nil || n <= 0 {
			err = errors.Join(err, fmt.Errorf("%s=%q: want a positive integer (this program serves a sandbox pool; it is not meant to be started by hand)", name, getenv(name)))
		}
		return n
	}
	mem = num(envMemory)
	cpu = time.Duration(num(envCPULimit)) * time.Second
	maxResp = int(num(envMaxResponse))
	return mem, cpu, maxResp, err
}

// serve answers requests until r ends.
func serve(r io.Reader, w io.Writer, h Handler, maxResponse int) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		timeout, payload, err := readRequest(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if timeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, timeout)
		}
		out := h(ctx, payload)
		cancel()
		res := response{status: statusOK, payload: out}
		if len(out) > maxResponse {
			res = response{status: statusTooLarge}
		}
		res.cpu, res.peakRSS = usage()
		if err := writeResponse(w, res); err != nil {
			return err
		}
	}
}
