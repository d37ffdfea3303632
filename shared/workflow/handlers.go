package workflow

import (
	"net/http"
	"strings"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

type workflowsPage struct {
	Workflows []Workflow `json:"workflows"`
	Total     int        `json:"total"`
}

// withETag sets the ETag header of a workflow response.
func withETag(w http.ResponseWriter, wf Workflow, err error) (Workflow, error) {
	if err == nil {
		w.Header().Set("ETag", ETag(wf.Version))
	}
	return wf, err
}

func handleCreate(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in CreateRequest) (Workflow, error) {
		wf, err := s.Create(r.Context(), in)
		return withETag(w, wf, err)
	})
}

func handleGet(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Workflow, error) {
		id, err := httpapi.PathUUID(r, "workflowId")
		if err != nil {
			return Workflow{}, err
		}
		wf, err := s.Get(r.Context(), id)
		return withETag(w, wf, err)
	})
}

// handleUpdate checks the path, then If-Match, before the body (all
// 400s).
func handleUpdate(s *Service) http.Handler {
	update := httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in UpdateRequest) (Workflow, error) {
		pre, err := ParseIfMatch(ifMatch(r))
		if err != nil {
			return Workflow{}, err
		}
		wf, err := s.Update(r.Context(), r.PathValue("workflowId"), in, pre)
		return withETag(w, wf, err)
	})
	return WithWorkflowID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := ParseIfMatch(ifMatch(r)); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		update.ServeHTTP(w, r)
	}))
}

func handleDelete(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusNoContent, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (httpapi.Empty, error) {
		id, err := httpapi.PathUUID(r, "workflowId")
		if err != nil {
			return httpapi.Empty{}, err
		}
		return httpapi.Empty{}, s.Delete(r.Context(), id)
	})
}

func handleList(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (workflowsPage, error) {
		page, err := httpapi.ParsePage(r)
		if err != nil {
			return workflowsPage{}, err
		}
		ws, total, err := s.List(r.Context(), r.PathValue("userId"), page)
		return workflowsPage{Workflows: ws, Total: total}, err
	})
}

func handleMessages(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (MessageList, error) {
		id, err := httpapi.PathUUID(r, "workflowId")
		if err != nil {
			return MessageList{}, err
		}
		before := r.URL.Query().Get("before")
		if r.URL.Query().Has("before") && !httpapi.IsUUID(before) {
			return MessageList{}, errs.Fields("workflow.Messages", errs.FieldError{Field: "before", Message: "must be a message id (a UUID)"})
		}
		return s.Messages(r.Context(), id, before)
	})
}

// WithWorkflowID answers 400 INVALID_ID for a malformed workflowId before
// next reads the body.
func WithWorkflowID(next http.Handler) http.Handler { return httpapi.PathIDs(next, "workflowId") }

// ifMatch returns the If-Match header whole (a Lambda adapter may split a
// list into several values).
func ifMatch(r *http.Request) string { return strings.Join(r.Header.Values("If-Match"), ",") }
