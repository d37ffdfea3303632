package runs

import (
	"net/http"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
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

func handleStartRun(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in StartRunRequest) (workflow.Run, error) {
		chatID, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return workflow.Run{}, err
		}
		return s.Start(r.Context(), chatID, in.WorkflowID)
	})
}

func handleCancelRun(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (workflow.Run, error) {
		chatID, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return workflow.Run{}, err
		}
		runID, err := httpapi.PathUUID(r, "runId")
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
