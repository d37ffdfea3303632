// Command load drives the dev server with a realistic mix of requests at
// a fixed concurrency for a fixed time, checks every response, and reports
// throughput and p50/p99/p999 per route, each p50 also as a ratio to the
// floor route's (GET /api/liveness: the full middleware stack, no
// storage), so that the figures mean something on a noisy machine.
//
//	go run ./infra/load -spawn -c 8 -d 20s           # builds and starts its own dev server
//	go run ./infra/load -url http://127.0.0.1:3000   # a dev server started with `make run`
//	go run ./infra/load -spawn -soak -d 5m           # soak: low concurrency, watches RSS
//
// Each virtual user signs up (setup), creates two chats, makes one pass
// over every operation, then loops over a weighted mix: the session,
// listing chats, creating chats (deleting the oldest), sending messages
// to the built-in model (one in four asks it to run json_query), streaming
// replies (events parsed with go-sse, checked for start...end order and
// ids, then read back from the message list), listing messages, the tool
// catalog, liveness, and now and then signing out and in again. It also
// (unless -workflows=false) creates a workflow, has its assistant propose a
// json_query step, applies the proposal, runs the workflow from a chat,
// and deletes it.
//
// A spawned dev server runs with the per-user rate limits off
// (RATE_LIMIT_*=0); start one for -url the same way, or the users are
// answered 429 after 30 messages a minute, which counts as incorrect.
//
// It talks to loopback addresses only, stops by itself, and exits 1 when
// any response was incorrect (or, in soak mode, memory kept growing).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// config is what a run needs.
type config struct {
	URL         string
	Spawn       bool
	Concurrency int
	Duration    time.Duration
	Workflows   bool
	Soak        bool
	RSSInterval time.Duration
	Warmup      time.Duration // soak: RSS growth is measured from here
	Env         []string      // extra environment for a spawned dev server
	Log         func(format string, args ...any)
}

func main() {
	cfg := config{Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "load: "+f+"\n", a...) }}
	flag.StringVar(&cfg.URL, "url", "http://127.0.0.1:3000", "base URL of a running dev server (loopback only); ignored with -spawn")
	flag.BoolVar(&cfg.Spawn, "spawn", false, "build and start a dev server on free ports, and stop it (SIGTERM) at the end")
	flag.IntVar(&cfg.Concurrency, "c", 8, "virtual users (soak default: 2)")
	flag.DurationVar(&cfg.Duration, "d", 20*time.Second, "how long to run the mix (soak default: 2m)")
	flag.BoolVar(&cfg.Workflows, "workflows", true, "include the workflow journey (create, propose, apply, run, delete) in the mix")
	flag.BoolVar(&cfg.Soak, "soak", false, "soak: run longer at low concurrency and fail if the dev server's RSS keeps growing after warm-up (needs -spawn)")
	flag.DurationVar(&cfg.RSSInterval, "rss-interval", 2*time.Second, "how often to sample the spawned dev server's RSS")
	flag.DurationVar(&cfg.Warmup, "warmup", 0, "soak: warm-up before the RSS baseline (default: a quarter of -d)")
	out := flag.String("out", "", "write the markdown report here instead of stdout")
	jsonOut := flag.String("json", "", "also write the report as JSON here")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.Soak {
		if !set["c"] {
			cfg.Concurrency = 2
		}
		if !set["d"] {
			cfg.Duration = 2 * time.Minute
		}
	}

	rep, err := run(cfg)
	if err != nil && rep == nil {
		cfg.Log("%v", err)
		os.Exit(2)
	}
	w := os.Stdout
	if *out != "" {
		f, ferr := os.Create(*out)
		if ferr != nil {
			cfg.Log("%v", ferr)
			os.Exit(2)
		}
		defer f.Close()
		w = f
	}
	if werr := rep.WriteMarkdown(w); werr != nil {
		cfg.Log("%v", werr)
		os.Exit(2)
	}
	if *jsonOut != "" {
		f, ferr := os.Create(*jsonOut)
		if ferr == nil {
			ferr = rep.WriteJSON(f)
			f.Close()
		}
		if ferr != nil {
			cfg.Log("%v", ferr)
			os.Exit(2)
		}
	}
	if err != nil {
		cfg.Log("FAILED: %v", err)
		os.Exit(1)
	}
	cfg.Log("ok: %d requests, %d incorrect", rep.Total.Count, rep.Total.Errors)
}

