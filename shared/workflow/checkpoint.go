package workflow

import (
	"context"
	"time"

	"github.com/workflowchat/service/shared/job"
)

// Checkpoint is one write of a durable run.
type Checkpoint struct {
	// Run is the run as it is to be stored (status, steps, error,
	// completedAt); the write is conditioned on its Attempt being the
	// stored one.
	Run Run
	// IfStatus is the status the stored run must have.
	IfStatus string
	// Events are appended to the run's log, following its last event.
	Events []job.Record
	// End ends the log (the run has finished): it leaves the sweeper's
	// index. Otherwise the lease is renewed to LeaseUntil, when set (zero
	// leaves the lease as it is: a checkpoint need not rewrite it).
	End        bool
	LeaseUntil time.Time
	// ExpiredBefore, when set, also requires the lease to have ended
	// before then (the sweeper's end of a run).
	ExpiredBefore time.Time
	// Values, when set, holds the JSON of Run's values the runner
	// already encoded, so that the record's steps are encoded without
	// encoding them again (EncodeSteps).
	Values *ValueJSON
}

// RunRef names one attempt of a durable run: the Runner's input, and the
// payload of the runner function's asynchronous invocation.
type RunRef struct {
	RunID   string `json:"runId"`
	Attempt int    `json:"attempt"`
}

// Invoker starts a Runner on a run without waiting for it. In AWS it
// invokes the runner function asynchronously; locally it runs the Runner
// in a goroutine. An error means the run was not handed over: its lease
// then expires and the sweeper hands it over again.
type Invoker interface {
	Invoke(ctx context.Context, ref RunRef) error
}
