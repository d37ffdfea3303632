package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// devserverPkg is built by -spawn.
const devserverPkg = "github.com/workflowchat/service/infra/devserver"

// devServer is a dev server process started by -spawn.
type devServer struct {
	cmd  *exec.Cmd
	dir  string
	API  string // http://127.0.0.1:port
	logs *lockedBuffer
	done chan struct{}
	err  error // the exit error, set before done is closed
}

// spawn builds the dev server and starts it on free loopback ports with
// the embedded store and warn-level logs, and waits for its banner.
func spawn(env []string) (*devServer, error) {
	dir, err := os.MkdirTemp("", "load-devserver")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "devserver")
	build := exec.Command("go", "build", "-o", bin, devserverPkg)
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("build the dev server: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	// Per-user rate limits off: each virtual user sends far more than a
	// person would, and the run measures throughput, not the limiter.
	cmd.Env = append(os.Environ(), append([]string{"PORT=0", "MCP_PORT=0", "LOG_LEVEL=warn", "MCP_SERVICE_KEY=", "DYNAMODB_ENDPOINT=", "DATA_FILE=",
		"RATE_LIMIT_MESSAGES=0", "RATE_LIMIT_STREAMS=0", "RATE_LIMIT_RUNS=0",
		"RATE_LIMIT_SIGN_IN_EMAIL=0", "RATE_LIMIT_SIGN_IN_ADDRESS=0", "RATE_LIMIT_SIGN_UP_ADDRESS=0"}, env...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &devServer{cmd: cmd, dir: dir, logs: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = s.logs
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			f := strings.Fields(line)
			switch {
			case strings.HasPrefix(line, "REST API") && len(f) > 0:
				s.API = f[len(f)-1]
			case strings.HasPrefix(line, "Stop with"):
				close(ready)
			}
		}
		s.err = cmd.Wait()
		close(s.done)
	}()
	select {
	case <-ready:
		return s, nil
	case <-s.done:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the dev server exited early: %v\n%s", s.err, s.logs.String())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-s.done
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the dev server did not start in 60 s\n%s", s.logs.String())
	}
}

// Pid is the dev server's process id.
func (s *devServer) Pid() int { return s.cmd.Process.Pid }

// stop sends SIGTERM and waits up to 15 s for a graceful exit (then
// kills). It returns an error unless the process exited cleanly.
func (s *devServer) stop() error {
	defer os.RemoveAll(s.dir)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("the dev server did not stop within 15 s of SIGTERM")
	}
	if s.err != nil {
		return fmt.Errorf("the dev server exited with %v\n%s", s.err, s.logs.String())
	}
	return nil
}

// rssBytes reads a process's resident set size from /proc/<pid>/status.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmRSS(b)
}

// parseVmRSS finds "VmRSS:   12345 kB" in a /proc/<pid>/status file.
func parseVmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "VmRSS" {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("malformed VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed VmRSS line %q", sc.Text())
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS line")
}

// lockedBuffer is a bytes.Buffer safe for a process's writer and readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
