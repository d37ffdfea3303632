package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/eventlog"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/sse"
	"github.com/workflowchat/service/shared/workflow"
)

// StartRunRequest is the body of POST /api/chats/{chatId}/workflow-runs.
type StartRunRequest struct {
	WorkflowID string `json:"workflowId"`
}

// Validate requires workflowId, a UUID.
func (r StartRunRequest) Validate() error {
	var f errs.FieldErrors
	switch {
	case r.WorkflowID == "":
		f.Add("workflowId", "is required")
	case !httpapi.IsUUID(r.WorkflowID):
		f.Add("workflowId", "must be a UUID")
	}
	return f.Err("StartRunRequest")
}

type runsList struct {
	WorkflowRuns []workflow.Run `json:"workflowRuns"`
	NextCursor   string         `json:"nextCursor,omitempty"`
}

// RetryRunRequest is the optional body of POST
// /api/chats/{chatId}/workflow-runs/{runId}/retry.
type RetryRunRequest struct {
	FromStepID string `json:"fromStepId"`
}

// Validate checks fromStepId's form when given.
func (r RetryRunRequest) Validate() error {
	var f errs.FieldErrors
	if r.FromStepID != "" && !workflow.ValidIdent(r.FromStepID) {
		f.Add("fromStepId", "is not a step id")
	}
	return f.Err("RetryRunRequest")
}

// respondAsync reports whether the request asks for an asynchronous
// answer (Prefer: respond-async, RFC 7240).
func respondAsync(r *http.Request) bool {
	for _, v := range r.Header.Values("Prefer") {
		for p := range strings.SplitSeq(v, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(p), ";")
			if strings.EqualFold(strings.TrimSpace(name), "respond-async") {
				return true
			}
		}
	}
	return false
}

// accepted answers 202 with the run and its Location.
func accepted(w http.ResponseWriter, run workflow.Run) {
	w.Header().Set("Location", "/api/chats/"+run.ChatID+"/workflow-runs/"+run.ID)
	w.Header().Set("Preference-Applied", "respond-async")
	httpapi.Respond(w, http.StatusAccepted, run)
}

func handleStartRun(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := httpapi.Decode[StartRunRequest](r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		chatID, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		if !respondAsync(r) {
			run, err := s.Start(r.Context(), chatID, in.WorkflowID)
			if err != nil {
				httpapi.WriteError(w, r, err)
				return
			}
			httpapi.Respond(w, http.StatusCreated, run)
			return
		}
		run, err := s.StartAsync(r.Context(), chatID, in.WorkflowID)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		accepted(w, run)
	})
}

// pathIDs returns the chatId and runId path parameters.
func pathIDs(r *http.Request) (string, string, error) {
	chatID, err := httpapi.PathUUID(r, "chatId")
	if err != nil {
		return "", "", err
	}
	runID, err := httpapi.PathUUID(r, "runId")
	return chatID, runID, err
}

func handleGetRun(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (workflow.Run, error) {
		chatID, runID, err := pathIDs(r)
		if err != nil {
			return workflow.Run{}, err
		}
		return s.Get(r.Context(), chatID, runID)
	})
}

func handleRetryRun(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chatID, runID, err := pathIDs(r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		var in RetryRunRequest
		if r.ContentLength != 0 {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				httpapi.WriteError(w, r, err)
				return
			}
			if len(body) > 0 {
				r.Body = io.NopCloser(bytes.NewReader(body))
				if in, err = httpapi.Decode[RetryRunRequest](r); err != nil {
					httpapi.WriteError(w, r, err)
					return
				}
			}
		}
		run, err := s.Retry(r.Context(), chatID, runID, in.FromStepID)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		accepted(w, run)
	})
}

// MaxFollow bounds one request following a run's events; the client
// resumes with Last-Event-ID.
const MaxFollow = 10 * time.Minute

// followMargin is how long before the host's deadline a follow ends.
const followMargin = 2 * time.Second

// handleRunEvents replays the run's events after Last-Event-ID (or
// ?lastEventId=; from the first without one), then follows them until
// the run's last event.
func handleRunEvents(s *Service, ping time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chatID, runID, err := pathIDs(r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		last, err := eventlog.LastEventID(r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		var after int64
		if last != nil {
			if last.Stream != strings.ToLower(runID) {
				httpapi.WriteError(w, r, errs.E("runs.Events", errs.Invalid, eventlog.CodeInvalidEventID, "the event id is not one of this run's"))
				return
			}
			after = last.Seq
		}
		f, err := s.Events(r.Context(), chatID, runID, after)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		out := sse.NewWriter(w)
		deadline := time.Now().Add(MaxFollow)
		if dl, ok := r.Context().Deadline(); ok && dl.Add(-followMargin).Before(deadline) {
			// In Lambda, end the follow before the invocation's deadline, so
			// that the buffered answer gets out; the client resumes.
			deadline = dl.Add(-followMargin)
		}
		ctx, cancel := context.WithDeadline(r.Context(), deadline)
		pinging := make(chan struct{})
		go func() { defer close(pinging); out.KeepAlive(ctx, ping) }()
		defer func() { cancel(); <-pinging }()
		if err := f.Follow(ctx, func(id string, ev json.RawMessage) error { return out.SendWithID(id, ev) }); err != nil {
			logging.FromContext(ctx).InfoContext(ctx, "run events ended early", "err", err.Error())
		}
	})
}

func handleCancelRun(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (workflow.Run, error) {
		chatID, runID, err := pathIDs(r)
		if err != nil {
			return workflow.Run{}, err
		}
		return s.Cancel(r.Context(), chatID, runID)
	})
}

func handleListRuns(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (runsList, error) {
		chatID, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return runsList{}, err
		}
		page, err := httpapi.ParseCursorPage(r)
		if err != nil {
			return runsList{}, err
		}
		p, err := s.List(r.Context(), chatID, page.Limit, page.After)
		if err != nil {
			return runsList{}, err
		}
		return runsList{WorkflowRuns: p.Runs, NextCursor: p.Next}, nil
	})
}
