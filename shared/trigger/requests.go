package trigger

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/schedule"
)

// CreateRequest is the body of POST /api/workflows/{workflowId}/triggers.
type CreateRequest struct {
	// Type is "schedule" or "webhook".
	Type string `json:"type"`
	// Schedule (required), Timezone (default UTC), Input and Overlap
	// (default skip) are a schedule trigger's.
	Schedule *string         `json:"schedule"`
	Timezone *string         `json:"timezone"`
	Input    json.RawMessage `json:"input"`
	Overlap  *string         `json:"overlap"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled"`
	// Version pins the workflow's version the trigger's runs run
	// (default: the latest at each fire).
	Version *int `json:"version"`
}

// Validate checks the fields that need no state: the type, that each
// field belongs to the type, the schedule and time zone, the overlap, the
// input (a JSON object of at most MaxInputBytes).
func (r CreateRequest) Validate() error {
	var bad errs.FieldErrors
	switch r.Type {
	case TypeSchedule:
		if r.Schedule == nil {
			bad.Add("schedule", "is required for a schedule trigger, e.g. rate(5 minutes) or cron(0 9 ? * MON-FRI *)")
		} else {
			checkSchedule(&bad, *r.Schedule, deref(r.Timezone))
		}
		if r.Timezone != nil && r.Schedule == nil {
			checkSchedule(&bad, "rate(1 minute)", *r.Timezone)
		}
		checkOverlap(&bad, r.Overlap)
		checkInput(&bad, r.Input)
	case TypeWebhook:
		notForWebhooks(&bad, r.Schedule != nil, r.Timezone != nil, r.Input != nil, r.Overlap != nil)
	case "":
		bad.Add("type", "is required: schedule or webhook")
	default:
		bad.Add("type", "must be schedule or webhook, got %q", r.Type)
	}
	checkVersion(&bad, r.Version)
	return bad.Err("trigger.CreateRequest")
}

// UpdateRequest is the body of PATCH
// /api/workflows/{workflowId}/triggers/{triggerId}: the fields to change.
// "input": null removes a schedule trigger's input.
type UpdateRequest struct {
	Type     *string         `json:"type"`
	Schedule *string         `json:"schedule"`
	Timezone *string         `json:"timezone"`
	Input    json.RawMessage `json:"input"`
	Overlap  *string         `json:"overlap"`
	Enabled  *bool           `json:"enabled"`
	// Version pins the workflow's version; JSON null unpins it (the
	// latest at each fire).
	Version json.RawMessage `json:"version"`
}

// pinned returns the version r pins: 0 for null (validated before).
func (r UpdateRequest) pinned() int {
	var v *int
	_ = json.Unmarshal(r.Version, &v)
	if v == nil {
		return 0
	}
	return *v
}

// Validate checks the fields on their own; whether they fit the trigger's
// type is checked against the trigger (validateFor).
func (r UpdateRequest) Validate() error {
	var bad errs.FieldErrors
	if r.Schedule == nil && r.Timezone == nil && r.Input == nil && r.Overlap == nil && r.Enabled == nil && r.Version == nil {
		bad.Add("body", "give at least one of schedule, timezone, input, overlap, enabled, version")
	}
	if r.Version != nil && !isNull(r.Version) {
		var v int
		if err := json.Unmarshal(r.Version, &v); err != nil {
			bad.Add("version", "must be a version number of the workflow (1 to %d), or null for the latest", MaxWorkflowVersion)
		} else {
			checkVersion(&bad, &v)
		}
	}
	if r.Type != nil && *r.Type != TypeSchedule && *r.Type != TypeWebhook {
		bad.Add("type", "must be schedule or webhook, got %q", *r.Type)
	}
	checkOverlap(&bad, r.Overlap)
	if !isNull(r.Input) {
		checkInput(&bad, r.Input)
	}
	return bad.Err("trigger.UpdateRequest")
}

// validateFor checks that the request fits t, and the schedule and time
// zone as they will be.
func (r UpdateRequest) validateFor(t Trigger) error {
	var bad errs.FieldErrors
	if r.Type != nil && *r.Type != t.Type {
		bad.Add("type", "cannot change: create another trigger")
	}
	switch t.Type {
	case TypeWebhook:
		notForWebhooks(&bad, r.Schedule != nil, r.Timezone != nil, r.Input != nil, r.Overlap != nil)
	case TypeSchedule:
		if r.Schedule != nil || r.Timezone != nil {
			expr, tz := t.Schedule, t.Timezone
			if r.Schedule != nil {
				expr = *r.Schedule
			}
			if r.Timezone != nil {
				tz = *r.Timezone
			}
			checkSchedule(&bad, expr, tz)
		}
	}
	return bad.Err("trigger.Update")
}

// RotateRequest is the optional body of POST .../rotate-secret.
type RotateRequest struct {
	// PreviousSecretValidSeconds keeps the previous secret valid that many
	// seconds (0 to 86400; default 0: it stops working at once), so that
	// a sender can switch without dropping calls.
	PreviousSecretValidSeconds *int `json:"previousSecretValidSeconds"`
}

// Validate checks the grace period's bounds.
func (r RotateRequest) Validate() error {
	var bad errs.FieldErrors
	if v := r.PreviousSecretValidSeconds; v != nil && (*v < 0 || *v > int(MaxSecretGrace.Seconds())) {
		bad.Add("previousSecretValidSeconds", "must be an integer from 0 to %d", int(MaxSecretGrace.Seconds()))
	}
	return bad.Err("trigger.RotateRequest")
}

func checkSchedule(bad *errs.FieldErrors, expr, tz string) {
	if _, err := schedule.Parse(expr, tz); err != nil {
		if e, ok := err.(*errs.Error); ok {
			*bad = append(*bad, e.Details...)
			return
		}
		bad.Add("schedule", "%v", err)
	}
}

func checkOverlap(bad *errs.FieldErrors, o *string) {
	if o == nil {
		return
	}
	switch *o {
	case OverlapSkip, OverlapAllow, OverlapBufferOne:
	default:
		bad.Add("overlap", "must be skip, allow or buffer_one, got %q", *o)
	}
}

func checkInput(bad *errs.FieldErrors, raw json.RawMessage) {
	if raw == nil {
		return
	}
	if len(raw) > MaxInputBytes {
		bad.Add("input", "must be at most %d bytes of JSON", MaxInputBytes)
		return
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		bad.Add("input", "must be a JSON object")
	}
}

func notForWebhooks(bad *errs.FieldErrors, schedule, timezone, input, overlap bool) {
	for _, f := range []struct {
		name string
		set  bool
	}{{"schedule", schedule}, {"timezone", timezone}, {"input", input}, {"overlap", overlap}} {
		if f.set {
			bad.Add(f.name, "only schedule triggers have a %s (a webhook call's body is its run's input)", f.name)
		}
	}
}

// decodeInput decodes a validated input; nil for absent or null.
func decodeInput(raw json.RawMessage) (map[string]any, error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errs.Fields("trigger.decodeInput", errs.FieldError{Field: "input", Message: fmt.Sprintf("must be a JSON object: %v", err)})
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// MaxWorkflowVersion bounds a trigger's pinned version (a workflow's
// version numbers are well below it).
const MaxWorkflowVersion = 1_000_000_000

// checkVersion adds the problem of a pinned version, if any.
func checkVersion(bad *errs.FieldErrors, v *int) {
	if v != nil && (*v < 1 || *v > MaxWorkflowVersion) {
		bad.Add("version", "must be a version number of the workflow (1 to %d)", MaxWorkflowVersion)
	}
}
