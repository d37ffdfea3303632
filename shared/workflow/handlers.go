package workflow

import (
	"net/http"

	"github.com/workflowchat/service/shared/httpapi"
)

type workflowsPage struct {
	Workflows []Workflow `json:"workflows"`
	Total     int        `json:"total"`
}

type messagesList struct {
	Messages []Message `json:"messages"`
}

func handleCreate(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in CreateRequest) (Workflow, error) {
		return s.Create(r.Context(), in)
	})
}

func handleGet(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Workflow, error) {
		id, err := httpapi.PathUUID(r, "workflowId")
		if err != nil {
			return Workflow{}, err
		}
		return s.Get(r.Context(), id)
	})
}

// handleUpdate checks the path before the body (both are 400s).
func handleUpdate(s *Service) http.Handler {
	return WithWorkflowID(httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in UpdateRequest) (Workflow, error) {
		return s.Update(r.Context(), r.PathValue("workflowId"), in)
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
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (messagesList, error) {
		id, err := httpapi.PathUUID(r, "workflowId")
		if err != nil {
			return messagesList{}, err
		}
		msgs, err := s.Messages(r.Context(), id)
		return messagesList{Messages: msgs}, err
	})
}

// WithWorkflowID answers 400 INVALID_ID for a malformed workflowId before
// next reads the body.
func WithWorkflowID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := httpapi.PathUUID(r, "workflowId"); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
