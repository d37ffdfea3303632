package proposal

import (
	"net/http"

	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/workflow"
)

func handleSend(s *Service) http.Handler {
	return workflow.WithWorkflowID(httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in MessageRequest) (Exchange, error) {
		return s.Send(r.Context(), r.PathValue("workflowId"), in)
	}))
}

func handleApply(s *Service) http.Handler {
	return workflow.WithWorkflowID(httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in ProposalRequest) (Applied, error) {
		return s.Apply(r.Context(), r.PathValue("workflowId"), in.ProposalID)
	}))
}

func handleReject(s *Service) http.Handler {
	return workflow.WithWorkflowID(httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in ProposalRequest) (Rejected, error) {
		return s.Reject(r.Context(), r.PathValue("workflowId"), in.ProposalID)
	}))
}
