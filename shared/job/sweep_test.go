package job_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/job"
)

// expiredList is a Store whose only expired jobs are a fixed list (the
// sweeper reads nothing else).
type expiredList struct {
	job.Store
	mu    sync.Mutex
	jobs  []job.Expired
	calls int
}

func (l *expiredList) Expired(context.Context, time.Time, int) ([]job.Expired, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	return l.jobs, nil
}

// TestSweepDispatchesByKind: each expired job goes to its kind's handler;
// a kind without a handler and a failing handler are reported together,
// after the others were handled.
func TestSweepDispatchesByKind(t *testing.T) {
	t.Parallel()
	store := &expiredList{jobs: []job.Expired{
		{Ref: job.Ref{Kind: "generation", Collection: "c1", ID: "m1"}},
		{Ref: job.Ref{Kind: "run", Collection: "r1", ID: "r1"}},
		{Ref: job.Ref{Kind: "unknown", Collection: "x", ID: "y"}},
		{Ref: job.Ref{Kind: "run", Collection: "r2", ID: "r2"}},
	}}
	var got []string
	s := job.NewSweeper(store, map[string]job.Handler{
		"generation": func(_ context.Context, e job.Expired) error { got = append(got, "gen:"+e.ID); return nil },
		"run": func(_ context.Context, e job.Expired) error {
			got = append(got, "run:"+e.ID)
			if e.ID == "r2" {
				return errors.New("boom")
			}
			return nil
		},
	}, nil, nil)
	n, err := s.Sweep(context.Background())
	if n != 2 || strings.Join(got, ",") != "gen:m1,run:r1,run:r2" {
		t.Errorf("handled %d: %v", n, got)
	}
	if err == nil || !strings.Contains(err.Error(), `no handler for kind "unknown"`) || !strings.Contains(err.Error(), "boom") {
		t.Errorf("error %v: want both the unknown kind and the failure", err)
	}
}

// TestRunSweepsAtOnce: after a restart the first sweep does not wait a
// whole interval.
func TestRunSweepsAtOnce(t *testing.T) {
	t.Parallel()
	store := &expiredList{}
	s := job.NewSweeper(store, nil, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx, time.Hour) }()
	for {
		store.mu.Lock()
		calls := store.calls
		store.mu.Unlock()
		if calls > 0 {
			break
		}
		time.Sleep(time.Millisecond) // an hour's interval: only the first sweep can end this wait
	}
	cancel()
	<-done
}
