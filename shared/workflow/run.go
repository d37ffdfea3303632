package workflow

import "time"

// Error codes of the workflow run operations.
const (
	CodeRunNotFound  = "RUN_NOT_FOUND"
	CodeRunNotActive = "RUN_NOT_ACTIVE"
)

// Active reports whether a run in status may still change: pending or
// running.
func Active(status string) bool { return status == RunPending || status == RunRunning }

// CancelRun marks r cancelled at now: its status, completedAt and error,
// and every step not finished (pending or running) cancelled.
func CancelRun(r *Run, now time.Time) {
	markRest(r, StepCancelled)
	r.Status, r.Error = RunCancelled, "the run was cancelled"
	t := now.UTC()
	r.CompletedAt = &t
}
