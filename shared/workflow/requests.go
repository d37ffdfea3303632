package workflow

import (
	"strings"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

// MaxContentLen bounds a workflow chat message.
const MaxContentLen = 32000

// CreateRequest is the body of POST /api/workflows.
type CreateRequest struct {
	UserID      string  `json:"userId"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
}

// Validate requires userId and a name of 1-255 characters, and bounds the
// description.
func (r CreateRequest) Validate() error {
	var f errs.FieldErrors
	if r.UserID == "" {
		f.Add("userId", "is required")
	}
	validateName(&f, "name", &r.Name)
	validateDescription(&f, "description", r.Description)
	return f.Err("workflow.CreateRequest")
}

// UpdateRequest is the body of PATCH /api/workflows/{workflowId}: name
// and/or description.
type UpdateRequest struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
}

// Validate requires at least one field and checks their lengths.
func (r UpdateRequest) Validate() error {
	var f errs.FieldErrors
	if r.Name == nil && r.Description == nil {
		e := errs.Fields("workflow.UpdateRequest", errs.FieldError{Field: "name", Message: "name or description is required"})
		e.Code = "NO_FIELDS"
		e.Message = "at least one of name or description must be provided"
		return e
	}
	if r.Name != nil {
		validateName(&f, "name", r.Name)
	}
	validateDescription(&f, "description", r.Description)
	return f.Err("workflow.UpdateRequest")
}

func validateName(f *errs.FieldErrors, field string, name *string) {
	switch n := utf8.RuneCountInString(strings.TrimSpace(*name)); {
	case n == 0:
		f.Add(field, "is required (1-%d characters)", MaxNameLen)
	case utf8.RuneCountInString(*name) > MaxNameLen:
		f.Add(field, "must be at most %d characters", MaxNameLen)
	}
}

func validateDescription(f *errs.FieldErrors, field string, d *string) {
	if d != nil && utf8.RuneCountInString(*d) > MaxDescriptionLen {
		f.Add(field, "must be at most %d characters", MaxDescriptionLen)
	}
}

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
	case n > MaxContentLen:
		f.Add("content", "must be at most %d characters", MaxContentLen)
	}
	if r.ModelID == "" {
		f.Add("modelId", "is required")
	}
	return f.Err("workflow.MessageRequest")
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
	return f.Err("workflow.ProposalRequest")
}
