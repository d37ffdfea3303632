package proposal

import (
	"strings"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/workflow"
)

// MessageRequest is the body of POST /api/workflows/{workflowId}/messages.
type MessageRequest struct {
	Content string `json:"content"`
	ModelID string `json:"modelId"`
}

// Validate requires content (1-32000 characters) and modelId.
func (r MessageRequest) Validate() error {
	var f errs.FieldErrors
	switch n := utf8.RuneCountInString(r.Content); {
	case strings.TrimSpace(r.Content) == "":
		f.Add("content", "is required")
	case n > workflow.MaxContentLen:
		f.Add("content", "must be at most %d characters", workflow.MaxContentLen)
	}
	if r.ModelID == "" {
		f.Add("modelId", "is required")
	}
	return f.Err("proposal.MessageRequest")
}

// ProposalRequest is the body of the apply and reject operations.
type ProposalRequest struct {
	ProposalID string `json:"proposalId"`
}

// Validate requires proposalId to be a UUID.
func (r ProposalRequest) Validate() error {
	var f errs.FieldErrors
	switch {
	case r.ProposalID == "":
		f.Add("proposalId", "is required")
	case !httpapi.IsUUID(r.ProposalID):
		f.Add("proposalId", "must be a UUID")
	}
	return f.Err("proposal.ProposalRequest")
}
