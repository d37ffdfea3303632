package runs

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/workflow"
)

// StartRunRequest is the body of POST /api/chats/{chatId}/workflow-runs:
// the workflow and the run's input (checked against its inputSchema).
type StartRunRequest struct {
	WorkflowID string         `json:"workflowId"`
	Input      map[string]any `json:"input"`
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

// RespondRequest is the body of POST .../runs/{runId}/steps/{stepId}/respond:
// a person's answer to a human step.
type RespondRequest struct {
	Approved *bool          `json:"approved"`
	Values   map[string]any `json:"values"`
}

// Validate requires approved.
func (r RespondRequest) Validate() error {
	var f errs.FieldErrors
	if r.Approved == nil {
		f.Add("approved", "is required (true or false)")
	}
	return f.Err("RespondRequest")
}

// handleRespond answers a waiting human step: 202 with the run, which
// goes on in the runner.
func handleRespond(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc, runID, err := pathIDs(r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		stepID := r.PathValue("stepId")
		if !workflow.ValidIdent(stepID) {
			httpapi.WriteError(w, r, errs.E("workflow.RespondStep", errs.Invalid, "INVALID_ID", "stepId is not a step id"))
			return
		}
		in, err := httpapi.Decode[RespondRequest](r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		run, err := s.Respond(r.Context(), sc, runID, stepID, Answer{Approved: *in.Approved, Values: in.Values})
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		w.Header().Set("Location", sc.Location(run.ID))
		httpapi.Respond(w, http.StatusAccepted, run)
	})
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

// accepted answers 202 with the run and its Location in the scope of the
// request.
func accepted(w http.ResponseWriter, sc Scope, run workflow.Run) {
	w.Header().Set("Location", sc.Location(run.ID))
	w.Header().Set("Preference-Applied", "respond-async")
	httpapi.Respond(w, http.StatusAccepted, run)
}

// WorkflowRunRequest is the body of POST /api/workflows/{workflowId}/runs:
// the run's input (checked against the workflow's inputSchema), if any.
type WorkflowRunRequest struct {
	Input map[string]any `json:"input"`
}

// handleStartRun starts a durable run in the chat of the path, of the
// body's workflow (the path checked before the body is read); see
// answerStart.
func handleStartRun(s *Service, wait time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chatID, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		in, err := httpapi.Decode[StartRunRequest](r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		answerStart(w, r, s, Scope{ChatID: chatID}, StartRequest{ChatID: chatID, WorkflowID: in.WorkflowID, Input: in.Input}, wait)
	})
}

// handleStartWorkflowRun starts a durable run of the path's workflow
// with no chat (trigger manual): its id's form is checked before the body
// is read, the workflow's existence and owner by Start (the order of
// every route: 400, then 404, then 403); the body may be left out (no
// input); see answerStart.
func handleStartWorkflowRun(s *Service, wait time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		workflowID, err := httpapi.PathUUID(r, "workflowId")
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		in, err := httpapi.DecodeOptional[WorkflowRunRequest](r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		answerStart(w, r, s, Scope{WorkflowID: workflowID}, StartRequest{WorkflowID: workflowID, Input: in.Input}, wait)
	})
}

// answerStart starts req's durable run and answers in the scope sc. With
// Prefer: respond-async it answers 202 at once; otherwise it waits for
// the run up to wait: 201 with the finished run, else 202 with where to
// follow it (the run goes on either way).
func answerStart(w http.ResponseWriter, r *http.Request, s *Service, sc Scope, req StartRequest, wait time.Duration) {
	run, err := s.Start(r.Context(), req)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if respondAsync(r) {
		accepted(w, sc, run)
		return
	}
	done, finished, err := s.Wait(r.Context(), run.ID, wait)
	switch {
	case err != nil:
		httpapi.WriteError(w, r, err)
	case finished:
		httpapi.Respond(w, http.StatusCreated, done)
	default:
		accepted(w, sc, done)
	}
}

// pathScope returns the scope of a run route: its chatId, or its
// workflowId, path parameter. Invalid INVALID_ID when it is malformed.
func pathScope(r *http.Request) (Scope, error) {
	if r.PathValue("chatId") != "" {
		id, err := httpapi.PathUUID(r, "chatId")
		return Scope{ChatID: id}, err
	}
	id, err := httpapi.PathUUID(r, "workflowId")
	return Scope{WorkflowID: id}, err
}

// pathIDs returns the scope and the runId path parameter.
func pathIDs(r *http.Request) (Scope, string, error) {
	sc, err := pathScope(r)
	if err != nil {
		return Scope{}, "", err
	}
	runID, err := httpapi.PathUUID(r, "runId")
	return sc, runID, err
}

func handleGetRun(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (workflow.Run, error) {
		sc, runID, err := pathIDs(r)
		if err != nil {
			return workflow.Run{}, err
		}
		return s.Get(r.Context(), sc, runID)
	})
}

func handleRetryRun(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc, runID, err := pathIDs(r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		var in RetryRunRequest
		if r.ContentLength != 0 {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpapi.MaxBodyBytes))
			if err != nil {
				// Over the limit: 413 (httpapi.WriteError names it).
				httpapi.WriteError(w, r, errs.E("runs.handleRetryRun", errs.Invalid, "INVALID_BODY", "could not read the request body").WithCause(err))
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
		run, err := s.Retry(r.Context(), sc, runID, in.FromStepID)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		accepted(w, sc, run)
	})
}

// handleRunEvents replays the run's events after Last-Event-ID (or
// ?lastEventId=; from run_started without one), then follows them until
// the run's last event (job.Serve).
func handleRunEvents(s *Service, ping time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc, runID, err := pathIDs(r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		last, err := job.LastEventID(r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		var after int64
		if last != nil {
			if last.Stream != strings.ToLower(runID) {
				httpapi.WriteError(w, r, errs.E("runs.Events", errs.Invalid, job.CodeInvalidEventID,
					"the event id must be <runId>:<seq> with this run's id, as sent in an event's id field"))
				return
			}
			after = last.Seq
		}
		f, err := s.Events(r.Context(), sc, runID, after)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		job.Serve(w, r, f, ping)
	})
}

func handleCancelRun(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (workflow.Run, error) {
		sc, runID, err := pathIDs(r)
		if err != nil {
			return workflow.Run{}, err
		}
		return s.Cancel(r.Context(), sc, runID)
	})
}

func handleListRuns(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (runsList, error) {
		sc, err := pathScope(r)
		if err != nil {
			return runsList{}, err
		}
		page, err := httpapi.ParseCursorPage(r)
		if err != nil {
			return runsList{}, err
		}
		p, err := s.List(r.Context(), sc, page.Limit, page.After)
		if err != nil {
			return runsList{}, err
		}
		return runsList{WorkflowRuns: p.Runs, NextCursor: p.Next}, nil
	})
}