// run performs one load (or soak) run. It returns the report, and an error
// when any response was incorrect, a route of the mix was never reached,
// memory failed the soak check, or the spawned server did not stop
// cleanly. A nil report means the run could not take place at all.
func run(cfg config) (*Report, error) {
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	if cfg.Concurrency < 1 || cfg.Duration <= 0 {
		return nil, errors.New("-c must be at least 1 and -d positive")
	}
	if cfg.Soak && !cfg.Spawn {
		return nil, errors.New("-soak needs -spawn: it samples the dev server process's RSS")
	}
	base := strings.TrimRight(cfg.URL, "/")
	var srv *devServer
	if cfg.Spawn {
		cfg.Log("building and starting the dev server")
		var err error
		if srv, err = spawn(cfg.Env); err != nil {
			return nil, err
		}
		base = srv.API
		cfg.Log("dev server at %s (pid %d)", base, srv.Pid())
	} else if err := checkLoopback(base); err != nil {
		return nil, err
	}
	rep, err := drive(cfg, base, srv)
	if srv != nil {
		if serr := srv.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	return rep, err
}

// checkLoopback refuses any base URL that is not plain http on loopback.
func checkLoopback(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("-url %q: want http://127.0.0.1:PORT", base)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-url %q: the load generator only talks to loopback addresses", base)
	}
	return nil
}

func drive(cfg config, base string, srv *devServer) (*Report, error) {
	transport := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        4 * cfg.Concurrency,
		MaxIdleConnsPerHost: 4 * cfg.Concurrency,
		IdleConnTimeout:     30 * time.Second,
	}
	defer transport.CloseIdleConnections()
	if err := waitLive(base, transport); err != nil {
		return nil, err
	}
	rec := NewRecorder()
	idb := make([]byte, 4)
	_, _ = rand.Read(idb)
	runID := hex.EncodeToString(idb)

	// Setup: every user signs up and creates its chats, concurrently.
	cfg.Log("setting up %d virtual users", cfg.Concurrency)
	users := make([]*vu, cfg.Concurrency)
	setupErrs := make([]error, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range users {
		users[i] = newVU(i, base, runID, rec, transport)
		wg.Go(func() { setupErrs[i] = users[i].setup() })
	}
	wg.Wait()
	var ready []*vu
	for i, u := range users {
		if setupErrs[i] == nil {
			ready = append(ready, u)
		}
	}

	// Stop early, with a report, on Ctrl+C.
	stop := make(chan struct{})
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	go func() {
		<-ctx.Done()
		close(stop)
	}()

	warmup := cfg.Warmup
	if warmup <= 0 {
		warmup = cfg.Duration / 4
	}
	start := time.Now()
	var samples []MemorySample
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	if srv != nil {
		interval := cfg.RSSInterval
		if interval <= 0 {
			interval = 2 * time.Second
		}
		go func() {
			samples = sampleRSS(srv.Pid(), start, interval, stopSampling)
			close(sampled)
		}()
	}
	cfg.Log("running %d users for %v", len(ready), cfg.Duration)
	deadline := start.Add(cfg.Duration)
	ops := mix(cfg.Workflows)
	for _, u := range ready {
		wg.Go(func() { u.loop(deadline, ops, stop) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	if srv != nil {
		close(stopSampling)
		<-sampled
	}

	rep := rec.Report(elapsed, floorRoute, routeOrder)
	rep.Started = start.UTC()
	rep.Concurrency = cfg.Concurrency
	rep.Workflows = cfg.Workflows
	rep.Notes = append(rep.Notes, fmt.Sprintf("`%s` is setup (once per user, argon2id hashing), outside the timed loop; its req/s is over the loop's duration.", routeSignUp))
	if srv != nil {
		rep.Memory = evaluateMemory(samples, warmup, cfg.Soak)
	}
	var errs []error
	if n := rep.Total.Errors; n > 0 {
		errs = append(errs, fmt.Errorf("%d incorrect responses", n))
	}
	for i, err := range setupErrs {
		if err != nil {
			errs = append(errs, fmt.Errorf("user %d setup: %w", i, err))
		}
	}
	select {
	case <-stop:
		rep.Notes = append(rep.Notes, "Interrupted before the end of the run.")
	default:
		if missing := missingRoutes(rep, cfg.Workflows); len(missing) > 0 {
			errs = append(errs, fmt.Errorf("routes never exercised: %s", strings.Join(missing, ", ")))
		}
	}
	if rep.Memory != nil && rep.Memory.Failed {
		errs = append(errs, errors.New(rep.Memory.Summary()))
	}
	return &rep, errors.Join(errs...)
}

// waitLive waits up to 10 s for GET /api/liveness to answer 200.
func waitLive(base string, transport http.RoundTripper) error {
	c := &http.Client{Transport: transport, Timeout: 2 * time.Second}
	var last error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		resp, err := c.Get(base + "/api/liveness")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
	}
	return fmt.Errorf("%s/api/liveness is not answering: %v", base, last)
}
