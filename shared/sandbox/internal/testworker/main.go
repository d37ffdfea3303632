//go:build linux

// Command testworker is a sandbox worker for the tests of package sandbox.
// Its requests are commands:
//
//	echo TEXT     answers TEXT
//	pid           answers its process id
//	env           answers its environment, one variable a line
//	spin          loops forever, ignoring its deadline
//	ctx           waits for its deadline and answers the context's error
//	burn MS       uses MS milliseconds of CPU time, then answers "burnt"
//	alloc MIB     allocates and touches MIB MiB, then answers "allocated"
//	recurse       recurses without end (a stack overflow)
//	big N         answers N bytes
//	hold PATH     creates PATH.started, waits for the file PATH to exist,
//	              then answers "released"
//	touch PATH    creates the file PATH, then answers "touched"
//	exit CODE     exits with CODE
//	threads N     starts N more OS threads, which it keeps, then answers
//	              "threads"
//
// It links package net, as the service's binaries do, so that a local
// build (cgo enabled) links C like theirs: its threads then cost what
// theirs do in address space.
package main

import (
	"context"
	"fmt"
	_ "net" // see the package comment
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/workflowchat/service/shared/sandbox"
)

var sink [][]byte

func main() {
	if !sandbox.IsWorker() {
		fmt.Fprintln(os.Stderr, "usage: testworker "+sandbox.WorkerArg)
		os.Exit(2)
	}
	sandbox.ServeWorker(handle)
}

func handle(ctx context.Context, req []byte) []byte {
	cmd, arg, _ := strings.Cut(string(req), " ")
	n, _ := strconv.Atoi(arg)
	switch cmd {
	case "echo":
		return []byte(arg)
	case "pid":
		return []byte(strconv.Itoa(os.Getpid()))
	case "env":
		return []byte(strings.Join(os.Environ(), "\n"))
	case "spin":
		for x := 0; ; x++ {
			_ = x
		}
	case "ctx":
		<-ctx.Done()
		return []byte(ctx.Err().Error())
	case "burn":
		start := cpuTime()
		for cpuTime()-start < time.Duration(n)*time.Millisecond {
		}
		return []byte("burnt")
	case "alloc":
		for range n {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			sink = append(sink, b)
		}
		sink = nil
		return []byte("allocated")
	case "recurse":
		return []byte(strconv.Itoa(recurse(1)))
	case "big":
		return make([]byte, n)
	case "hold":
		if err := os.WriteFile(arg+".started", nil, 0o600); err != nil {
			return []byte(err.Error())
		}
		for {
			if _, err := os.Stat(arg); err == nil {
				return []byte("released")
			}
			time.Sleep(5 * time.Millisecond)
		}
	case "touch":
		if err := os.WriteFile(arg, nil, 0o600); err != nil {
			return []byte(err.Error())
		}
		return []byte("touched")
	case "exit":
		os.Exit(n)
	case "threads":
		for range n {
			started := make(chan struct{})
			go func() {
				runtime.LockOSThread()
				close(started)
				select {} // keeps its thread
			}()
			<-started
		}
		return []byte("threads")
	}
	return []byte("unknown command " + cmd)
}

func recurse(n int) int {
	var pad [1024]byte
	pad[n%1024] = byte(n)
	return recurse(n+1) + int(pad[0])
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
